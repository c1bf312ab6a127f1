"""What would give `kb check` the inputs of the checks it could not run for want of them: the
model's config.json, a fact of the GPU (a `kb check` option) or a value vLLM computes when it
starts (kb/checks/vocab.py says which each input is). Pure: the report words them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kb.checks.predict import Skipped
from kb.checks.vocab import INPUTS

CONFIG = "config.json"  # a key of the model's config.json (or a file beside it)
HARDWARE = "hardware"  # a fact of the GPU, given by a kb check option
STARTUP = "startup"  # a flag whose default vLLM computes when it starts (from the GPU and config.json)
OTHER = "other"
SOURCES = (CONFIG, HARDWARE, STARTUP, OTHER)  # the order the report names them in
FROM_GPU_TABLE = ("compute_capability", "gpu_memory_gib")  # what --gpu NAME gives (kb/hardware.py)
METAVARS = {"--gpu-count": "N", "--compute-capability": "X.Y", "--gpu-memory-gib": "G", "--gpu": "NAME",
            "--model-config": "FILE_OR_DIR"}


@dataclass(frozen=True)
class Need:
    """One input a check needs, and what gives it: kb check's options or vllm serve's flags."""

    input: str
    source: str
    options: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"input": self.input, "source": self.source, "options": list(self.options)}


@dataclass(frozen=True)
class NeedGroup:
    """The checks that need inputs from the same sources."""

    sources: tuple[str, ...]  # in SOURCES order
    checks: tuple[Skipped, ...]


def need_of(name: str) -> Need:
    inp = INPUTS.get(name)
    if inp is None:
        return Need(name, OTHER, ())
    if inp.kind == "config":
        return Need(name, CONFIG, ("--model-config",))
    if inp.kind == "hardware":
        return Need(name, HARDWARE, (inp.flags[0], *(("--gpu",) if name in FROM_GPU_TABLE else ())))
    if inp.fallback and inp.fallback in INPUTS and INPUTS[inp.fallback].kind == "config":
        return Need(name, CONFIG, ("--model-config", inp.flags[0]))  # --max-model-len: max_position_embeddings
    if inp.kind == "flag" and inp.flags:
        return Need(name, STARTUP, (inp.flags[0], "--gpu", "--model-config"))
    return Need(name, OTHER, ())


def needs_of(s: Skipped) -> tuple[Need, ...]:
    return tuple(need_of(name) for name in s.missing)


def sources_of(s: Skipped) -> tuple[str, ...]:
    got = {n.source for n in needs_of(s)} or {OTHER}
    return tuple(x for x in SOURCES if x in got)


def need_groups(skipped: Sequence[Skipped]) -> list[NeedGroup]:
    """The checks by the sources of what they need: config.json alone first, in SOURCES order."""
    by: dict[tuple[str, ...], list[Skipped]] = {}
    for s in skipped:
        by.setdefault(sources_of(s), []).append(s)
    rank = {x: n for n, x in enumerate(SOURCES)}
    return [NeedGroup(k, tuple(v)) for k, v in sorted(by.items(), key=lambda kv: (len(kv[0]), [rank[x] for x in kv[0]]))]


def count_by_source(skipped: Sequence[Skipped]) -> dict[str, list[Skipped]]:
    """Source -> the checks that need an input from it (a check may need several sources)."""
    out: dict[str, list[Skipped]] = {}
    for s in skipped:
        for source in sources_of(s):
            out.setdefault(source, []).append(s)
    return {x: out[x] for x in SOURCES if x in out}
