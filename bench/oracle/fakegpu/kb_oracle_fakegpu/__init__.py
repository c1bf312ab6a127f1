"""An oracle-only vLLM platform plugin: vLLM's own CUDA platform with faked hardware.

vLLM calls ``register()`` (entry point group ``vllm.platform_plugins``) while it resolves
``vllm.platforms.current_platform``. An activated out-of-tree plugin wins over the built-in
ones (vllm/platforms/__init__.py, ``resolve_current_platform_cls_qualname``), so with
``VLLM_PLUGINS=fakegpu`` and ``FAKEGPU_COUNT`` set, vLLM runs on
``kb_oracle_fakegpu.platform.FakeCudaPlatform``: a subclass of ``vllm.platforms.cuda.CudaPlatform``
whose only overrides are hardware queries. Everything that validates a configuration is vLLM's.

This module must not import vLLM or torch (vLLM imports it while vllm.platforms is half set up).
"""

from __future__ import annotations

import os

PLATFORM = "kb_oracle_fakegpu.platform.FakeCudaPlatform"


def register() -> str | None:
    """Activate only when FAKEGPU_COUNT is set to a positive number."""
    raw = os.environ.get("FAKEGPU_COUNT", "").strip()
    try:
        count = int(raw)
    except ValueError:
        return None
    return PLATFORM if count > 0 else None
