"""errors/*.yaml -> curated entries, validated, and errors/families/*.yaml -> the families
they belong to. Every problem carries `path:line`.

The file formats are the JSON Schemas kb/schemas/entry.schema.json and family.schema.json; the
loader reports every problem of a file (unknown key, wrong type, missing field, bad id, raw HTML
in markdown, check expressions outside the whitelist, duplicate ids across files, a family
member that is no entry or is in two families) before giving up on it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

import jsonschema

from kb.checks.evaluate import names_of, parse
from kb.checks.vocab import INPUTS
from kb.entries.markdown import MAX_ENTRY_PROSE, problems_in
from kb.entries.yamldata import YamlProblem, read_yaml
from kb.errors import ExprError, Located
from kb.model import Case, Check, Defensive, Entry, ExampleFix, Family, Report, Situation, Verified
from kb.paths import FAMILIES, REPORTS, SCHEMAS

SCHEMA_PATH = SCHEMAS / "entry.schema.json"
FAMILY_SCHEMA_PATH = SCHEMAS / "family.schema.json"
REPORT_SCHEMA_PATH = SCHEMAS / "report.schema.json"
MIN_EXPLANATION = 200  # characters of a family's explanation, as of an entry's meaning (tests/test_curated.py)
_MARKDOWN_FIELDS = ("meaning", "trigger")
_MARKDOWN_LISTS = ("solutions", "prevention")
_SLUG = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
_ID = re.compile(r"[0-9a-f]{16}")
_NAME = r"(?!\.\.?/)[\w.-]+"  # a GitHub owner or repository name; "." and ".." are none
_FULL_URL = re.compile(rf"https://github\.com/{_NAME}/{_NAME}/(?:issues|pull)/[0-9]+")


@dataclass(frozen=True)
class Loaded:
    entries: tuple[Entry, ...]  # each member of a family carries it (Entry.family)
    problems: tuple[Located, ...]
    families: tuple[Family, ...] = ()
    reports: tuple[Report, ...] = ()  # sorted by id, then URL, then where each is written


@lru_cache(maxsize=2)
def _validator(path: Path = SCHEMA_PATH) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads(path.read_text(encoding="utf-8")))


def load_entries(folder: Path) -> Loaded:
    """Every `*.yaml` of `folder` and of its `families/` and `reports/` folders, sorted by name.
    Malformed files are left out and reported.

    Loaded once per process while the files are unchanged (jobs over many releases read the
    same entries for each)."""
    paths = sorted(folder.glob("*.yaml"))
    family_paths = sorted((folder / FAMILIES).glob("*.yaml"))
    report_paths = sorted((folder / REPORTS).glob("*.yaml"))
    try:
        key = (str(folder.resolve()), tuple((str(p.relative_to(folder)), p.stat().st_mtime_ns, p.stat().st_size)
                                            for p in paths + family_paths + report_paths))
    except OSError:
        return _load_entries(folder, paths, family_paths, report_paths)
    if key not in _LOADED:
        _LOADED.clear()
        _LOADED[key] = _load_entries(folder, paths, family_paths, report_paths)
    return _LOADED[key]


_LOADED: dict[tuple[str, tuple[tuple[str, int, int], ...]], Loaded] = {}


def _load_entries(folder: Path, paths: list[Path], family_paths: Sequence[Path] = (),
                  report_paths: Sequence[Path] = ()) -> Loaded:
    entries: list[Entry] = []
    problems: list[Located] = []
    seen: dict[str, str] = {}
    for path in paths:
        shown = _shown(path, folder)
        entry, found = load_entry(path, shown)
        problems.extend(found)
        if entry is None:
            continue
        if entry.id in seen:
            problems.append(Located(shown, entry.line_of("id"), f"duplicate id {entry.id}: also in {seen[entry.id]}"))
            continue
        seen[entry.id] = shown
        entries.append(entry)
    families, found = _families(folder, family_paths, seen)
    problems.extend(found)
    owner = {m: f for f in families for m in f.members}
    entries = [replace(e, family=owner[e.id]) if e.id in owner else e for e in entries]
    reports: list[Report] = []
    for path in report_paths:
        found_reports, found = load_reports(path, f"{folder.name}/{REPORTS}/{path.name}")
        reports.extend(found_reports)
        problems.extend(found)
    # a report listed twice (or one GitHub thread under two URLs) is the merge's to locate: it
    # follows older ids to the error each report lands on
    reports.sort(key=lambda r: (r.id, r.url, r.path, r.line))
    return Loaded(tuple(entries), tuple(problems), tuple(families), tuple(reports))


def load_reports(path: Path, shown: str) -> tuple[list[Report], list[Located]]:
    """One file of public reports; a file with a problem is left out whole. Whether each quote
    matches its error's template is the merge's to say (it has the release's templates)."""
    data, lines, problems = _read(path, shown)
    if problems:
        return [], problems
    problems = _schema_problems(data, lines, shown, REPORT_SCHEMA_PATH)
    if problems:
        return [], problems
    for i, r in enumerate(data["reports"]):  # what a schema pattern's `$` lets through (a final newline)
        at = f"reports.{i}"
        if not _ID.fullmatch(r["id"]):
            problems.append(Located(shown, lines.get(f"{at}.id", 1), f"{at}.id must be 16 lowercase hex characters "
                                                                     "alone, without white space or a final newline"))
        if not _FULL_URL.fullmatch(r["url"]):
            problems.append(Located(shown, lines.get(f"{at}.url", 1), f"{at}.url must be a GitHub issue or PR URL "
                                                                      "alone (no white space, no final newline, no "
                                                                      "'.' or '..' for a name)"))
        if not " ".join(r["title"].split()):
            problems.append(Located(shown, lines.get(f"{at}.title", 1), f"{at}.title is empty"))
        if not r["quote"].strip():
            problems.append(Located(shown, lines.get(f"{at}.quote", 1), f"{at}.quote is empty"))
    if problems:
        return [], problems
    return [Report(r["id"], r["url"], " ".join(r["title"].split()), r["quote"].strip(), shown,
                   lines.get(f"reports.{i}", 1)) for i, r in enumerate(data["reports"])], []


def _families(folder: Path, paths: Sequence[Path], entries: dict[str, str]) -> tuple[list[Family], list[Located]]:
    """The families whose every member is a loaded entry (`entries`: id -> file) in no other
    family; a family with a problem is left out whole, its members stay entries without one."""
    families: list[Family] = []
    problems: list[Located] = []
    owner: dict[str, str] = {}
    for path in paths:
        shown = f"{folder.name}/{FAMILIES}/{path.name}"
        family, found = load_family(path, shown)
        problems.extend(found)
        if family is None:
            continue
        for i, member in enumerate(family.members):
            if member not in entries:
                found.append(Located(shown, family.line_of("members", i),
                                     f"unknown member {member}: no entry in {folder.name}/ has this id"))
            elif member in owner:
                found.append(Located(shown, family.line_of("members", i),
                                     f"member {member} ({entries[member]}) is also in {owner[member]}: "
                                     "an entry is in at most one family"))
        problems.extend(found)
        if found:
            continue
        owner.update((m, shown) for m in family.members)
        families.append(family)
    return families, problems


def _shown(path: Path, folder: Path) -> str:
    return f"{folder.name}/{path.name}"


MAX_BYTES = 1 << 20  # an entry is a few KB; the cap bounds the time and memory of reading one


def _read(path: Path, shown: str) -> tuple[Any, dict[str, int], list[Located]]:
    """The YAML data of one file and the line of each key, or the problem that stops reading it."""
    try:
        if not path.is_file():  # a FIFO or a device would block or never end
            return None, {}, [Located(shown, 1, "cannot read: not a regular file")]
        with path.open("rb") as f:
            raw = f.read(MAX_BYTES + 1)
        if len(raw) > MAX_BYTES:
            return None, {}, [Located(shown, 1, f"cannot read: larger than {MAX_BYTES // 1024} KiB")]
        text = raw.decode("utf-8")
    except OSError as e:
        return None, {}, [Located(shown, 1, f"cannot read: {e.strerror or e}")]
    except UnicodeDecodeError as e:
        return None, {}, [Located(shown, raw.count(b"\n", 0, e.start) + 1, f"cannot read: not UTF-8 ({e.reason})")]
    try:
        data, lines = read_yaml(text)
    except YamlProblem as e:
        return None, {}, [Located(shown, e.line, e.message)]
    if data is None:
        return None, {}, [Located(shown, 1, "empty file")]
    return data, lines, []


def load_entry(path: Path, shown: str) -> tuple[Optional[Entry], list[Located]]:
    data, lines, problems = _read(path, shown)
    if problems:
        return None, problems
    problems = _schema_problems(data, lines, shown)
    if problems:
        return None, problems
    problems = _content_problems(data, lines, shown)
    if problems:
        return None, problems
    return _entry(data, lines, shown), []


def load_family(path: Path, shown: str) -> tuple[Optional[Family], list[Located]]:
    """One family file on its own; its members are checked against the entries by the caller."""
    data, lines, problems = _read(path, shown)
    if problems:
        return None, problems
    problems = _schema_problems(data, lines, shown, FAMILY_SCHEMA_PATH)
    if problems:
        return None, problems
    slug = path.name.removesuffix(".yaml")
    if not _SLUG.match(slug):
        problems.append(Located(shown, 1, f"the file name must be a slug (lowercase words joined by -), got {slug!r}"))
    explanation = data["explanation"]
    problems.extend(Located(shown, lines.get("explanation", 1), p) for p in problems_in(explanation, "explanation"))
    if len(" ".join(explanation.split())) < MIN_EXPLANATION:
        problems.append(Located(shown, lines.get("explanation", 1),
                                f"explanation is shorter than {MIN_EXPLANATION} characters: explain the mechanism"))
    for where, text in _strings(data, ""):
        if "TODO" in text:
            problems.append(Located(shown, lines.get(where, 1), f"unfinished: TODO left in {where}"))
    first: dict[str, int] = {}
    for i, member in enumerate(data["members"]):
        if member in first:
            problems.append(Located(shown, lines.get(f"members.{i}", 1),
                                    f"member {member} is listed twice (members.{first[member]} and members.{i})"))
        first.setdefault(member, i)
    if problems:
        return None, problems
    return Family(slug, shown, data["title"], explanation, tuple(data["members"]), lines), []


def _schema_problems(data: Any, lines: dict[str, int], shown: str, schema: Path = SCHEMA_PATH) -> list[Located]:
    out = []
    for error in sorted(_validator(schema).iter_errors(data), key=lambda e: (list(map(str, e.absolute_path)), e.message)):
        where = ".".join(str(p) for p in error.absolute_path)
        out.append(Located(shown, _line(lines, where, error), _describe(error, where)))
    return sorted(out, key=lambda p: (p.line, p.message))


def _line(lines: dict[str, int], where: str, error: jsonschema.ValidationError) -> int:
    if error.validator == "additionalProperties":
        for key in _extra_keys(error):
            key_path = f"{where}.{key}" if where else key
            if key_path in lines:
                return lines[key_path]
    key = where
    while key and key not in lines:
        key = key.rpartition(".")[0]
    return lines.get(key, 1)


def _extra_keys(error: jsonschema.ValidationError) -> list[str]:
    allowed = set(error.schema.get("properties", {})) if isinstance(error.schema, dict) else set()
    return sorted(k for k in error.instance if k not in allowed) if isinstance(error.instance, dict) else []


def _describe(error: jsonschema.ValidationError, where: str) -> str:
    field_name = where or "the entry"
    v = error.validator
    if v == "additionalProperties":
        keys = _extra_keys(error)
        return f"unknown key {', '.join(repr(k) for k in keys)}" + (f" in {where}" if where else "")
    if v == "required":
        missing = error.message.split("'")[1] if "'" in error.message else error.message
        return f"missing field {missing!r}" + (f" in {where}" if where else "")
    if v == "type":
        value = error.validator_value
        expected = value if isinstance(value, str) else " or ".join(map(str, value)) if isinstance(value, list) else str(value)
        return f"{field_name} must be {_a(expected)} (got {_kind(error.instance)})"
    if v == "pattern" and (where == "id" or (where.startswith("reports.") and where.endswith(".id"))):
        return f"id must be 16 lowercase hex characters (got {error.instance!r})"
    if v == "pattern" and where.startswith("members."):
        return f"{field_name} must be an entry id, 16 lowercase hex characters (got {error.instance!r})"
    if v == "pattern" and ("references" in where or (where.startswith("reports.") and where.endswith(".url"))):
        return f"{field_name} must be a GitHub issue or PR URL (https://github.com/OWNER/REPO/issues/N or /pull/N), got {error.instance!r}"
    if v == "pattern":
        return f"{field_name} does not match {error.validator_value!r} (got {error.instance!r})"
    if v == "enum":
        choices = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
        return f"{field_name} must be one of {', '.join(map(str, choices))} (got {error.instance!r})"
    if v in ("minLength", "minItems"):
        return f"{field_name} is empty or too short"
    if v == "maxLength":
        return f"{field_name} is longer than {error.validator_value} characters"
    return f"{field_name}: {error.message}"


def _a(kind: str) -> str:
    names = {"object": "a mapping", "array": "a list", "string": "a string", "integer": "an integer",
             "number": "a number", "boolean": "true or false", "null": "null"}
    return names.get(kind, kind)


def _kind(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean", int: "an integer",
            float: "a number", type(None): "null"}.get(type(value), type(value).__name__)


def _content_problems(data: dict[str, Any], lines: dict[str, int], shown: str) -> list[Located]:
    """What the schema cannot say: raw HTML, script links and images in markdown, check expressions,
    input names."""
    out: list[Located] = []

    def at(path: str) -> int:
        key = path
        while key and key not in lines:
            key = key.rpartition(".")[0]
        return lines.get(key, 1)

    texts = [(f, data.get(f)) for f in _MARKDOWN_FIELDS] + [
        (f"{f}.{i}", t) for f in _MARKDOWN_LISTS for i, t in enumerate(data.get(f, []))] + [
        (f"common_situations.{i}.text", c.get("text")) for i, c in enumerate(data.get("common_situations", []))]
    prose = sum(len(text) for _, text in texts if isinstance(text, str))
    if prose > MAX_ENTRY_PROSE:
        return [Located(shown, 1, f"more than {MAX_ENTRY_PROSE} characters of markdown in one entry ({prose})")]
    for where, text in texts:
        if isinstance(text, str):
            out.extend(Located(shown, at(where), problem) for problem in problems_in(text, where))
    for where, text in _strings(data, ""):
        if "TODO" in text:
            out.append(Located(shown, at(where), f"unfinished: TODO left in {where}"))
    check = data.get("check")
    if check is not None and data.get("no_check") is not None:
        out.append(Located(shown, at("no_check"), "an entry has either a check or no_check, not both"))
    if check is not None:
        out.extend(_check_problems(check, at, shown))
    first: dict[str, int] = {}
    for i, old in enumerate(data.get("supersedes", [])):
        if not _ID.fullmatch(old):
            out.append(Located(shown, at(f"supersedes.{i}"), f"supersedes.{i} must be an error id alone, 16 "
                                                             "lowercase hex characters without white space"))
        elif old == data.get("id"):
            out.append(Located(shown, at(f"supersedes.{i}"), f"supersedes.{i} is this entry's own id"))
        elif old in first:
            out.append(Located(shown, at(f"supersedes.{i}"),
                               f"{old} is listed twice (supersedes.{first[old]} and supersedes.{i})"))
        first.setdefault(old, i)
    references = set(data.get("references", []))
    for i, situation in enumerate(data.get("common_situations", [])):
        for j, ref in enumerate(situation.get("references", [])):
            if ref not in references:
                out.append(Located(shown, at(f"common_situations.{i}.references.{j}"),
                                   f"{ref} is cited by a situation but missing from references"))
    return out


def _strings(value: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(v, f"{path}.{k}" if path else k)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _strings(v, f"{path}.{i}" if path else str(i))


def _check_problems(check: dict[str, Any], at: Any, shown: str) -> list[Located]:
    out: list[Located] = []
    declared = list(check["inputs"])
    for i, name in enumerate(declared):
        if name not in INPUTS:
            out.append(Located(shown, at(f"check.inputs.{i}"), f"unknown input {name!r}: not in the vocabulary (kb/vocab.py)"))
    for key in ("raises_when", "reached_when"):
        if key not in check:
            continue
        try:
            for name in names_of(parse(check[key])):
                if name not in declared:
                    out.append(Located(shown, at(f"check.{key}"), f"{key} reads {name!r}, which is not in inputs"))
        except ExprError as e:
            out.append(Located(shown, at(f"check.{key}"), f"{key}: {e.message}"))
    for key, value in check.get("source_bindings", {}).items():
        if isinstance(value, str):
            try:
                for name in names_of(parse(value)):
                    if name not in declared:
                        out.append(Located(shown, at(f"check.source_bindings.{key}"),
                                           f"binding of {key!r} reads {name!r}, which is not in inputs"))
            except ExprError as e:
                out.append(Located(shown, at(f"check.source_bindings.{key}"), f"binding of {key!r}: {e.message}"))
    if check.get("source_check") == "manual" and not check.get("source_reason"):
        out.append(Located(shown, at("check.source_check"), "source_check: manual needs a source_reason"))
    for i, case in enumerate(check["cases"]):
        for name in case["inputs"]:
            if name not in declared:
                out.append(Located(shown, at(f"check.cases.{i}.inputs.{name}"), f"case input {name!r} is not in inputs"))
    if check["cases"] and not ({c["raises"] for c in check["cases"]} >= {True, False}):
        out.append(Located(shown, at("check.cases"), "cases need at least one that raises and one that does not"))
    return out


def _entry(data: dict[str, Any], lines: dict[str, int], shown: str) -> Entry:
    fix = data.get("example_fix")
    defensive = data.get("defensive")
    check = data.get("check")
    verified = data.get("verified")
    return Entry(
        id=data["id"],
        path=shown,
        meaning=data["meaning"],
        message=data.get("message"),
        file=data.get("file"),
        solutions=tuple(data.get("solutions", [])),
        example_fix=ExampleFix(fix["language"], fix["before"], fix["after"], fix.get("model_config", {}),
                               fix.get("hardware", {})) if fix else None,
        defensive=Defensive(defensive["strategy"], defensive["title"], defensive["code"]) if defensive else None,
        prevention=tuple(data.get("prevention", [])),
        trigger=data.get("trigger", ""),
        common_situations=tuple(Situation(c["text"], tuple(c.get("references", [])))
                                for c in data.get("common_situations", [])),
        related=tuple(data.get("related", [])),
        references=tuple(data.get("references", [])),
        check=Check(
            tuple(check["inputs"]), check["raises_when"], dict(check.get("source_bindings", {})),
            tuple(Case(c["inputs"], c["raises"], lines.get(f"check.cases.{i}", 1)) for i, c in enumerate(check["cases"])),
            check.get("source_check", "auto"), check.get("source_reason"), lines.get("check", 1),
            check.get("reached_when"),
        ) if check else None,
        no_check=data.get("no_check"),
        verified=Verified(str(verified["release"]), verified["guard"]) if verified else None,
        supersedes=tuple(data.get("supersedes", [])),
        lines=lines,
    )
