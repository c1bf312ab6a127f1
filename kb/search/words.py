"""What a word is, for the documents and for the queries: one function on both sides of the
index, and a synonym table users' shorthand goes through. The site's search.js follows
`terms` and `clauses` step by step and reads the table from the index file."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

# Words are runs of letters and digits: `--max-lora-rank`, `max_lora_rank` and "max lora rank"
# are the same three words, and a pasted `ValueError:` is the word `valueerror`.
_TERM = re.compile(r"[a-z0-9]+")
MAX_QUERY_CHARS = 2000  # a paste's tail past this would not change the ranking's head
MAX_QUERY_TERMS = 64  # a longer query is a paste: its first words are enough to rank by
PREFIX_MIN = 4  # a word this long also matches the words it starts ("quant" -> quantization)
PREFIX_BOOST = 0.1  # ... at a tenth of a whole word's weight
SYNONYM_BOOST = 1.0  # an expansion weighs as much as the words it stands for

# The shorthand users type, and the words vLLM's messages, flags and keys use for it. Keys are
# single words (as `terms` gives them); values are whole words of the index.
SYNONYMS: dict[str, tuple[str, ...]] = {
    "tp": ("tensor", "parallel"),
    "pp": ("pipeline", "parallel"),
    "dp": ("data", "parallel"),
    "ep": ("expert", "parallel"),
    "dcp": ("decode", "context", "parallel"),
    "pcp": ("prefill", "context", "parallel"),
    "kv": ("kv", "cache"),
    "oom": ("memory", "available", "cache"),
    "vram": ("memory", "gpu"),
    "mem": ("memory",),
    "util": ("utilization",),
    "bf16": ("bfloat16",),
    "fp16": ("float16", "half"),
    "fp32": ("float32",),
    "half": ("float16",),
    "ctx": ("context", "len"),
    "length": ("len",),
    "len": ("length",),
    "seq": ("sequence", "seqs"),
    "spec": ("speculative",),
    "sd": ("speculative", "decoding"),
    "mtp": ("speculative", "mtp"),
    "draft": ("speculative", "draft"),
    "bnb": ("bitsandbytes",),
    "quant": ("quantization",),
    "quantized": ("quantization",),
    "hf": ("huggingface", "hugging", "face"),
    "mm": ("multimodal",),
    "vlm": ("multimodal",),
    "vision": ("multimodal",),
    "image": ("multimodal", "image"),
    "images": ("multimodal", "image"),
    "cudagraph": ("cuda", "graph", "cudagraph"),
    "cudagraphs": ("cuda", "graph", "cudagraph"),
    "guided": ("structured", "outputs", "guided"),
    "json": ("json", "schema"),
    "function": ("tool", "function"),
    "tools": ("tool",),
    "gpus": ("gpu", "gpus"),
    "heads": ("heads", "head"),
    "moe": ("expert", "experts", "moe"),
    "experts": ("expert", "experts"),
    "rope": ("rope", "scaling"),
    "ngram": ("ngram", "prompt", "lookup"),
    "eagle": ("eagle", "speculative"),
    "lora": ("lora",),
    "adapter": ("lora", "adapter"),
    "remote": ("remote", "trust"),
    "template": ("template", "chat"),
    "prompt": ("prompt", "input"),
    "maxlen": ("max", "model", "len"),
    "awq": ("awq", "quantization"),
    "gptq": ("gptq", "quantization"),
    "w4a16": ("quantization", "compressed", "tensors"),
    "int4": ("quantization",),
    "int8": ("quantization",),
    "force": ("selected",),
    "forced": ("selected",),
    "forcing": ("selected",),
    # the GPU generations older than compute capability 8.0, by their names
    "volta": ("compute", "capability"),
    "turing": ("compute", "capability"),
    "pascal": ("compute", "capability"),
    "sm": ("compute", "capability"),
}


def _gpu_words() -> dict[str, tuple[str, ...]]:
    """A GPU's name (`v100`, `t4`, `h100`: kb/hardware.py's table) stands for its compute
    capability, which is what vLLM's messages about a GPU name."""
    from kb.hardware import GPUS

    out: dict[str, tuple[str, ...]] = {}
    for gpu in GPUS:
        for word in terms(gpu.key):  # the model, not its memory or form factor (80gb, sxm4, hbm3)
            if any(c.isalpha() for c in word) and any(c.isdigit() for c in word) and not word.endswith("gb"):
                out.setdefault(word, (word, "compute", "capability"))
    return out


def terms(text: str) -> list[str]:
    """The words of a text, lower case, in order (compatibility forms folded: a full-width
    letter or a ligature is the letter)."""
    return _TERM.findall(unicodedata.normalize("NFKC", text).lower())


for _word, _means in _gpu_words().items():
    SYNONYMS.setdefault(_word, _means)


def document_text(*parts: str) -> str:
    """A field of a document as the index is built from it: its words, one space between."""
    return " ".join(t for p in parts for t in terms(p))


@dataclass(frozen=True)
class Clause:
    """One term of the lunr query: the word, its weight, and whether it is a prefix (a prefix
    is matched as written; a whole word goes through lunr's stemmer first)."""

    term: str
    boost: float
    prefix: bool = False
    words: tuple[int, ...] = ()  # the query's words (numbers into query_words()) it stands for


def query_words(query: str) -> list[str]:
    """The words of a query that rank: each once, in the order first met."""
    return list(dict.fromkeys(terms(query[:MAX_QUERY_CHARS])[:MAX_QUERY_TERMS]))


def clauses(query: str) -> list[Clause]:
    """The lunr query for the words a user typed: every word; the words its shorthand stands
    for; and, for a long word, the words it is the start of. Each term once, at its highest
    weight, in the order first met, with the words it stands for."""
    out: dict[tuple[str, bool], float] = {}
    sources: dict[tuple[str, bool], list[int]] = {}

    def add(term: str, boost: float, n: int, prefix: bool = False) -> None:
        key = (term, prefix)
        if out.get(key, 0.0) < boost:
            out[key] = boost
        if n not in sources.setdefault(key, []):
            sources[key].append(n)

    for n, word in enumerate(query_words(query)):
        add(word, 1.0, n)
        for other in SYNONYMS.get(word, ()):
            add(other, SYNONYM_BOOST, n)
        if len(word) >= PREFIX_MIN and not word.isdigit():
            add(word, PREFIX_BOOST, n, prefix=True)
    return [Clause(term, boost, prefix, tuple(sources[(term, prefix)])) for (term, prefix), boost in out.items()]
