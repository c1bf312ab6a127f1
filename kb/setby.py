"""What sets an error, as data: the inputs its guard reads, resolved to what a user controls
(kb/config/resolve.py finds them), each with its kind, and the error's reachability class.
Records carry it (`Record.setby`); the pages, the API and `kb check` read it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

# Kinds of input, as pages name them.
FLAG, CONFIG_JSON, CHECKPOINT, ENV, REQUEST_FIELD, HARDWARE, INTERNAL, UNRESOLVED = (
    "flag", "config-json", "checkpoint", "env", "request-field", "hardware", "internal", "unresolved")
# Reachability classes.
LAUNCH, REQUEST, MODEL, RUNTIME, INVARIANT = (
    "launch configuration", "request", "model checkpoint", "hardware/run time", "internal invariant")
REACHABILITY = (LAUNCH, REQUEST, MODEL, RUNTIME, INVARIANT)
KIND_LABELS = {FLAG: "flag", CONFIG_JSON: "config.json key", CHECKPOINT: "from the model checkpoint",
               ENV: "environment variable", REQUEST_FIELD: "request field", HARDWARE: "hardware or run time", INTERNAL: "internal: not set by users",
               UNRESOLVED: "not resolved by kb"}

NOT_FOLLOWED = "not followed by kb: a parameter, a call or a name it does not know"


@dataclass(frozen=True)
class Input:
    """One thing a guard reads, as users know it. `read` is the source text read (after locals);
    `via` is how it was resolved, in words built from the source."""

    kind: str
    key: str  # the flag (`--tensor-parallel-size`), the config.json key, the variable, or the source text
    read: str
    via: str
    default: Optional[str] = None  # as vLLM's --help shows it
    choices: Optional[tuple[str, ...]] = None
    help: str = ""
    flag_page: Optional[str] = None  # its page: `flags/<name>/`, `env/<VAR>/`, `config-json/<key>/`

    @property
    def label(self) -> str:
        return self.key

    @property
    def resolved(self) -> bool:
        return self.kind != UNRESOLVED

    def to_json(self) -> dict[str, Any]:
        """The input as API records carry it: `read` only where it differs from `key`; `default`,
        `choices`, `help` and `page` only where there is one (thousands of records carry inputs)."""
        out: dict[str, Any] = {"kind": self.kind, "key": self.key, "via": self.via}
        if self.read != self.key:
            out["read"] = self.read
        if self.default is not None:
            out["default"] = self.default
        if self.choices is not None:
            out["choices"] = list(self.choices)
        if self.help:
            out["help"] = self.help
        if self.flag_page:
            out["page"] = f"/{self.flag_page}"
        return out


@dataclass(frozen=True)
class SetBy:
    """What sets one error: the inputs its guard reads, those of the earlier checks of the same
    block (it is raised only when they pass), its reachability class and why, and the trigger
    written with users' names."""

    inputs: tuple[Input, ...]
    earlier: tuple[Input, ...]
    reachability: str
    basis: str  # why that class, in words
    trigger: str  # the innermost condition and what encloses it, with flags and keys for names
    unparsed: int = 0  # guard terms too long or not Python (counted, never guessed)

    @property
    def resolved(self) -> bool:
        return self.unparsed == 0 and all(i.resolved for i in self.inputs)

    def to_json(self) -> dict[str, Any]:
        return {"inputs": [i.to_json() for i in self.inputs], "earlier": [i.to_json() for i in self.earlier],
                "reachability": self.reachability, "basis": self.basis, "trigger": self.trigger,
                "resolved": self.resolved}
