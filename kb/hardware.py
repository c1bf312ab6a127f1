"""Common GPUs as vLLM sees them: the name torch reports (`current_platform.get_device_name()`),
the total memory torch reports (`get_device_total_memory()`, a little under the marketed size),
and the compute capability. `kb check --gpu NAME` and `kb fit --gpu NAME` read this table.

Each memory figure says where it comes from: `log` is the total a public vLLM startup log prints
for that GPU (tests/data/startup_logs.yaml), `spec` is the marketed size less the share the
driver keeps on GPUs measured here (about 1%), an estimate."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Optional

from kb.errors import UsageError


@dataclass(frozen=True)
class Gpu:
    key: str  # what `--gpu` takes (`h100`), aliases below
    name: str  # as torch reports it
    memory_gib: float  # total, as torch reports it
    capability: tuple[int, int]
    memory_from: str  # "log" | "spec"


GPUS: tuple[Gpu, ...] = (
    Gpu("h100", "NVIDIA H100 80GB HBM3", 79.19, (9, 0), "log"),
    Gpu("h100-pcie", "NVIDIA H100 PCIe", 79.19, (9, 0), "spec"),
    Gpu("h100-nvl", "NVIDIA H100 NVL", 93.1, (9, 0), "spec"),
    Gpu("h200", "NVIDIA H200", 139.72, (9, 0), "log"),
    Gpu("h20", "NVIDIA H20", 95.0, (9, 0), "spec"),
    Gpu("gh200", "NVIDIA GH200 480GB", 95.0, (9, 0), "spec"),
    Gpu("b200", "NVIDIA B200", 178.4, (10, 0), "spec"),
    Gpu("a100-80gb", "NVIDIA A100-SXM4-80GB", 79.15, (8, 0), "log"),
    Gpu("a100-40gb", "NVIDIA A100-SXM4-40GB", 39.39, (8, 0), "spec"),
    Gpu("a800", "NVIDIA A800-SXM4-80GB", 79.15, (8, 0), "spec"),
    Gpu("l40s", "NVIDIA L40S", 44.42, (8, 9), "log"),
    Gpu("l40", "NVIDIA L40", 44.42, (8, 9), "spec"),
    Gpu("l4", "NVIDIA L4", 22.05, (8, 9), "log"),
    Gpu("a10g", "NVIDIA A10G", 22.06, (8, 6), "spec"),
    Gpu("t4", "Tesla T4", 14.58, (7, 5), "spec"),
    Gpu("v100-32gb", "Tesla V100-SXM2-32GB", 31.74, (7, 0), "spec"),
    Gpu("v100-16gb", "Tesla V100-SXM2-16GB", 15.77, (7, 0), "spec"),
    Gpu("rtx-3090", "NVIDIA GeForce RTX 3090", 23.58, (8, 6), "log"),
    Gpu("rtx-4090", "NVIDIA GeForce RTX 4090", 23.52, (8, 9), "log"),
    Gpu("rtx-5090", "NVIDIA GeForce RTX 5090", 31.36, (12, 0), "spec"),
    Gpu("rtx-pro-6000", "NVIDIA RTX PRO 6000 Blackwell Server Edition", 94.97, (12, 0), "log"),
)
ALIASES = {"h100-80gb": "h100", "h100-sxm": "h100", "a100": "a100-80gb", "a100-80g": "a100-80gb",
           "a100-40g": "a100-40gb", "3090": "rtx-3090", "4090": "rtx-4090", "5090": "rtx-5090",
           "v100": "v100-32gb", "pro-6000": "rtx-pro-6000"}


def _key(text: str) -> str:
    words = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return re.sub(r"^(nvidia-)?(geforce-)?", "", words)


def gpu(text: str) -> Optional[Gpu]:
    """The GPU a `--gpu` value names: a key, an alias, or the name torch reports; else None."""
    key = _key(text)
    key = ALIASES.get(key, key)
    return next((g for g in GPUS if g.key == key or _key(g.name) == key), None)


def names() -> str:
    return ", ".join(g.key for g in GPUS)


def hardware_facts(name: Optional[str] = None, gpu_count: Optional[int] = None,
                   compute_capability: Optional[float] = None, memory_gib: Optional[float] = None) -> dict[str, Any]:
    """`kb check`'s and `kb fit`'s hardware: a GPU named from the table (its name, memory and
    capability), and the figures given, which win over the table's; UsageError for a name kb
    does not know."""
    found = None
    if name:
        found = gpu(name)
        if found is None:
            raise UsageError(f"--gpu {name!r}: not a GPU kb knows; one of: {names()} (or give --gpu-memory-gib "
                             "and --compute-capability)")
    return {"gpu_count": gpu_count,
            "compute_capability": compute_capability if compute_capability is not None else (
                float(f"{found.capability[0]}.{found.capability[1]}") if found else None),
            "gpu_memory_gib": memory_gib if memory_gib is not None else (found.memory_gib if found else None),
            "gpu_name": found.name if found else None,
            "memory_exact": found is not None and found.memory_from == "log" and memory_gib is None}
