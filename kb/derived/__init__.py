"""Guidance kb derives from vLLM's source where nothing is curated, marked as such and never mixed
with curated text: the condition of a raise in words (condition, words, simplify, meaning), an
example fix found and proved by `kb check` (domains, fix), attached to the records (attach) and
read by every output through one function (guidance)."""
