"""Records -> what an error page shows, once for every format: the site's HTML pages and the
MkDocs plugin's Markdown pages are both rendered from these view models (pure functions)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Optional

from kb.checks.evaluate import readable, to_tree
from kb.checks.vocab import INPUTS, UNKNOWN
from kb.derived.guidance import DERIVED, Guidance, guidance
from kb.entries.markdown import ERROR_ID
from kb.hardware import Gpu
from kb.model import Entry, Excerpt, RaiseSite, Record
from kb.records.present import Trigger, github_url, shown_lines, trigger_of
from kb.site.api import SiteInfo, json_ld

FULL_EXCERPTS = 3  # sites of one id shown with their guard (present.shown_lines); the rest with 7 lines
SHORT_RADIUS = 3
SHOWN_EXCERPTS = 10  # sites past these are listed without an excerpt: keeps every page under 50 KB
SHOWN_TRIGGERS = 20  # conditions written out on a page; the rest are the linked sites
SHOWN_INPUTS = 30  # inputs of "What sets this" on a page (all of them are in the API record)


@dataclass(frozen=True)
class Summary:
    """What a list or a related-errors link shows of a record."""

    id: str
    title: str
    file: str
    line: int
    curated: bool
    stale: bool = False


def summary(r: Record) -> Summary:
    return Summary(r.id, r.title, r.file, r.line, r.curated, bool(r.stale))


@dataclass(frozen=True)
class SiteView:
    file: str
    line: int
    end_line: int
    function: str
    exception: str
    github: str
    excerpt: Excerpt
    first: int  # the excerpt lines shown: all of them (full) or a few around the raise
    last: int
    full: bool
    shown: bool  # its excerpt is on the page (else only its place and link)
    trigger: Trigger
    pydantic: bool
    validation: Optional[str]


@dataclass(frozen=True)
class CheckInput:
    """One input of a check's form on the page."""

    name: str
    doc: str
    where: str
    type: str
    value: str  # an example value that raises, else the default, as the form shows it
    minimum: str = ""  # the smallest value that means anything (kb check refuses less), "" when none
    kind: str = ""  # flag, config, hardware
    flag: str = ""  # its long option, for a flag


@dataclass(frozen=True)
class CheckView:
    inputs: tuple[CheckInput, ...]
    condition: str
    tree: str  # the condition as a JSON tree for static/check.js
    manual: bool
    reason: Optional[str]
    # the other verified checks that read one of its count flags: [tree, inputs, defaults of those
    # inputs], so that the form lists the valid values of a count as `kb check` does (kb/checks/valid.py)
    peers: str = "[]"


@dataclass(frozen=True)
class FitView:
    """The memory pages' calculator (static/fit.js): kb fit's constants and the release's defaults."""

    defs: str  # JSON of kb.fit.memory.definitions
    example: str  # a config.json to start from
    gpus: tuple[Gpu, ...]  # kb/hardware.py's table, for the form's GPU list
    utilization: float


@dataclass(frozen=True)
class FixView:
    model_config: dict[str, Any]
    hardware: dict[str, Any]
    language: str
    before: str
    after: str
    checked: bool
    derived: bool = False  # found and proved by kb (kb/derived/fix.py), not curated
    change: str = ""  # a derived fix's change, in words (Markdown)


@dataclass(frozen=True)
class HistoryRow:
    release: str
    id: str
    file: str
    lines: str
    template: str
    changes: str


class TriggerGroup(NamedTuple):
    """Sites with the same trigger are listed once, with their lines."""

    trigger: Trigger
    lines: tuple[int, ...]


@dataclass(frozen=True)
class FamilyView:
    """The mechanism a page's error shares with its siblings (errors/families/), shown once."""

    slug: str
    title: str
    explanation: str  # markdown
    size: int  # members in the family
    members: tuple[Summary, ...]  # every member with a page, the page's own among them, in the family's order


def family_ids(record: Record) -> tuple[str, ...]:
    """The ids of the record's family, its own among them; () outside a family."""
    e = record.entry
    return e.family.members if e is not None and e.family is not None else ()


def cited_ids(record: Record) -> tuple[str, ...]:
    """The error ids its curated prose cites (each becomes a link to that page with its title),
    in order of first mention, its own id left out."""
    e = record.entry
    if e is None:
        return ()
    texts = [e.meaning, *e.solutions, *e.prevention, e.trigger, *(c.text for c in e.common_situations)]
    if e.family is not None:
        texts.append(e.family.explanation)
    found = dict.fromkeys(m.group(0) for t in texts for m in ERROR_ID.finditer(t))
    found.pop(record.id, None)
    return tuple(found)


def family_view(record: Record, members: Sequence[Summary]) -> Optional[FamilyView]:
    e = record.entry
    if e is None or e.family is None:
        return None
    f = e.family
    return FamilyView(f.slug, f.title, f.explanation, len(f.members), tuple(members))


@dataclass(frozen=True)
class ErrorView:
    record: Record
    entry: Optional[Entry]
    ref: str  # the git ref its sites link to
    sites: tuple[SiteView, ...]
    triggers: tuple[TriggerGroup, ...]
    related: tuple[Summary, ...]
    check: Optional[CheckView]
    fix: Optional[FixView]
    history: tuple[HistoryRow, ...]
    fit: Optional[FitView] = None
    json_ld: str = ""  # the page's schema.org TechArticle (kb.site.api.json_ld), safe inside <script>
    family: Optional[FamilyView] = None
    guidance: Guidance = field(default_factory=Guidance)  # each section curated, derived or empty (kb/derived/guidance.py)
    canonical: str = ""  # the site path of the live page this one is an older release's page of, else ""
    cites: tuple[Summary, ...] = ()  # the errors its curated prose cites by id (cited_ids) that have a page

    @property
    def noindex(self) -> bool:
        """Offered to search engines only with curated or derived guidance (or as an older page of a live one)."""
        return not self.guidance.helps and not self.canonical


def error_view(record: Record, info: SiteInfo, related: list[Summary], family: Sequence[Summary] = (),
               canonical: str = "", cites: Sequence[Summary] = ()) -> ErrorView:
    """`family`: the summaries of the members of the record's family (family_ids) that have a page;
    `canonical`: the id of the live page of a removed error (live_pages), else ""; `cites`: the
    summaries of the ids its prose cites (cited_ids) that have a page."""
    ref = record.ref or info.tree.ref
    full = FULL_EXCERPTS if len(record.sites) <= 4 else 1  # keeps pages of many-site ids under 50 KB
    sites = tuple(site_view(s, ref, i < full, i < SHOWN_EXCERPTS, record.curated) for i, s in enumerate(record.sites))
    groups: list[tuple[Trigger, list[int]]] = []
    for view in sites:
        same = next((g for g in groups if g[0] == view.trigger), None)
        if same is None:
            groups.append((view.trigger, [view.line]))
        else:
            same[1].append(view.line)
    return ErrorView(
        record=record, entry=record.entry, ref=ref, sites=sites,
        triggers=tuple(TriggerGroup(t, tuple(lines)) for t, lines in groups), related=tuple(related),
        check=check_view(record, info.checks), fix=fix_view(record), history=history_view(record),
        fit=fit_view(record, info), json_ld=json_ld(record, info), family=family_view(record, family),
        guidance=guidance(record), canonical=f"errors/{canonical}/" if canonical else "", cites=tuple(cites),
    )


def live_pages(records: Sequence[Record]) -> dict[str, str]:
    """Removed error id -> the id of the live error that raises the same message today (its page is
    the canonical one); removed errors whose message no live error raises are left out."""
    by_template: dict[str, str] = {}
    for r in records:
        if r.removed_since is None and r.template and r.template not in by_template:
            by_template[r.template] = r.id
    return {r.id: by_template[r.template] for r in records if r.removed_since is not None and r.template in by_template}


# the calculator starts from a 48-head, 8-KV-head, 64-layer model on one H100
FIT_EXAMPLE = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 6144,
               "num_attention_heads": 48, "num_key_value_heads": 8, "num_hidden_layers": 64, "head_dim": 128,
               "intermediate_size": 24576, "vocab_size": 128256, "max_position_embeddings": 131072,
               "torch_dtype": "bfloat16"}


def fit_view(record: Record, info: SiteInfo) -> Optional[FitView]:
    """The calculator, on the pages of the memory errors kb fit predicts (kb/fit/launch.py TEMPLATES)."""
    from kb.fit.launch import fit_error_key
    from kb.hardware import GPUS

    if fit_error_key(record.template) is None:
        return None
    util = json.loads(info.fit_defs).get("utilization", 0.92)
    return FitView(info.fit_defs, json.dumps(FIT_EXAMPLE, indent=1), GPUS, util)


def site_view(site: RaiseSite, ref: str, full: bool, shown: bool = True, curated: bool = False) -> SiteView:
    e = site.excerpt
    first, last = shown_lines(site, curated) if full else (max(e.start, site.line - SHORT_RADIUS),
                                                  min(e.end, site.fact.end_line + SHORT_RADIUS))
    return SiteView(site.file, site.line, site.fact.end_line, site.fact.qualname, site.fact.exception,
                    github_url(ref, site.file, site.line), e, first, last, full, shown, trigger_of(site),
                    site.pydantic_wrapped, site.fact.validation)


def fix_view(record: Record) -> Optional[FixView]:
    x = guidance(record).fix
    if x is None:
        return None
    return FixView(x.model_config, x.hardware, x.language, x.before, x.after, x.proved, x.origin == DERIVED, x.change)


def check_view(record: Record, checks: Sequence[tuple[str, tuple[str, ...], str]] = ()) -> Optional[CheckView]:
    """The check as the page shows it: inputs (with where each comes from), the condition,
    and the same condition as a JSON tree for static/check.js; the other checks (`checks`: every
    verified one, SiteInfo.checks) that read one of its count flags. Only for verified checks."""
    e = record.entry
    if e is None or e.check is None or not record.checked:
        return None
    c = e.check
    inputs = []
    for name in c.inputs:
        inp = INPUTS[name]
        where = {"flag": " / ".join(inp.flags), "config": "config.json " + " or ".join(inp.paths[:2]),
                 "hardware": "hardware"}[inp.kind]
        default = inp.default if inp.default is not UNKNOWN else None
        example = next((case.inputs[name] for case in c.cases if case.raises and name in case.inputs), default)
        value = "" if example is None else example if isinstance(example, str) else json.dumps(example)
        minimum = "" if inp.minimum is None else f"{inp.minimum:g}"
        inputs.append(CheckInput(name, inp.doc, where, inp.type, value, minimum, inp.kind,
                                 inp.flags[0] if inp.kind == "flag" and inp.flags else ""))
    flags = {name for name in c.inputs if name in INPUTS and INPUTS[name].kind == "flag" and INPUTS[name].type == "int"}
    peers = [[json.loads(tree), list(names), _defaults(names)] for ident, names, tree in checks
             if ident != record.id and flags & set(names)]
    return CheckView(tuple(inputs), readable(c.raises_when), json.dumps(to_tree(c.raises_when)),
                     c.source_check == "manual", c.source_reason, json.dumps(peers, sort_keys=True))


def _defaults(names: Sequence[str]) -> dict[str, Any]:
    """vLLM's defaults of the flags among the inputs, as `kb check` fills them in."""
    return {n: INPUTS[n].default for n in names if n in INPUTS and INPUTS[n].kind == "flag"
            and INPUTS[n].default is not UNKNOWN}


def history_view(record: Record) -> tuple[HistoryRow, ...]:
    """One row per release the error appears in: where, and what changed since the row before."""
    rows: list[HistoryRow] = []
    previous = None
    for a in record.history:
        changes: list[str] = []
        if previous is not None:
            if a.id != previous.id:
                changes.append("message edited" if a.file == previous.file else f"moved from {previous.file}")
            elif a.guard != previous.guard:
                changes.append("guard changed")
            elif a.lines != previous.lines:
                changes.append("line moved")
        rows.append(HistoryRow(a.release, a.id, a.file, ", ".join(map(str, a.lines)), a.template, ", ".join(changes)))
        previous = a
    return tuple(rows)
