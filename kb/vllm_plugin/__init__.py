"""The vLLM plugin (`pip install 'vllm-error-kb[vllm]'`): after vLLM's own error, two lines that
point at the answer: the error's title, then its id, page and first fix (kb/explain/short.py).

vLLM loads the entry point `vllm.general_plugins` -> `register` in every process it starts (the
API server, the engine core, each worker). `register` only installs hooks (kb/vllm_plugin/hooks.py)
and imports nothing else: the answers are read (kb/vllm_plugin/answer.py) only when an error is on
its way out. Nothing of the plugin may change what vLLM does: no exception of its own escapes, and
KB_VLLM_PLUGIN=0 turns it off."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

OFF_ENV = "KB_VLLM_PLUGIN"  # 0, false, no or off: the plugin does nothing
SITE_ENV = "KB_VLLM_PLUGIN_SITE"  # a built site whose match index answers (instead of kb's cache)
_OFF = ("0", "false", "no", "off")


def turned_off(environ: Mapping[str, str]) -> bool:
    return environ.get(OFF_ENV, "").strip().lower() in _OFF


def register() -> None:
    """vLLM's general plugin: install the hooks once in this process (a no-op when turned off)."""
    try:
        if turned_off(os.environ):
            return
        from kb.vllm_plugin.hooks import install

        install()
    except Exception:  # a broken plugin changes nothing: vLLM goes on as without it
        pass
