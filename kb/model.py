"""Frozen dataclasses that cross stages."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional, Self

from kb.errors import Located

if TYPE_CHECKING:
    from kb.configmodel import ConfigModel
    from kb.derivedmodel import DerivedGuidance
    from kb.setby import SetBy

REPO = "vllm-project/vllm"


@dataclass(frozen=True)
class TreeInfo:
    """Where a scanned tree came from."""

    kind: str  # "dir", "git", "wheel"
    location: str  # folder, repository URL or wheel path
    ref: str  # git ref used for links: a full sha or a release tag
    commit: Optional[str]  # full sha (git), or the (abbreviated) commit a wheel's version file names; None: unknown
    commit_date: Optional[str]  # ISO 8601 UTC date of the commit or the release build
    release: Optional[str]  # vLLM version, when known
    dirty: bool = False  # a git work tree with uncommitted changes


class _Fields:
    """A flat frozen dataclass of plain values, to and from a JSON object of its fields."""

    def to_json(self) -> dict[str, Any]:
        return dict(vars(self))

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Self:
        return cls(**d)


@dataclass(frozen=True)
class Context(_Fields):
    """A non-`if` construct enclosing a raise: an except handler, a loop, a match case, a with."""

    kind: str  # except, for, while, for-else, while-else, case, with
    source: str
    line: int


@dataclass(frozen=True)
class LocalDef(_Fields):
    """An assignment, before the raise, of a name that the guard reads. `conditional`: it is in an
    `if`, a loop, a `try`, a `with` or a `match` that does not enclose the raise, so the name may
    hold an earlier value there."""

    name: str
    source: str
    line: int
    conditional: bool = False


@dataclass(frozen=True)
class CallArg(_Fields):
    """What one call passes for one parameter: the argument's source, or the default's."""

    param: str
    source: str
    passed: bool  # False: the call leaves it to the parameter's default


@dataclass(frozen=True)
class Caller:
    """A call, in the same file, of the function a raise is in: what it passes for the
    parameters the guard reads, the caller's assignments of the names those arguments read,
    and (one hop further) the callers of the caller for its own parameters they read."""

    qualname: str
    line: int
    args: tuple[CallArg, ...]
    locals: tuple[LocalDef, ...]
    callers: tuple[Caller, ...] = ()
    # the conditions the call runs under in its function (its `if`s, and the early exits before
    # it), negated where it is in an `else`; REACH_UNKNOWN when it is in a loop, `try`, `with`, `match`
    guard: tuple[str, ...] = ()

    def to_json(self) -> list[Any]:
        return [self.qualname, self.line, [a.to_json() for a in self.args], [d.to_json() for d in self.locals],
                [c.to_json() for c in self.callers], list(self.guard)]

    @staticmethod
    def from_json(v: list[Any]) -> Caller:
        return Caller(v[0], v[1], tuple(CallArg.from_json(a) for a in v[2]),
                      tuple(LocalDef.from_json(d) for d in v[3]), tuple(Caller.from_json(c) for c in v[4]),
                      tuple(v[5]))


REACH_UNKNOWN = "?"  # a condition kb does not read: the statement is in a loop, a `try`, a `with` or a `match`


@dataclass(frozen=True)
class RaiseFact:
    """A raise statement as found in one file, before its exception class is resolved."""

    line: int
    end_line: int
    qualname: str
    exception: str  # as written: ValueError, errors.StructuredDecisionError
    exception_name: str  # the last dotted component, used to resolve the class
    template: str
    unresolved: bool
    message_kind: str
    guard_terms: tuple[str, ...]
    contexts: tuple[Context, ...]
    locals: tuple[LocalDef, ...]
    decorators: tuple[str, ...]  # of the enclosing function
    pydantic_class: bool  # enclosing class is a pydantic dataclass or model
    validation: Optional[str]  # field_validator, model_validator, post_init, ... or None
    parts: tuple[str, ...] = ()  # templates of the parts of a list joined into the message at run time
    builder: str = ""  # the function called for the message (`raise ValueError(_make_msg(x))`), else ""
    callers: tuple[Caller, ...] = ()  # same-file calls of its function, for the parameters the guard reads
    # the early exits before it in its function (`if value is None: return`), negated: it is reached
    # only when none is taken; REACH_UNKNOWN for one kb does not read
    exits: tuple[str, ...] = ()

    @property
    def guard(self) -> str:
        return join_guard(self.guard_terms)

    def to_json(self) -> list[Any]:
        return [
            self.line, self.end_line, self.qualname, self.exception, self.exception_name,
            self.template, self.unresolved, self.message_kind, list(self.guard_terms),
            [c.to_json() for c in self.contexts], [d.to_json() for d in self.locals],
            list(self.decorators), self.pydantic_class, self.validation, list(self.parts), self.builder,
            [c.to_json() for c in self.callers], list(self.exits),
        ]

    @staticmethod
    def from_json(v: list[Any]) -> RaiseFact:
        return RaiseFact(
            v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], tuple(v[8]),
            tuple(Context.from_json(c) for c in v[9]), tuple(LocalDef.from_json(d) for d in v[10]),
            tuple(v[11]), v[12], v[13], tuple(v[14]), v[15], tuple(Caller.from_json(c) for c in v[16]),
            tuple(v[17]),
        )


@dataclass(frozen=True)
class ClassFact:
    name: str
    bases: tuple[str, ...]  # last dotted component of each base
    line: int


@dataclass(frozen=True)
class Builder:
    """Where a message is built away from its raise: a function that returns one (`kind`
    "function"), or an exception class whose `__init__` passes one to `super().__init__`
    ("exception"). `templates`: with the arguments as placeholders; `bare`: as raised without
    arguments (defaults filled in)."""

    name: str
    line: int
    kind: str
    templates: tuple[str, ...]
    bare: tuple[str, ...] = ()

    def to_json(self) -> list[Any]:
        return [self.name, self.line, self.kind, list(self.templates), list(self.bare)]

    @staticmethod
    def from_json(v: list[Any]) -> Builder:
        return Builder(v[0], v[1], v[2], tuple(v[3]), tuple(v[4]))


@dataclass(frozen=True)
class FileFacts:
    """Everything the scanner needs from one file; depends only on the file's bytes."""

    classes: tuple[ClassFact, ...] = ()
    raises: tuple[RaiseFact, ...] = ()
    error: Optional[tuple[int, str]] = None  # (line, message) when the file does not parse
    skipped: tuple[tuple[int, str], ...] = ()  # (line, message) of statements that could not be scanned
    builders: tuple[Builder, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "c": [[c.name, list(c.bases), c.line] for c in self.classes],
            "r": [r.to_json() for r in self.raises],
            "e": list(self.error) if self.error else None,
            "s": [list(s) for s in self.skipped],
            "b": [b.to_json() for b in self.builders],
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> FileFacts:
        return FileFacts(
            tuple(ClassFact(c[0], tuple(c[1]), c[2]) for c in d["c"]),
            tuple(RaiseFact.from_json(r) for r in d["r"]),
            (d["e"][0], d["e"][1]) if d["e"] else None,
            tuple((s[0], s[1]) for s in d["s"]),
            tuple(Builder.from_json(b) for b in d["b"]),
        )


@dataclass(frozen=True)
class Excerpt:
    start: int
    lines: tuple[str, ...]
    # The quote of a multi-line string that is still open where the excerpt starts (so that
    # highlighting the excerpt alone lexes it as a string), else "".
    open_string: str = ""

    @property
    def end(self) -> int:
        return self.start + len(self.lines) - 1


@dataclass(frozen=True)
class RaiseSite:
    """One raise of a ValueError (or of a class in the chosen set) at a file and line."""

    id: str
    file: str
    fact: RaiseFact
    exception_class: str  # the resolved class name
    excerpt: Excerpt

    @property
    def line(self) -> int:
        return self.fact.line

    @property
    def template(self) -> str:
        return self.fact.template

    @property
    def pydantic_wrapped(self) -> bool:
        return self.fact.validation is not None

    def to_json(self) -> dict[str, Any]:
        f = self.fact
        return {
            "contexts": [c.to_json() for c in f.contexts],
            "decorators": list(f.decorators),
            "end_line": f.end_line,
            "exception": f.exception,
            "exception_class": self.exception_class,
            "excerpt": {"end": self.excerpt.end, "lines": list(self.excerpt.lines), "start": self.excerpt.start},
            "file": self.file,
            "guard": f.guard,
            "guard_terms": list(f.guard_terms),
            "id": self.id,
            "line": f.line,
            "locals": [d.to_json() for d in f.locals],
            "message_kind": f.message_kind,
            "message_parts": list(f.parts),
            "pydantic": {"class": f.pydantic_class, "validation": f.validation, "wrapped": self.pydantic_wrapped},
            "qualname": f.qualname,
            "template": f.template,
            "unresolved": f.unresolved,
        }


@dataclass(frozen=True)
class ScanResult:
    """Every raise site of the chosen classes in one tree, with what the scan read."""

    tree: TreeInfo
    id_scheme: str
    exceptions: tuple[str, ...]  # the resolved set of class names scanned for
    sites: tuple[RaiseSite, ...]  # sorted by (file, line)
    files: int
    bytes: int
    excluded_files: int
    warnings: tuple[Located, ...]
    # path -> content hash of each file that holds sites: what a record's page is made from
    file_keys: dict[str, str] = field(default_factory=dict, compare=False)
    # vLLM's configuration read from the same tree (kb.config): the `vllm serve` flags
    config: Optional[ConfigModel] = field(default=None, compare=False)

    @property
    def ids(self) -> dict[str, list[RaiseSite]]:
        out: dict[str, list[RaiseSite]] = {}
        for s in self.sites:
            out.setdefault(s.id, []).append(s)
        return out

    @property
    def counts(self) -> dict[str, int]:
        return {
            "bytes": self.bytes,
            "excluded_files": self.excluded_files,
            "files": self.files,
            "ids": len({s.id for s in self.sites}),
            "parse_warnings": len(self.warnings),
            "sites": len(self.sites),
            "unresolved_templates": sum(1 for s in self.sites if s.fact.unresolved),
        }


def join_guard(terms: tuple[str, ...] | list[str]) -> str:
    """Terms are already parenthesised where needed (see scan.term_source)."""
    return " and ".join(terms)


# --- curated entries (errors/*.yaml), as the loader hands them over -------------------------
@dataclass(frozen=True)
class Situation:
    text: str
    references: tuple[str, ...] = ()


@dataclass(frozen=True)
class ExampleFix:
    language: str
    before: str
    after: str
    model_config: dict[str, Any] = field(default_factory=dict)
    hardware: dict[str, Any] = field(default_factory=dict)
    # a request error's fix: the request's sampling parameters on each side (the launch is `before`
    # and `after`, the same command); None for a launch's fix
    request_before: Optional[dict[str, Any]] = None
    request_after: Optional[dict[str, Any]] = None


@dataclass(frozen=True)
class Defensive:
    """Code that keeps the error from reaching users: validation, a type guard or try/except."""

    strategy: str
    title: str
    code: str


@dataclass(frozen=True)
class Case:
    inputs: dict[str, Any]
    raises: bool
    line: int


@dataclass(frozen=True)
class Check:
    inputs: tuple[str, ...]
    raises_when: str
    bindings: dict[str, Any]
    cases: tuple[Case, ...]
    source_check: str  # auto or manual
    source_reason: Optional[str]
    line: int
    reached_when: Optional[str] = None  # when vLLM runs the guard's function at all; raises_when implies it

    def to_json(self) -> dict[str, Any]:
        return {"inputs": list(self.inputs), "raisesWhen": self.raises_when, "reachedWhen": self.reached_when,
                "sourceBindings": dict(sorted(self.bindings.items())), "sourceCheck": self.source_check,
                "sourceReason": self.source_reason,
                "cases": [{"inputs": c.inputs, "raises": c.raises} for c in self.cases]}


@dataclass(frozen=True)
class Verified:
    release: str
    guard: str


@dataclass(frozen=True)
class Family:
    """errors/families/<slug>.yaml: the mechanism that several entries share, explained once;
    each member's page shows it and links to the others."""

    slug: str  # the file's name
    path: str  # errors/families/<slug>.yaml as given
    title: str
    explanation: str  # markdown
    members: tuple[str, ...]  # entry ids, in the file's order
    lines: dict[str, int] = field(default_factory=dict, compare=False, repr=False)  # "members.0" -> line

    def line_of(self, *path: Any) -> int:
        key = ".".join(str(p) for p in path)
        while key and key not in self.lines:
            key = key.rpartition(".")[0]
        return self.lines.get(key, 1)

    def to_json(self) -> dict[str, Any]:
        return {"slug": self.slug, "title": self.title, "explanation": self.explanation, "members": list(self.members)}


@dataclass(frozen=True)
class Report:
    """errors/reports/*.yaml: one public report (a GitHub issue or PR) that quotes an error's
    message; its title is the words a user with the same problem types, so search reads it."""

    id: str  # the error it quotes, in the release the report file was written for
    url: str
    title: str
    quote: str  # the error line the report quotes, checked against the error's template
    path: str  # errors/reports/<name>.yaml as given
    line: int

    def to_json(self) -> dict[str, str]:
        return {"url": self.url, "title": self.title}


@dataclass(frozen=True)
class Entry:
    id: str
    path: str  # errors/<slug>.yaml as given
    meaning: str
    message: Optional[str] = None
    file: Optional[str] = None
    solutions: tuple[str, ...] = ()
    example_fix: Optional[ExampleFix] = None
    defensive: Optional[Defensive] = None
    prevention: tuple[str, ...] = ()
    trigger: str = ""
    common_situations: tuple[Situation, ...] = ()
    related: tuple[str, ...] = ()
    references: tuple[str, ...] = ()
    check: Optional[Check] = None
    no_check: Optional[str] = None
    verified: Optional[Verified] = None
    supersedes: tuple[str, ...] = ()  # removed error ids whose check this error now makes (V0 -> V1 engine)
    family: Optional[Family] = None  # set by the loader from errors/families/
    lines: dict[str, int] = field(default_factory=dict, compare=False, repr=False)  # "a.b.0" -> line

    def line_of(self, *path: Any) -> int:
        key = ".".join(str(p) for p in path)
        while key and key not in self.lines:
            key = key.rpartition(".")[0]
        return self.lines.get(key, 1)


# --- releases ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Wording:
    """One error id as a range of releases raised it: what the lookup needs to recognise the
    message users of those releases paste, and to say what it became."""

    id: str
    template: str
    file: str
    line: int
    function: str
    exception_class: str
    first: str  # the first and last release that raise this id
    last: str
    current: Optional[str]  # the id raised in the newest release (itself when unchanged); None when removed
    ended_in: Optional[str] = None  # the first release without this wording (edited, moved or removed then)
    chain: str = ""  # the last id of its history (the current id, or the last one raised before removal)
    next: str = ""  # the id it became in `ended_in` when its message was edited or moved there, else ""


@dataclass(frozen=True)
class Appearance:
    """An id as it was in one release."""

    release: str
    id: str
    file: str
    lines: tuple[int, ...]
    template: str
    guard: str


@dataclass(frozen=True)
class Record:
    """One error id with everything a page and an API record need."""

    id: str
    slug: str
    title: str
    template: str
    exception_class: str
    sites: tuple[RaiseSite, ...]  # sorted by line; all in one file (the file is part of the id)
    subsystem: str
    related: tuple[str, ...]
    entry: Optional[Entry] = None  # when curated
    stale: tuple[str, ...] = ()  # why a curated entry may be out of date
    history: tuple[Appearance, ...] = ()  # per release, oldest first (multi-release builds)
    removed_since: Optional[str] = None  # the first release that no longer raises it
    ref: Optional[str] = None  # git ref of the release its sites come from, when not the newest
    aliases: tuple[str, ...] = ()  # older ids that now lead here
    checked: bool = False  # the entry's check passes its cases and vLLM's guard, its example fix runs right
    setby: Optional[SetBy] = None  # what sets it: its guard's inputs resolved against the flag model
    reports: tuple[Report, ...] = ()  # public reports that quote its message (errors/reports/)
    derived: Optional[DerivedGuidance] = None  # what kb derives from the source for it (kb/derived/)

    @property
    def file(self) -> str:
        return self.sites[0].file

    @property
    def line(self) -> int:
        return self.sites[0].line

    @property
    def curated(self) -> bool:
        return self.entry is not None


@dataclass(frozen=True)
class Problem:
    """A located finding of the merge: reported by `kb lint`."""

    path: str
    line: int
    message: str
    # orphan (an id no release kb knows raises), removed (an error vLLM no longer raises), newer (an
    # error first raised after the built release), stale (re-verify it), carried (followed, and its
    # check agrees with the new source: only `verified:` to update), related, related-removed (a
    # related id the release no longer raises), report
    kind: str
    candidates: tuple[str, ...] = ()  # for a removed error: the nearest ids the release raises

    @property
    def quiet(self) -> bool:
        """Not a warning of a build: the entry is right where it is."""
        return self.kind in ("carried", "newer")

    @property
    def kept(self) -> bool:
        """Knowledge of an error the release no longer raises: kept for the releases that raise
        it (their builds, and the all-release build, show it); a note, not a problem."""
        return self.kind in ("removed", "related-removed")

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


@dataclass(frozen=True)
class Merged:
    """The records of a release with the curated entries merged, and what the merge found."""

    records: tuple[Record, ...]  # `checked` set where the entry's check and example fix pass
    problems: tuple[Problem, ...]
    verification: tuple[Located, ...] = ()  # why the other checks did not pass
