"""Typed, located errors. They become one `Error: ...` line and an exit code only in the CLI."""

from __future__ import annotations


class KBError(Exception):
    """A failure the user can act on. `path` and `line` locate it when known."""

    exit_code = 1

    def __init__(self, message: str, path: str | None = None, line: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.path = path
        self.line = line

    def __str__(self) -> str:
        if self.path is None:
            return self.message
        if self.line is None:
            return f"{self.path}: {self.message}"
        return f"{self.path}:{self.line}: {self.message}"


class SourceError(KBError):
    """The vLLM tree could not be obtained: download, git ref, zip, folder."""


class ScanError(KBError):
    """The scan failed as a whole (e.g. --strict with parse warnings, zero sites)."""


class UsageError(KBError):
    exit_code = 2
