"""Whole jobs, as the CLI runs them: source -> scan (-> document)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional, Sequence

from kb.errors import KBError, ScanError
from kb.factcache import FactCache
from kb.model import ScanResult
from kb.paths import cache_dir
from kb.scan import Progress, scan
from kb.source import SourceSpec, open_tree

if TYPE_CHECKING:
    from kb.build import BuildOptions, BuildReport


def scan_release(
    spec: SourceSpec,
    exceptions: Sequence[str] = ("ValueError",),
    jobs: Optional[int] = None,
    use_cache: bool = True,
    strict: bool = False,
    progress: Optional[Progress] = None,
) -> ScanResult:
    cache = cache_dir()
    facts = FactCache(cache / "facts" if use_cache else None)
    try:
        with open_tree(spec, cache) as tree:
            result = scan(tree, exceptions, jobs=jobs, cache=facts, progress=progress, strict=strict)
    finally:
        facts.close()
    if not result.sites:
        raise ScanError(f"no raise of {', '.join(exceptions)} found in {result.files} files: is this a vLLM tree?")
    return result


def build_release(spec: SourceSpec, options: "BuildOptions", jobs: Optional[int] = None, use_cache: bool = True,
                  progress: Optional[Callable[[str, int, int], None]] = None) -> "BuildReport":
    """Scan the tree, merge, render the whole site into `options.output` (swapped in at the end)."""
    from kb.build import build_site

    scan_progress = (lambda done, total: progress("files scanned", done, total)) if progress else None
    result = scan_release(spec, jobs=jobs, use_cache=use_cache, progress=scan_progress)
    return build_site(result, options, progress=progress)


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` via a temporary file beside it: never a half-written file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


__all__ = ["KBError", "build_release", "scan_release", "write_atomic"]
