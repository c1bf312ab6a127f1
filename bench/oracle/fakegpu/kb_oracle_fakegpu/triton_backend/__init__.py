"""A Triton backend (entry point group ``triton.backends``) whose driver is active on the fake GPUs.

vLLM sets ``HAS_TRITON`` (vllm/triton_utils/importing.py) only when exactly one non-CPU Triton
driver reports ``is_active()``. Triton's NVIDIA driver answers with ``torch.cuda.is_available()``,
which is False here (the stub libcuda.so.1 reports no device), so on its own vLLM would turn
Triton off and, among other things, fall back from Model Runner V2 to V1. This backend's driver is
Triton's own NVIDIA ``CudaDriver`` with two hardware queries answered from FAKEGPU_*:
``is_active()`` (True when FAKEGPU_COUNT > 0) and ``get_current_target()`` (cuda, the faked
capability, warp 32). Its compiler never claims a target, so compiling still goes to NVIDIA's.
Nothing in vLLM is patched.
"""
