"""vLLM's CUDA platform with the hardware queries answered from FAKEGPU_* variables.

FAKEGPU_COUNT        number of GPUs (required, > 0)
FAKEGPU_CAPABILITY   compute capability "major.minor" (default 9.0)
FAKEGPU_MEMORY_GIB   total memory per GPU in GiB, may be fractional (default 80)
FAKEGPU_NAME         device name (default "NVIDIA H100 80GB HBM3")
FAKEGPU_SMS          streaming multiprocessors per GPU (default 132, an H100 SXM)
FAKEGPU_NVLINK       "1" (default): all GPUs fully connected by NVLink; "0": not

Only methods that ask the hardware are overridden. Methods that check a configuration
(check_and_update_config, check_if_supports_dtype, attention backend selection, ...) are
vLLM's own and see the faked answers, exactly as they would see a real GPU's.
"""

from __future__ import annotations

import os
from functools import cache

from vllm.platforms.cuda import CudaPlatform
from vllm.platforms.interface import DeviceCapability


def _count() -> int:
    return int(os.environ.get("FAKEGPU_COUNT", "0"))


def _capability() -> DeviceCapability:
    raw = os.environ.get("FAKEGPU_CAPABILITY", "9.0").strip()
    major, _, minor = raw.partition(".")
    return DeviceCapability(major=int(major), minor=int(minor or 0))


def _memory_bytes() -> int:
    return int(float(os.environ.get("FAKEGPU_MEMORY_GIB", "80")) * (1 << 30))


def _name() -> str:
    return os.environ.get("FAKEGPU_NAME", "NVIDIA H100 80GB HBM3")


def _visible_count() -> int:
    """CUDA_VISIBLE_DEVICES narrows the devices as the CUDA runtime would."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return _count()
    ids = [x for x in visible.split(",") if x.strip()]
    return min(len(ids), _count())


class FakeCudaPlatform(CudaPlatform):
    """vllm.platforms.cuda.CudaPlatform (NonNvmlCudaPlatform here: no NVML on the machine)."""

    @classmethod
    def device_count(cls) -> int:
        return _visible_count()

    @classmethod
    @cache
    def get_device_capability(cls, device_id: int = 0) -> DeviceCapability:
        return _capability()

    @classmethod
    def get_device_name(cls, device_id: int = 0) -> str:
        return _name()

    @classmethod
    def get_device_uuid(cls, device_id: int = 0) -> str:
        return f"GPU-fake0000-0000-0000-0000-{device_id:012d}"

    @classmethod
    def get_device_total_memory(cls, device_id: int = 0) -> int:
        return _memory_bytes()

    @classmethod
    def is_fully_connected(cls, physical_device_ids: list[int]) -> bool:
        return os.environ.get("FAKEGPU_NVLINK", "1") != "0"

    @classmethod
    def get_device_numa_node(cls, device_id: int = 0) -> int | None:
        return None

    @classmethod
    def get_all_device_numa_nodes(cls) -> list[int] | None:
        return None

    @classmethod
    def get_all_gpu_pci_bus_ids(cls) -> dict[int, str]:
        return {i: f"00000000:{i + 1:02X}:00.0" for i in range(_count())}

    @classmethod
    def is_integrated_gpu(cls, device_id: int = 0) -> bool:
        return False

    @classmethod
    def num_compute_units(cls, device_id: int = 0) -> int:
        return int(os.environ.get("FAKEGPU_SMS", "132"))

    @classmethod
    def is_arch_support_pdl(cls) -> bool:
        return _capability().major >= 9

    @classmethod
    def log_warnings(cls) -> None:
        return None
