"""The plugin's answer to one exception: the lines printed after vLLM's own error. Read only when
an error is on its way out (kb/vllm_plugin/hooks.py), offline:

1. the match index of a built site, when KB_VLLM_PLUGIN_SITE names one;
2. else the answer store of the installed vLLM release in kb's cache, when `kb explain` compiled
   it (kb/store.py; never a scan, never a download);
3. else what ships with kb: the wordings of every published release and the curated entries
   (kb/explain/shipped.py), of the installed release or, for a release kb does not know, of the
   nearest one it knows, said so.

Only an exception that passed through vLLM's code is answered (a frame of its traceback, or of
a cause's, is in the `vllm` package), and only when its message is one of vLLM's templates."""

from __future__ import annotations

import sys
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Optional

from kb.vllm_plugin import SITE_ENV

if TYPE_CHECKING:
    from kb.explain.match import Matcher

PREFIX = "[vllm-error-kb] "
MAX_ANSWERS = 3  # errors answered for one exception (its causes too), two lines each
URL_HINT = ("Set KB_SITE_URL to the error site's URL to print whole links "
            "(these are paths on the site; `kb explain` gives the whole answer).")


@dataclass(frozen=True)
class Answers:
    matcher: Matcher
    release: Optional[str]  # the release the answers are of (None: a site built from a tree that is none)
    source: str  # site, cache or shipped


def answer_lines(exc: BaseException, environ: Mapping[str, str]) -> list[str]:
    """The lines for `exc`: for each vLLM error found in it (at most MAX_ANSWERS), its title with
    the release the answer is of, then `kb explain --format short`'s line (kb/explain/short.py:
    id, page, first fix; without a fix, that line alone, ending with the title); then, when links
    are paths, how to make them whole. Nothing for an error that is not vLLM's."""
    from kb.explain.match import explain
    from kb.explain.short import short_answer, short_line

    chain = chain_of(exc)
    if not any(_in_vllm(e) for e in chain):
        return []
    installed = installed_release()
    answers = answers_for(installed, environ)
    if answers is None:
        return []
    ex = explain(paste_of(chain), answers.matcher, suggest=False)
    site_url = _site_url(environ)
    about = release_note(answers, installed)
    lines = []
    for f in ex.found[:MAX_ANSWERS]:
        a = short_answer(f, site_url, answers.release)
        if a.fix:
            lines += [f"{PREFIX}{a.title}{about}", PREFIX + short_line(a)]
        else:  # the short line ends with the title
            lines.append(PREFIX + short_line(a) + about)
    if lines and site_url is None:
        lines.append(PREFIX + URL_HINT)
    return lines


def release_note(answers: Answers, installed: Optional[str]) -> str:
    """Which release the answer is of, when it is not the installed one."""
    release = answers.release
    if release is None or release == installed:
        return f" (vLLM {release})" if release else ""
    if installed is None:
        return f" (vLLM {release}; the installed release is unknown)"
    if answers.source == "site":
        return f" (vLLM {release}, the release of the site {SITE_ENV} names; yours is {installed})"
    return f" (vLLM {release}, the release kb knows nearest to yours, {installed})"


def chain_of(exc: BaseException) -> list[BaseException]:
    """`exc` and its causes as Python prints them: the first cause first, `exc` last."""
    out: list[BaseException] = []
    e: Optional[BaseException] = exc
    while e is not None and not any(e is o for o in out) and len(out) < 16:
        out.append(e)
        e = e.__cause__ if e.__cause__ is not None else None if e.__suppress_context__ else e.__context__
    return out[::-1]


def _in_vllm(exc: BaseException) -> bool:
    return any(_is_vllm(tb) for tb in _frames(exc))


def _frames(exc: BaseException) -> list[TracebackType]:
    out = []
    tb = exc.__traceback__
    while tb is not None:
        out.append(tb)
        tb = tb.tb_next
    return out


def _is_vllm(tb: TracebackType) -> bool:
    name = tb.tb_frame.f_globals.get("__name__")
    return isinstance(name, str) and (name == "vllm" or name.startswith("vllm."))


def paste_of(chain: list[BaseException]) -> str:
    """The exceptions as a traceback shows them, each with its innermost frame when that is in
    vLLM's code (where it was raised: kb explain prefers a template raised in a file the traceback
    names) and without source lines (a raise's source holds the template itself). The frames
    that only passed the error on are left out: an older release's wording raised in one of
    those files would be preferred to the installed release's own (a pydantic ValidationError has
    no frame of the validator that raised it)."""
    lines: list[str] = []
    for e in chain:
        frames = _frames(e)
        if frames and _is_vllm(frames[-1]):
            code = frames[-1].tb_frame.f_code
            lines.append(f'  File "{code.co_filename}", line {frames[-1].tb_lineno}, in {code.co_name}\n')
        lines += traceback.format_exception_only(type(e), e)
    return "".join(lines)


def installed_release() -> Optional[str]:
    """The version of the vLLM this process runs."""
    version = getattr(sys.modules.get("vllm"), "__version__", None)
    if isinstance(version, str) and version:
        return version
    try:
        from importlib.metadata import version as dist_version

        return dist_version("vllm")
    except Exception:
        return None


_READ: dict[tuple[Optional[str], str], Optional[Answers]] = {}  # read once per process


def answers_for(installed: Optional[str], environ: Mapping[str, str]) -> Optional[Answers]:
    """The first of: the site KB_VLLM_PLUGIN_SITE names, the cached answer store of `installed`,
    the shipped wordings (a site or a store that cannot be read is passed over); read once per
    process (a process answers its errors from the same data)."""
    key = (installed, environ.get(SITE_ENV, ""))
    if key not in _READ:
        _READ[key] = _answers(installed, environ)
    return _READ[key]


def _answers(installed: Optional[str], environ: Mapping[str, str]) -> Optional[Answers]:
    from kb.errors import KBError
    from kb.explain.match import MATCH_INDEX, Matcher, load_index

    site = environ.get(SITE_ENV, "")
    if site:
        try:
            index = load_index(Path(site) / MATCH_INDEX)
            release = index.get("release")
            return Answers(Matcher(index), release if isinstance(release, str) else None, "site")
        except (KBError, OSError, ValueError):
            pass
    if installed:
        stored = _stored(installed)
        if stored is not None:
            return Answers(stored, installed, "cache")
    return _shipped(installed)


def _stored(release: str) -> Optional[Matcher]:
    from kb.errors import KBError
    from kb.jobs import stored_matcher_for
    from kb.scan.source import SourceSpec, is_release_name

    if not is_release_name(release):
        return None
    try:
        return stored_matcher_for(SourceSpec(vllm_version=release))
    except (KBError, OSError, ValueError):
        return None


def _shipped(installed: Optional[str]) -> Optional[Answers]:
    from kb.explain.match import Matcher
    from kb.explain.shipped import nearest_release, shipped_index
    from kb.jobs import errors_folder
    from kb.releases.wording import load

    shipped = load()
    release = nearest_release(installed, shipped[0])
    if release is None:
        return None
    return Answers(Matcher(shipped_index(release, errors_folder(None), shipped)), release, "shipped")


def _site_url(environ: Mapping[str, str]) -> Optional[str]:
    """KB_SITE_URL, validated as `kb explain` validates it; None when unset or not a URL."""
    from kb.errors import UsageError
    from kb.urls import printed_site_url

    try:
        return printed_site_url(None, environ)
    except UsageError:
        return None
