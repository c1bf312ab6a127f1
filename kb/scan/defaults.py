"""What the scan looks for by default: constants shared by the scanner and the CLI, in a module
that imports nothing (`kb check` starts without loading the scanner)."""

from __future__ import annotations

from collections.abc import Callable

TREE = "vllm"  # every exception class that the scanned tree defines
# What users meet: ValueError (vLLM's config validation), the exception classes vLLM defines
# (VLLMValidationError, ChatTemplateResolutionError, ...) and the builtins vLLM raises most.
DEFAULT_EXCEPTIONS = ("ValueError", TREE, "RuntimeError", "TypeError", "NotImplementedError")
Progress = Callable[[int, int], None]
