"""Every error type of kb, in one place. Each carries the path and line of what is wrong when
they are known; they become one `Error: ...` line and an exit code only in the CLI. A finding
that is no failure (a warning) is a `Located`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

# Exit codes, one table (README, "Exit codes"); the CLI returns them.
EXIT_OK = 0
EXIT_FAILURE = 1  # a failure; `kb check`: an error predicted; `kb explain`, `kb search`: nothing found
EXIT_USAGE = 2  # bad usage or bad input; `kb check`: a check could not be evaluated
EXIT_NOT_JUDGED = 3  # `kb check`: no error predicted, but checks that could raise lacked inputs
EXIT_INTERRUPTED = 130


@dataclass(frozen=True)
class Located:
    """A finding at a place: a file that does not parse, a problem in a curated entry."""

    path: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


class KBError(Exception):
    """A failure the user can act on. `path` and `line` locate it when known."""

    exit_code = EXIT_FAILURE

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


class UsageError(KBError):
    """The command line (or the MkDocs plugin's options) asks for something impossible."""

    exit_code = EXIT_USAGE


class SourceError(KBError):
    """The vLLM tree could not be obtained: download, git ref, zip, folder."""


class ScanError(KBError):
    """The scan failed as a whole (e.g. --strict with parse warnings, zero sites)."""


class EntryError(KBError):
    """Malformed curated entries: each problem is located (`errors/x.yaml:3: ...`)."""

    def __init__(self, problems: Sequence[str], hint: str = "") -> None:
        super().__init__(f"{len(problems)} problem(s) in curated entries{hint}")
        self.problems = list(problems)


class ExprError(KBError):
    """A check expression outside the evaluator's whitelist, or one that fails to evaluate."""


class MissingInput(ExprError):
    """A check expression reads an input that the launch does not give."""

    def __init__(self, name: str) -> None:
        super().__init__(f"needs input {name!r}")
        self.name = name


class WorkBudgetExceeded(ExprError):
    """A derived check whose evaluations took more than a command's work budget
    (kb/checks/evaluate.py COMMAND_WORK): dropped for the rest of the command."""

    def __init__(self) -> None:
        super().__init__(OVER_BUDGET)


OVER_BUDGET = "its condition exceeds kb's work budget"


class CallTimeout(KBError):
    """A `kb mcp` tool call ran past the server's time limit: answered as a tool error, its work stopped."""
