"""Argument parsing only: each command calls one library function."""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, TextIO

from kb.errors import EXIT_FAILURE, EXIT_NOT_JUDGED, EXIT_OK, EXIT_USAGE, KBError, UsageError

if TYPE_CHECKING:
    from kb.fit.launch import FitReport
from kb.scan.defaults import DEFAULT_EXCEPTIONS
from kb.scan.source import SourceSpec


def _source_options(p: argparse.ArgumentParser) -> None:
    from kb import PINNED_VLLM

    g = p.add_argument_group("where the vLLM tree comes from (default: the pinned release wheel)")
    x = g.add_mutually_exclusive_group()
    x.add_argument("--source", metavar="DIR", help="a vLLM checkout or unpacked tree on disk")
    x.add_argument("--git", metavar="URL_OR_PATH", help="a git repository (needs --ref); read from its object store")
    x.add_argument("--vllm-version", metavar="X", help=f"a release wheel from the package index (default {PINNED_VLLM})")
    x.add_argument("--wheel", metavar="FILE", help="a vLLM wheel file already on disk")
    g.add_argument("--ref", help="with --git: the tag, branch or commit to scan")
    g.add_argument("--include-vendored", action="store_true",
                   help="also scan vllm/third_party/ and vllm/vllm_flash_attn/ (excluded by default)")
    g.add_argument("--keep-wheel", action="store_true",
                   help="keep the whole downloaded wheel in the cache (by default only its Python files and "
                        "metadata are kept, about 4%% of it)")


def _errors_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--errors", metavar="DIR", help="curated entries to use (default: those shipped with kb)")


def _release_options(p: argparse.ArgumentParser) -> None:
    """Where the tree comes from, which curated entries, and the cache switch."""
    _source_options(p)
    _errors_option(p)
    p.add_argument("--no-cache", action="store_true", help="do not read or write the parsed-file cache")


def _spec(args: argparse.Namespace) -> SourceSpec:
    from kb.jobs import source_spec

    return source_spec(args.source, args.git, args.ref, args.vllm_version, args.wheel, args.include_vendored,
                       args.keep_wheel)


def _progress(quiet: bool) -> Optional[Callable[[str, int, int], None]]:
    """A one-line progress display on a terminal; nothing otherwise."""
    if quiet or not sys.stderr.isatty():
        return None

    def show(what: str, done: int, total: int) -> None:
        sys.stderr.write(f"\r{what}: {done}/{total}\033[K")
        if done >= total:
            sys.stderr.write("\n")
        sys.stderr.flush()

    return show


def _stage_lines(quiet: bool) -> Optional[Callable[[str, str, float], None]]:
    """One line per stage when standard error is not a terminal (a CI log); a terminal gets the
    progress display instead."""
    if quiet or sys.stderr.isatty():
        return None
    from kb.stages import stage_line

    def show(name: str, what: str, seconds: float) -> None:
        _err(stage_line(name, what, seconds))
        sys.stderr.flush()

    return show


def _scan_progress(quiet: bool) -> Optional[Callable[[int, int], None]]:
    show = _progress(quiet)
    if show is None:
        return None
    return lambda done, total: show("files scanned", done, total)


def cmd_scan(args: argparse.Namespace) -> int:
    from kb.files import write_atomic
    from kb.jobs import scan_release
    from kb.scan.document import dumps

    exceptions = [e.strip() for e in args.exceptions.split(",") if e.strip()]
    if not exceptions:
        raise UsageError("--exceptions needs at least one class name, or 'all'")
    result = scan_release(_spec(args), exceptions, jobs=args.jobs, use_cache=not args.no_cache,
                          strict=args.strict, progress=_scan_progress(args.quiet))
    for w in result.warnings:
        _err(f"warning: {w}")
    text = dumps(result)
    if args.output in (None, "-"):
        _write(text)
    else:
        write_atomic(Path(args.output), text)
        if not args.quiet:
            c = result.counts
            _err(f"{c['sites']} sites, {c['ids']} ids in {c['files']} files "
                 f"({c['excluded_files']} vendored files excluded, {c['parse_warnings']} parse warnings, "
                 f"{c['unresolved_templates']} unresolved templates) -> {args.output}")
    return 0


def _warn(text: str) -> None:
    _err(f"warning: {text}")


def _errors(args: argparse.Namespace) -> Optional[Path]:
    return Path(args.errors) if getattr(args, "errors", None) else None


def cmd_build(args: argparse.Namespace) -> int:
    from kb.jobs import build_releases, release_specs
    from kb.site.build import BuildOptions

    options = BuildOptions(Path(args.output), site_url=args.site_url, report_repo=args.report_repo, jobs=args.jobs)
    specs = release_specs(args.source, args.git, args.ref, args.vllm_version, args.wheel, args.include_vendored,
                          args.releases, args.refs, args.keep_wheel)
    report = build_releases(specs, options, jobs=args.jobs, use_cache=not args.no_cache,
                            progress=_progress(args.quiet), errors=_errors(args), keep_going=args.keep_going,
                            warn=_warn, stage_log=_stage_lines(args.quiet))
    if not args.quiet:
        _err(f"{report.records} error pages ({report.pages_rendered} rendered, the rest unchanged); "
             f"{report.files_written} files written, {report.files_kept} kept; "
             f"{report.bytes / 1e6:.1f} MB -> {report.output}")
    return 0


def cmd_explain(args: argparse.Namespace) -> int:
    import dataclasses

    from kb.explain.match import MATCH_INDEX
    from kb.explain.output import explanation_json, explanation_text
    from kb.explain.paste import read_paste
    from kb.jobs import explain_text

    if args.json and args.format not in ("text", "json"):
        raise UsageError(f"--json and --format {args.format} ask for two outputs: give one")
    cut = 0
    piped = sys.stdin is not None and (args.text == "-" or not sys.stdin.isatty())  # `-`: standard input, as cat reads it
    if args.text is not None and args.text != "-":
        text = _argument_text(args.text)
    elif piped:
        text, cut = read_paste(sys.stdin.buffer if hasattr(sys.stdin, "buffer") else sys.stdin)
        if cut:
            _warn(f"the input is larger than {cut // 2**20} MB: only its last {cut // 2**20} MB are read")
    else:
        raise UsageError("give the error text as an argument, or pipe it in: kb explain < server.log")
    index = Path(args.index) if args.index else (Path(args.site) / MATCH_INDEX if args.site else None)
    ex = explain_text(text, _spec(args), index, _errors(args), use_cache=not args.no_cache)
    if cut:  # said in the answer too: a program reading --json sees it
        cut_note = f"the input is larger than {cut // 2**20} MB: only its last {cut // 2**20} MB were read"
        ex = dataclasses.replace(ex, notes=(cut_note, *ex.notes))
    form = "json" if args.json else args.format
    if form == "short":
        from kb.explain.short import short_text

        _write(short_text(ex, args.site_url))
    else:
        _write(explanation_json(ex, args.site_url) if form == "json" else explanation_text(ex, args.site_url))
    return 0 if ex.found else 1


def cmd_search(args: argparse.Namespace) -> int:
    from kb.jobs import search_words
    from kb.search.query import MAX_LIMIT, hits_json, hits_text

    if not 1 <= args.limit <= MAX_LIMIT:
        raise UsageError(f"--limit must be between 1 and {MAX_LIMIT}")
    text = _argument_text(" ".join(args.words))
    if not text.strip():
        raise UsageError("give the words to look for: kb search \"lora rank\"")
    release, hits = search_words(text, _spec(args), args.limit, Path(args.site) if args.site else None,
                                 _errors(args), use_cache=not args.no_cache)
    _write(hits_json(release, hits, args.site_url) if args.json else hits_text(release, hits, args.site_url))
    return 0 if hits else 1


def _argument_text(text: str) -> str:
    """An argument as Python received it: bytes that were not UTF-8 arrive as lone surrogates,
    which cannot be printed; they become U+FFFD."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeEncodeError:  # a surrogate that does not stand for a byte
        return text.encode("utf-8", "replace").decode("utf-8")


# Control characters of scanned or pasted text (an escape sequence in a message) never reach
# the terminal raw: all but tab, newline and carriage return are written as JSON escapes.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def _write(text: str, stream: Optional[TextIO] = None) -> None:
    """Text to standard output (or `stream`) in whatever encoding it has: a control character, or
    one the encoding lacks, is written as a JSON escape (`\\u001b`, `\\u00e9`, valid inside
    --json's strings too), never raw and never a failure."""
    out = stream if stream is not None else sys.stdout
    text = _CONTROL.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    try:
        out.write(text)
    except UnicodeEncodeError:
        encoding = out.encoding or "ascii"
        out.write("".join(c if _encodes(c, encoding) else json.dumps(c)[1:-1] for c in text))


def _out(text: str) -> None:
    _write(text + "\n")


def _err(text: str) -> None:
    _write(text + "\n", sys.stderr)


def _encodes(char: str, encoding: str) -> bool:
    try:
        char.encode(encoding)
    except UnicodeEncodeError:
        return False
    return True


def cmd_diff(args: argparse.Namespace) -> int:
    from kb.jobs import diff_releases

    if args.git:
        old, new = SourceSpec(git=args.git, ref=args.old), SourceSpec(git=args.git, ref=args.new)
    else:
        old, new = SourceSpec(vllm_version=args.old), SourceSpec(vllm_version=args.new)
    _write(diff_releases(old, new, args.format, use_cache=not args.no_cache))
    return 0


def cmd_lint(args: argparse.Namespace) -> int:
    from kb.jobs import lint_release

    report = lint_release(_spec(args), _errors(args), use_cache=not args.no_cache)
    for p in report.problems:
        _out(p)
    for ident, path, reason in report.manual:
        _err(f"note: {path}: {ident}: check not cross-validated against vLLM's guard (manual): {reason}")
    for note in report.kept:
        _err(f"note: {note}")
    _err(f"{report.entries} entries, {report.checks} checks ({report.cases} cases), {report.fixes_run} example fixes "
         f"run, {len(report.manual)} manual source checks, {len(report.no_check)} without a check, "
         f"{report.reports} public reports: "
         f"{len(report.problems)} problem(s)")
    return 1 if report.problems else 0


def cmd_new(args: argparse.Namespace) -> int:
    from kb.jobs import new_entry

    path = new_entry(_spec(args), args.id, _errors(args), use_cache=not args.no_cache)
    _err(f"wrote {path}: complete every TODO, then run `kb lint`")
    return 0


def hardware_of(args: argparse.Namespace) -> dict[str, Any]:
    """--gpu NAME with --gpu-count, --compute-capability and --gpu-memory-gib (kb/hardware.py)."""
    from kb.hardware import hardware_facts

    return hardware_facts(getattr(args, "gpu", None), args.gpu_count, args.compute_capability, args.gpu_memory_gib)


def cmd_fit(args: argparse.Namespace) -> int:
    from kb.fit.report import fit_json, fit_text
    from kb.jobs import fit_launch

    command = [_argument_text(w) for w in args.command_words]
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        raise UsageError("give the launch command after --, e.g. kb fit --model-config config.json --gpu h100 -- "
                         "vllm serve MODEL --max-model-len 32768")
    hardware = hardware_of(args)
    if args.gpu_memory_used_gib is not None:
        hardware["gpu_memory_used_gib"] = args.gpu_memory_used_gib
    report = fit_launch(_spec(args), command, Path(args.model_config) if args.model_config else None, hardware,
                        _errors(args), use_cache=not args.no_cache)
    _write(fit_json(report, args.site_url) if args.json else fit_text(report, args.site_url))
    return 1 if report.parse_error is not None or report.errors else 0


def _fit_too(args: argparse.Namespace, command: list[str], hardware: dict[str, Any],
             found: Optional[str] = None) -> Optional[FitReport]:
    """kb fit's figures inside kb check, when the model's config.json (given, or `found` by kb
    check) and the GPU's memory are known; None (and a note) when the launch cannot be sized."""
    from kb.jobs import fit_launch

    config = args.model_config or found
    if not config or hardware.get("gpu_memory_gib") is None:
        return None
    try:
        return fit_launch(_spec(args), command, Path(config), hardware, _errors(args),
                          use_cache=not args.no_cache)
    except UsageError as e:
        _err(f"note: not sized for memory: {e}")
        return None


def cmd_mcp(args: argparse.Namespace) -> int:
    try:
        from kb.agent.mcp_server import serve
    except ModuleNotFoundError as e:
        raise UsageError(f"kb mcp needs the MCP SDK: pip install 'vllm-error-kb[mcp]' ({e.name} is missing)") from None
    serve(_spec(args), _errors(args), "http" if args.http else "stdio", args.port, args.call_timeout)
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from kb.checks.report import outcome_json, outcome_text
    from kb.fit.report import fit_dict, fit_text
    from kb.jobs import check_launch

    command = [_argument_text(w) for w in args.command_words]
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        raise UsageError("give the launch command after --, e.g. kb check -- vllm serve MODEL --tensor-parallel-size 8")
    hardware = hardware_of(args)
    outcome = check_launch(_spec(args), command, Path(args.model_config) if args.model_config else None, hardware,
                           _errors(args), use_cache=not args.no_cache, request=args.request)
    found = outcome.config.path if outcome.config is not None and outcome.config.how != "given" else None
    fit = _fit_too(args, command, hardware, found) if outcome.parse_error is None else None
    if args.json:
        _write(outcome_json(outcome, args.site_url, fit_dict(fit, args.site_url) if fit is not None else None))
    else:
        _write(outcome_text(outcome, args.site_url) + ("\n" + fit_text(fit, args.site_url) if fit is not None else ""))
    for problem in outcome.launch.problems:
        _err(f"Error: {problem}")
    for n in outcome.not_run:
        if not n.reason.startswith("bad input"):
            _err(f"Error: {n.record.file}:{n.record.line}: check of {n.record.id} not run: {n.reason}")
    if outcome.parse_error is not None or outcome.validation:
        return EXIT_FAILURE  # vLLM exits reading the command line or building a config: what kb could not read comes after
    if fit is not None and fit.errors:
        return EXIT_FAILURE  # a memory error at startup (kb fit)
    if not outcome.complete:
        return EXIT_USAGE
    if outcome.errors:
        return EXIT_FAILURE
    return EXIT_OK if outcome.judged else EXIT_NOT_JUDGED  # no error predicted, but checks lacked inputs


def cmd_flags(args: argparse.Namespace) -> int:
    from kb.config.report import config_keys_text, env_text, flags_json, flags_text, request_text
    from kb.jobs import read_flags

    info, model = read_flags(_spec(args))
    for w in model.warnings:
        _warn(str(w))
    view = {"env": env_text, "config_json": config_keys_text, "request": request_text}.get(args.view, flags_text)
    _write(flags_json(info, model) if args.json else view(info, model))
    return 0


def cmd_wordings(args: argparse.Namespace) -> int:
    from kb.jobs import write_wordings

    path, count = write_wordings(Path(args.output) if args.output else None, use_cache=not args.no_cache)
    _err(f"{count} wordings of the published releases -> {path}")
    return 0


def cmd_release(args: argparse.Namespace) -> int:
    from kb.jobs import bump_release
    from kb.releases.bump import worklist_text

    work = bump_release(args.version, _errors(args), write=not args.dry_run, use_cache=not args.no_cache)
    if args.json:
        _write(json.dumps(work.to_json(), indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    else:
        _write(worklist_text(work, "markdown" if args.markdown else "text"))
    return 1 if work.todo else 0


def cmd_serve(args: argparse.Namespace) -> int:
    from kb.site.serve import make_server

    server = make_server(Path(args.folder), args.port)
    host, port = str(server.server_address[0]), server.server_address[1]
    _err(f"Serving {args.folder} at http://{host}:{port}/ (Ctrl-C stops)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def usage_of(p: argparse.ArgumentParser, head: str, tail: str, width: int = 100) -> str:
    """A usage line made from the parser, so that it lists every option: `head` (options written
    by hand, such as one of two), every other option as argparse writes it (a mutually exclusive
    group in one bracket), then `tail`; wrapped at `width` columns under "usage: "."""
    named = set(re.findall(r"(?<![\w-])--?\w[\w-]*", head))
    groups = {id(a): g for g in p._mutually_exclusive_groups for a in g._group_actions}
    items: list[str] = [head]
    done: set[int] = set()
    for a in p._actions:
        if not a.option_strings or isinstance(a, argparse._HelpAction) or named & set(a.option_strings) \
                or id(a) in done:
            continue
        members = groups[id(a)]._group_actions if id(a) in groups else [a]
        done |= {id(m) for m in members}
        items.append("[" + " | ".join(m.option_strings[0] + ("" if m.nargs == 0 else f" {m.metavar or m.dest.upper()}")
                                      for m in members) + "]")
    lines = [""]
    for item in [*items, tail]:
        if lines[-1] and len("usage: ") + len(lines[-1]) + 1 + len(item) > width:
            lines.append("")
        lines[-1] += (" " if lines[-1] else "") + item
    return ("\n" + " " * len("usage: ")).join(lines)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kb", description="vLLM Error KB: the error reference built from vLLM's source.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    s = sub.add_parser("scan", help="scan a vLLM tree and write every raise site of the chosen classes as JSON")
    _source_options(s)
    s.add_argument("-o", "--output", metavar="FILE", help="where to write the JSON (default: standard output)")
    s.add_argument("--exceptions", default=",".join(DEFAULT_EXCEPTIONS),
                   help="comma-separated classes to find (their subclasses count too); `vllm` stands for every "
                        "exception class the tree defines; or 'all' (default: %(default)s)")
    s.add_argument("--jobs", type=int, default=None, metavar="N", help="worker processes (default: one per core)")
    s.add_argument("--strict", action="store_true", help="fail when a file cannot be parsed")
    s.add_argument("--no-cache", action="store_true", help="do not read or write the parsed-file cache")
    s.add_argument("--quiet", action="store_true", help="no progress or summary on standard error")
    s.set_defaults(func=cmd_scan)

    b = sub.add_parser("build", help="build the static site (pages, JSON API, search) for a vLLM tree")
    _source_options(b)
    b.add_argument("-o", "--output", default="site", metavar="DIR", help="the site folder (default: site)")
    b.add_argument("--site-url", metavar="URL", help="public URL of the site: enables sitemap.xml")
    b.add_argument("--report-repo", default="vllm-error-kb/vllm-error-kb", metavar="OWNER/NAME",
                   help="GitHub repository that the pages' 'Report an issue' links open an issue in")
    b.add_argument("--jobs", type=int, default=None, metavar="N", help="worker processes (default: one per core)")
    b.add_argument("--no-cache", action="store_true", help="do not read or write the parsed-file cache")
    b.add_argument("--quiet", action="store_true", help="no progress or summary on standard error")
    _errors_option(b)
    b.add_argument("--keep-going", action="store_true", help="skip malformed curated entries (reported) instead of failing")
    b.add_argument("--releases", metavar="X,Y,...|all",
                   help="build over several release wheels, oldest first (`all`: the published list in kb/releases/releases.toml)")
    b.add_argument("--refs", metavar="A,B,...", help="with --git: build over several refs, oldest first")
    b.set_defaults(func=cmd_build)

    x = sub.add_parser("explain", help="find the vLLM errors in a pasted message, traceback or log, with what to do")
    x.add_argument("text", nargs="?", help="the message or log (default, or `-`: standard input)")
    x.add_argument("--site", metavar="DIR", help="read the match index of a built site (DIR/api/match-index.json.gz)")
    x.add_argument("--index", metavar="FILE", help="read this match index")
    x.add_argument("--json", action="store_true", help="print JSON (the same as --format json)")
    x.add_argument("--format", choices=("text", "json", "short"), default="text",
                   help="text (default), json, or short: one line per error, `<id> <url> <first fix>` (CI logs, agents)")
    x.add_argument("--site-url", metavar="URL",
                   help="base URL for the error pages in the output (default: $KB_SITE_URL, else site paths)")
    _release_options(x)
    x.set_defaults(func=cmd_explain)

    q = sub.add_parser("search", help="errors ranked by the words you type (as the site's search box ranks them)")
    q.add_argument("words", nargs="+", help="the words to look for (a pasted message goes to the exact lookup first)")
    q.add_argument("--limit", type=int, default=10, metavar="N", help="at most N results (default 10, at most 100)")
    q.add_argument("--site", metavar="DIR", help="read the indexes of a built site (DIR/api/search-index.json.gz)")
    q.add_argument("--json", action="store_true", help='print JSON: {"release", "results": [{"id", "score", "title", "url", "kind"}]}')
    q.add_argument("--site-url", metavar="URL",
                   help="base URL for the error pages in the output (default: $KB_SITE_URL, else site paths)")
    _release_options(q)
    q.set_defaults(func=cmd_search)

    d = sub.add_parser("diff", help="what changed between two releases: added, removed, edited, moved errors")
    d.add_argument("old", help="the older release (a version, or a ref with --git)")
    d.add_argument("new", help="the newer release")
    d.add_argument("--git", metavar="URL_OR_PATH", help="compare two refs of a git repository instead of two wheels")
    d.add_argument("--format", choices=["text", "markdown", "json"], default="text")
    d.add_argument("--no-cache", action="store_true", help="do not read or write the parsed-file cache")
    d.set_defaults(func=cmd_diff)

    li = sub.add_parser("lint", help="check the curated entries against the scan: schema, orphans, staleness, "
                                     "every check case and example fix")
    _release_options(li)
    li.set_defaults(func=cmd_lint)

    n = sub.add_parser("new", help="write a skeleton curated entry for an error id, prefilled from the scan")
    n.add_argument("id", help="the error id (16 hex characters)")
    _release_options(n)
    n.set_defaults(func=cmd_new)

    c = sub.add_parser("check", help="predict which errors vLLM raises for a launch command, before spending GPU time",
                       usage="kb check [--model-config FILE_OR_DIR] [--gpu NAME] [--gpu-count N] "
                             "[--compute-capability X.Y] [--gpu-memory-gib G] [--request JSON_OR_FILE] [--json] "
                             "-- vllm serve MODEL [FLAGS...]")
    c.add_argument("--model-config", metavar="FILE_OR_DIR",
                   help="the model's config.json, or its folder (default: MODEL's folder, or MODEL's snapshot in the "
                        "local Hugging Face cache at --revision; never online)")
    c.add_argument("--request", metavar="JSON_OR_FILE",
                   help="one request's sampling parameters, as SamplingParams(...) names them, e.g. "
                        "'{\"temperature\": -1}' (or a file holding the JSON object): its checks run too")
    c.add_argument("--gpu", metavar="NAME", help="the GPU (h100, a100-80gb, l4, ...: kb/hardware.py): its name, "
                                                 "memory and compute capability")
    c.add_argument("--gpu-count", type=int, metavar="N", help="GPUs on the launching node")
    c.add_argument("--compute-capability", type=float, metavar="X.Y", help="the GPU's compute capability, e.g. 8.0")
    c.add_argument("--gpu-memory-gib", type=float, metavar="G", help="memory of one GPU, in GiB")
    c.add_argument("--json", action="store_true", help="print JSON")
    c.add_argument("--site-url", metavar="URL", help="base URL for the error pages in the output")
    _release_options(c)
    c.add_argument("command_words", nargs=argparse.REMAINDER, metavar="-- vllm serve MODEL ...")
    c.set_defaults(func=cmd_check)

    f = sub.add_parser("fit", help="will it fit? vLLM's KV cache size and memory errors, predicted before launch")
    f.add_argument("--model-config", metavar="FILE_OR_DIR",
                   help="the model's config.json, or its folder (the checkpoint's size is read from the files there); "
                        "default: MODEL's config.json in a local folder or the Hugging Face cache")
    f.add_argument("--gpu", metavar="NAME", help="the GPU (h100, a100-80gb, l4, ...: kb/hardware.py)")
    f.add_argument("--gpu-count", type=int, metavar="N", help="GPUs on the launching node")
    f.add_argument("--compute-capability", type=float, metavar="X.Y", help="the GPU's compute capability")
    f.add_argument("--gpu-memory-gib", type=float, metavar="G", help="total memory of one GPU, in GiB, as torch reports it")
    f.add_argument("--gpu-memory-used-gib", type=float, metavar="G",
                   help="memory other processes hold on each GPU at startup")
    f.add_argument("--json", action="store_true", help="print JSON")
    f.add_argument("--site-url", metavar="URL", help="base URL for the error pages in the output")
    _release_options(f)
    f.add_argument("command_words", nargs=argparse.REMAINDER, metavar="-- vllm serve MODEL ...")
    f.usage = usage_of(f, "kb fit [--model-config FILE_OR_DIR] (--gpu NAME | --gpu-memory-gib G)",
                       "-- vllm serve MODEL [FLAGS...]")
    f.set_defaults(func=cmd_fit)

    m = sub.add_parser("mcp", help="an MCP server for coding agents: search, get, explain, check, fit (offline)")
    m.add_argument("--http", action="store_true", help="streamable HTTP on 127.0.0.1 instead of stdio")
    m.add_argument("--port", type=int, default=8765, help="the HTTP port (default 8765)")
    m.add_argument("--call-timeout", type=float, metavar="SECONDS",
                   help="answer a tool call still running after SECONDS with a time-out error and stop it (default 120)")
    _release_options(m)
    m.set_defaults(func=cmd_mcp)

    fl = sub.add_parser("flags", help="the `vllm serve` flags of a vLLM tree, read from its source: defaults, "
                                      "choices, help and the config field each sets; with --env, --config-json, "
                                      "--request the other inputs")
    _source_options(fl)
    fl.add_argument("--json", action="store_true", help="print JSON: the whole model, the `config` part of "
                                                       "`kb scan`'s output (whatever view is chosen)")
    views = fl.add_mutually_exclusive_group()
    views.add_argument("--env", dest="view", action="store_const", const="env",
                       help="the environment variables of vllm/envs.py instead: type, default, doc")
    views.add_argument("--config-json", dest="view", action="store_const", const="config_json",
                       help="the config.json keys vLLM reads instead: where, fallbacks, default")
    views.add_argument("--request", dest="view", action="store_const", const="request",
                       help="the request fields instead (SamplingParams, ChatCompletionRequest, CompletionRequest)")
    fl.set_defaults(func=cmd_flags)

    w = sub.add_parser("wordings", help="scan every published release and write the wordings file that ships with "
                                        "kb (the lookup's knowledge of older messages)")
    w.add_argument("-o", "--output", metavar="FILE", help="where to write it (default: kb/releases/wordings.json.gz)")
    w.add_argument("--no-cache", action="store_true", help="do not read or write the parsed-file cache")
    w.set_defaults(func=cmd_wordings)

    r = sub.add_parser("release", help="move kb to a new vLLM release: diff, extend the wordings, pin it, carry and "
                                       "re-verify every curated entry and report, print the curators' worklist")
    r.add_argument("version", help="the new vLLM release (newer than the newest kb knows)")
    out = r.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the worklist as JSON (for automation)")
    out.add_argument("--markdown", action="store_true", help="print the worklist as Markdown (a pull request's body)")
    r.add_argument("--dry-run", action="store_true", help="write nothing: only the worklist")
    _errors_option(r)
    r.add_argument("--no-cache", action="store_true", help="do not read or write the parsed-file cache")
    r.set_defaults(func=cmd_release)

    v = sub.add_parser("serve", help="serve a built site on 127.0.0.1 for local browsing")
    v.add_argument("folder", nargs="?", default="site", help="the built site (default: site)")
    v.add_argument("--port", type=int, default=8000)
    v.set_defaults(func=cmd_serve)
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    try:
        if args.func in (cmd_explain, cmd_search):  # the links they print: --site-url, else KB_SITE_URL
            import os

            from kb.urls import printed_site_url

            args.site_url = printed_site_url(args.site_url, os.environ)
        elif getattr(args, "site_url", None):  # build, check, fit
            from kb.urls import site_url

            args.site_url = site_url(args.site_url)
        code: int = args.func(args)
        return code
    except UsageError as e:
        p.print_usage(sys.stderr)
        _err(f"Error: {e}")
        return e.exit_code
    except KBError as e:
        for problem in getattr(e, "problems", ()):
            _err(problem)
        _err(f"Error: {e}")
        return e.exit_code
    except KeyboardInterrupt:
        _err("Error: interrupted")
        return 130
    except OSError as e:  # a full disk or a read-only folder where a command writes: one line, not a traceback
        where = f"{e.filename}: " if e.filename else ""
        _err(f"Error: {where}{e.strerror or e}")
        return 1
