"""Triton's NVIDIA compiler, never selected: compiling for a cuda target stays with NVIDIA's backend."""

import triton.backends.nvidia.compiler as _nvidia


class FakeGpuCUDABackend(_nvidia.CUDABackend):
    # Triton's discovery requires exactly one concrete BaseBackend subclass in this module.

    @staticmethod
    def supports_target(target):
        return False
