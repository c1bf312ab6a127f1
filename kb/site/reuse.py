"""A rebuild whose inputs did not change keeps the site as it is.

The input key is a digest of everything a site is made from: each tree's files (a wheel's
member stamps, else their bytes) and what kb read of it, the curated entries, kb's own files
(code, templates, the data it ships), the libraries that shape the output, and the build's
options. The manifest keeps it with a digest of the site's files (kb/site/output.py); a build
of the same key over a site whose files still match writes nothing. What that build warned
about, and its figures, are kept in the cache under the key, so the rebuild says them again."""

from __future__ import annotations

import contextlib
import hashlib
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from kb.files import compact_json, write_atomic
from kb.paths import FAMILIES, PACKAGE_DIR, REPORTS, data_dir
from kb.scan.scanner import content_key

if TYPE_CHECKING:
    from kb.scan.source import Tree
    from kb.site.build import BuildOptions, BuildReport

REUSE_FORMAT = "kb-build-record/1"
# the libraries whose version can change a byte of the site
LIBRARIES = ("jinja2", "markupsafe", "pygments", "markdown", "lunr", "pyyaml", "jsonschema")


def input_key(trees: Sequence[Tree], options: BuildOptions, errors: Path, keep_going: bool) -> str:
    """The digest of everything the site of `trees` (oldest first) is made from."""
    h = hashlib.blake2b(digest_size=16)
    h.update(json.dumps([REUSE_FORMAT, sys.version_info[:3], [_version(name) for name in LIBRARIES],
                         options.site_url, options.report_repo, keep_going, len(trees)]).encode())
    for tree in trees:
        h.update(repr((tree.info, tree.excluded, tree.warnings, len(tree.paths))).encode())
        for path in tree.paths:
            stamp = tree.stamp(path) if tree.stamp is not None else content_key(tree.read(path))
            h.update(f"{path}\0{stamp}\0".encode("utf-8", "surrogateescape"))
    shipped = data_dir("errors")  # the contribute page is made from the shipped README, whatever --errors says
    entries = [*errors.glob("*.yaml"), *(errors / FAMILIES).glob("*.yaml"), *(errors / REPORTS).glob("*.yaml")]
    for name, folder, files in (("kb", PACKAGE_DIR, PACKAGE_DIR.rglob("*")),
                                ("templates", data_dir("templates"), data_dir("templates").rglob("*")),
                                ("errors", errors, entries), ("readme", shipped, [shipped / "README.md"])):
        h.update(f"\0{name}\0".encode())
        for p in sorted(files):
            if "__pycache__" not in p.parts and p.is_file():
                h.update(f"{p.relative_to(folder).as_posix()}\0".encode("utf-8", "surrogateescape"))
                with p.open("rb") as f:
                    h.update(hashlib.file_digest(f, "blake2b").digest())  # read in steps, however large
    return h.hexdigest()


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return ""


@dataclass(frozen=True)
class Record:
    """What a build of one input key said and made, kept in the cache."""

    warnings: Optional[tuple[str, ...]]  # None: the build was not asked to say them
    records: int
    largest_page: tuple[str, int]


def _record_path(cache: Path, key: str) -> Path:
    return cache / "builds" / f"{key}.json"


def remember(cache: Path, key: str, warnings: Optional[Sequence[str]], report: BuildReport) -> None:
    data = {"format": REUSE_FORMAT, "warnings": list(warnings) if warnings is not None else None,
            "records": report.records, "largestPage": list(report.largest_page)}
    with contextlib.suppress(OSError):  # a cache that cannot be written only costs time
        write_atomic(_record_path(cache, key), compact_json(data))


def recall(cache: Path, key: str) -> Optional[Record]:
    try:
        data = json.loads(_record_path(cache, key).read_text(encoding="utf-8"))
        if data.get("format") != REUSE_FORMAT:
            return None
        path, size = data["largestPage"]
        warnings = data["warnings"]
        return Record(tuple(str(w) for w in warnings) if warnings is not None else None, int(data["records"]),
                      (str(path), int(size)))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


@dataclass(frozen=True)
class Previous:
    """What became of the previous build of the same inputs at the output folder."""

    report: Optional[BuildReport] = None  # the site is kept as it is: its report
    warnings: tuple[str, ...] = ()  # what its build warned about, to say again
    damaged: bool = False  # built from these inputs, but its files are no longer what it wrote


def previous(output: Path, key: str, cache: Path, warned: bool = True) -> Previous:
    """The report of the site at `output` and the warnings its build said, when it was built
    from `key` and its files are still what that build wrote (their digest); else no report (nor
    when the warnings are `warned` for and that build was not asked to word them). The temporary
    folders of killed builds beside it are removed, as a build would."""
    from kb.site.build import BuildReport
    from kb.site.output import check_site, remove_stale

    record = recall(cache, key)
    found = check_site(output, key)
    if not found.intact or record is None or (warned and record.warnings is None):
        return Previous(damaged=found.built_from and not found.intact)
    remove_stale(output)
    return Previous(BuildReport(output, record.records, 0, 0, found.files, found.bytes, record.largest_page),
                    record.warnings or ())
