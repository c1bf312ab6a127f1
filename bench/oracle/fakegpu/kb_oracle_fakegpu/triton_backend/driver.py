"""Triton's NVIDIA driver with is_active()/get_current_target() answered from FAKEGPU_*."""

import os

import triton.backends.compiler as _compiler
import triton.backends.nvidia.driver as _nvidia


def _fake_count() -> int:
    try:
        return int(os.environ.get("FAKEGPU_COUNT", "0"))
    except ValueError:
        return 0


class FakeGpuCudaDriver(_nvidia.CudaDriver):
    # Triton's discovery requires exactly one concrete DriverBase subclass in this module.

    @staticmethod
    def is_active():
        return _fake_count() > 0

    def get_current_target(self):
        major, _, minor = os.environ.get("FAKEGPU_CAPABILITY", "9.0").partition(".")
        return _compiler.GPUTarget("cuda", int(major) * 10 + int(minor or 0), 32)
