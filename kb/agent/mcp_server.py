"""`kb mcp`: an MCP server (the official `mcp` SDK) over stdio, or streamable HTTP on 127.0.0.1.

Its tools answer what the CLI answers, through the same library functions: `explain` is
`kb explain --json`, `check_launch` is `kb check --json`, `fit` is `kb fit --json`, `get_error`
is the site's `/api/errors/<id>` record, `search_errors` looks words or a paste up in the
release's match index. Every answer names the release it is about. The server is offline: a
release whose wheel is not in kb's cache is refused (fetch it once with `kb build` or `kb scan`),
never downloaded.

Every request is answered: over stdio, kb/agent/wire.py answers what is not a JSON-RPC message
the SDK takes; a tool's arguments are checked against its signature before any work
(kb/agent/arguments.py); a call runs on a thread of its own within a time limit (kb/agent/calls.py);
and a bad argument, a failure or a time-out is a tool error (`isError`) carrying kb's located
message, the tool's name first."""

from __future__ import annotations

import contextlib
import functools
import gc
import inspect
import json
import re
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Optional

import anyio
from mcp.server.lowlevel import Server  # the SDK: when it is missing, `kb mcp` says how to install it
from mcp.types import CallToolResult, ListToolsResult, TextContent, Tool

from kb.agent.calls import DEFAULT_SECONDS, Calls
from kb.errors import EntryError, KBError, UsageError
from kb.scan.source import SourceSpec

MAX_LIMIT = 50  # search results one call returns
_RELEASE = re.compile(r"[0-9A-Za-z][0-9A-Za-z.+_-]{0,63}")  # a version as kb's cache names wheels
HARDWARE: dict[str, tuple[tuple[type, ...], str]] = {  # a key of `hardware`: the JSON types it takes
    "gpu_name": ((str,), "a string"), "gpu_count": ((int,), "an integer"),
    "gpu_memory_gib": ((int, float), "a number"), "compute_capability": ((int, float), "a number")}


class Releases:
    """The releases the server answers for: the one it was started with, and any other whose
    wheel is in the cache; each one's records loaded once."""

    def __init__(self, spec: SourceSpec, errors: Optional[Path]) -> None:
        self.spec, self.errors = spec, errors
        self.records: dict[str, tuple[Any, Any]] = {}
        self.matchers: dict[str, Any] = {}
        self.searchers: dict[str, Any] = {}
        self.loading = threading.Lock()  # calls run on threads of their own: a release is loaded once

    def matcher(self, spec: SourceSpec) -> Any:
        """The release's matcher (kb explain's, from its answer store), loaded once."""
        from kb.jobs import matcher_for

        key = self.label(spec)
        with self.loading:
            if key not in self.matchers:
                self.matchers[key] = matcher_for(spec, errors=self.errors)
        return self.matchers[key]

    def searcher(self, spec: SourceSpec) -> Any:
        """The release's ranked search (kb search's), loaded once, with the release's matcher."""
        from kb.jobs import searcher_for

        key = self.label(spec)
        matcher = self.matcher(spec)
        with self.loading:
            if key not in self.searchers:
                self.searchers[key] = searcher_for(spec, errors=self.errors, matcher=matcher)
        return self.searchers[key]

    def preload(self) -> None:
        """What the release the server was started with answers from (the answer stores, kb check's
        index), loaded before the first call asks: on a thread of its own at start, and only from
        this machine (a folder, a wheel, a release wheel in the cache). A failure is left to the
        call that meets it to report."""
        from kb.jobs import load_check_inputs
        from kb.paths import cache_dir

        spec = self.spec
        if spec.vllm_version and not any((cache_dir() / "wheels").glob(f"vllm-{spec.vllm_version}-*.whl")):
            return
        if spec.git is not None:
            return
        with contextlib.suppress(Exception):
            self.searcher(spec).search("vllm error", 1)  # a first search reads what every search needs
        with contextlib.suppress(Exception):
            load_check_inputs(spec, self.errors)
        gc.collect()
        gc.freeze()  # what was loaded stays: a full collection no longer walks it in the middle of a call

    def label(self, spec: SourceSpec) -> str:
        return spec.vllm_version or spec.wheel or spec.source_dir or spec.git or "?"

    def spec_for(self, release: Optional[str]) -> SourceSpec:
        if not release or release == self.label(self.spec):
            return self.spec
        from kb.paths import cache_dir

        if not _RELEASE.fullmatch(release):
            from kb.checks.vocab import shown_value

            raise UsageError(f"not a vLLM version: {shown_value(release)}; list_releases names those kb has",
                             "release")

        if not any((cache_dir() / "wheels").glob(f"vllm-{release}-*.whl")):
            raise UsageError(f"release {release} is not in kb's cache (the server never downloads): "
                             f"run `kb scan --vllm-version {release}` once")
        return SourceSpec(vllm_version=release)

    def available(self) -> list[str]:
        from kb.paths import cache_dir

        found = {p.name.split("-")[1] for p in (cache_dir() / "wheels").glob("vllm-*.whl")}
        return sorted(found | {self.label(self.spec)})

    def record(self, spec: SourceSpec, ident: str) -> Optional[dict[str, Any]]:
        from kb.records.merge import attach_set_by
        from kb.site.api import api_record

        key = self.label(spec)
        with self.loading:
            if key not in self.records:
                self.records[key] = self._load_records(spec)
        by_id, (info, config) = self.records[key]
        r = by_id.get(ident)
        if r is None:
            return None
        return api_record(attach_set_by([r], config)[0], info)  # as the site's /api/errors/<id> serves it

    def _load_records(self, spec: SourceSpec) -> tuple[Any, Any]:
        from kb.derived.attach import attach_derived
        from kb.jobs import curated_records, scan_release
        from kb.model import Merged
        from kb.paths import cache_dir
        from kb.site.api import SiteInfo

        scan = scan_release(spec)
        merged: Merged = curated_records([("", scan)], self.errors)
        # the guidance the site's page gives, derived parts too (kb/derived/; cached by digest)
        records = attach_derived(merged.records, scan.config, 1, cache_dir())
        return {r.id: r for r in records}, (SiteInfo(scan.tree), scan.config)


def hardware_of(given: Optional[dict[str, Any]]) -> dict[str, Any]:
    """A tool's `hardware` as `kb check --gpu ...` reads it (kb/hardware.py); its values' ranges
    are the vocabulary's to check, as for the flags."""
    from kb.hardware import hardware_facts

    g = given or {}
    for key, value in g.items():
        if key not in HARDWARE:
            raise UsageError(f"no such key; hardware takes {', '.join(HARDWARE)}", f"hardware: {key[:60]!r}")
        kinds, wanted = HARDWARE[key]
        if value is not None and (isinstance(value, bool) or not isinstance(value, kinds)):
            from kb.checks.vocab import shown_value

            raise UsageError(f"expected {wanted}, got {shown_value(value)}", f"hardware: {key}")
    return hardware_facts(g.get("gpu_name"), g.get("gpu_count"), g.get("compute_capability"), g.get("gpu_memory_gib"))


def launch_words(command: str) -> list[str]:
    """The words of the `vllm serve` command a tool is given (kb/checks/launch.py)."""
    from kb.checks.launch import command_words

    try:
        words = command_words(command)
    except ValueError as e:  # shlex: an unclosed quote
        raise UsageError(f"not a shell command: {e}", "command") from None
    if not words:
        raise UsageError("give the launch command, e.g. vllm serve MODEL --tensor-parallel-size 8", "command")
    return words


@contextlib.contextmanager
def config_file(config_json: Optional[dict[str, Any]]) -> Iterator[Optional[Path]]:
    """config_json as the config.json file kb check and kb fit read, alone in a folder of its own;
    kb's messages name it `config_json`, not the temporary path."""
    if config_json is None:
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="kb-mcp-") as tmp:
        path = Path(tmp) / "config.json"
        path.write_text(json.dumps(config_json), encoding="utf-8")
        try:
            yield path
        except KBError as e:
            raise UsageError(renamed(message_of(e), path)) from None


def renamed(text: str, config: Path) -> str:
    """kb's text with the temporary config.json (and a line in it, which only kb wrote) named
    `config_json`."""
    return re.sub(re.escape(str(config)) + r"(:\d+)?", "config_json", text)


def _answer(release: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"release": release, **body}


def tools(releases: Releases) -> dict[str, Callable[..., dict[str, Any]]]:
    """The tools by name: plain functions of JSON-like arguments, so the tests can call them too.
    Their signatures are their input schemas (kb/agent/arguments.py)."""

    def explain(text: str, release: Optional[str] = None) -> dict[str, Any]:
        """What `kb explain --json` says of an error text or a log: the vLLM error it is, the values
        in it, its meaning and fixes."""
        from kb.explain.match import explain as explained
        from kb.explain.output import explanation_json

        spec = releases.spec_for(release)
        ex = explained(text, releases.matcher(spec))
        return _answer(releases.label(spec), json.loads(explanation_json(ex)))

    def search_errors(query: str, release: Optional[str] = None, limit: int = 10) -> dict[str, Any]:
        """vLLM errors for a paste or words, as `kb search --json` ranks them: the exact template
        matches first, then the errors ranked by the words (lunr: field weights, stemming, the
        shorthand users type). Each result has its id, score, title, url and kind. `limit`: 1 to 50."""
        from kb.search.query import hits_dict

        if not 1 <= limit <= MAX_LIMIT:
            from kb.checks.vocab import shown_value

            raise UsageError(f"expected an integer from 1 to {MAX_LIMIT}, got {shown_value(limit)}", "limit")
        spec = releases.spec_for(release)
        searcher = releases.searcher(spec)
        # the pages' links name the release of the index, as kb search prints them (kb.urls.error_url)
        return hits_dict(searcher.release, searcher.search(query, limit)) | {"release": releases.label(spec)}

    def get_error(id: str, release: Optional[str] = None) -> dict[str, Any]:
        """The full record of one error id, as the site's /api/errors/<id> gives it."""
        from kb.checks.vocab import shown_value

        spec = releases.spec_for(release)
        record = releases.record(spec, id)
        if record is None:
            raise UsageError(f"no error {shown_value(id)} in {releases.label(spec)}", "id")
        return _answer(releases.label(spec), {"record": record})

    def check_launch(command: str, config_json: Optional[dict[str, Any]] = None,
                     hardware: Optional[dict[str, Any]] = None, release: Optional[str] = None) -> dict[str, Any]:
        """What `kb check --json` predicts for a `vllm serve` command: vLLM's parser, its config
        checks in vLLM's order, valid values. `hardware`: gpu_name (kb's GPU table), gpu_count,
        gpu_memory_gib, compute_capability. A bad value (in the command, config_json or hardware)
        makes the answer a tool error that names it first; the checks that do not need it still run."""
        from kb.checks.report import outcome_json
        from kb.jobs import check_launch as check

        spec = releases.spec_for(release)
        words, facts = launch_words(command), hardware_of(hardware)
        with config_file(config_json) as config:
            out = check(spec, words, config, facts, releases.errors)
            body = json.loads(outcome_json(out))
            if config is not None:
                body["problems"] = [renamed(p, config) for p in body.get("problems", [])]
                if body.get("configJson"):  # the temporary file is the tool's argument
                    body["configJson"]["path"] = "config_json"
        return _answer(releases.label(spec), body)

    def fit(command: str, config_json: dict[str, Any], hardware: dict[str, Any],
            release: Optional[str] = None) -> dict[str, Any]:
        """What `kb fit --json` says: vLLM's KV cache size for the launch on the GPU and the memory
        errors it would raise. `hardware`: gpu_name (kb's GPU table) or gpu_memory_gib, gpu_count."""
        from kb.fit.report import fit_dict
        from kb.jobs import fit_launch

        spec = releases.spec_for(release)
        words, facts = launch_words(command), hardware_of(hardware)
        with config_file(config_json) as config:
            assert config is not None
            report = fit_launch(spec, words, config, facts, releases.errors)
        return _answer(releases.label(spec), fit_dict(report))

    def list_releases() -> dict[str, Any]:
        """The releases this server answers for without the network."""
        return {"release": releases.label(releases.spec), "releases": releases.available()}

    return {f.__name__: f for f in (search_errors, get_error, explain, check_launch, fit, list_releases)}


def message_of(e: KBError) -> str:
    """kb's message of an error, with the located problems of malformed curated entries."""
    if isinstance(e, EntryError):
        return "\n".join([str(e), *e.problems[:20]])
    return str(e)


async def call_tool(table: dict[str, Callable[..., dict[str, Any]]], calls: Calls, name: str,
                    arguments: dict[str, Any]) -> CallToolResult:
    """One `tools/call`: the arguments checked, the tool run within the time limit, the answer (a
    tool error carrying kb's located message when anything is wrong, never the SDK's wrapper)."""
    from kb.agent.arguments import checked

    fn = table.get(name)
    if fn is None:
        return _failed("tools/call", f"no tool {name[:60]!a}; the tools are {', '.join(table)}")
    try:
        kwargs = checked(name, fn, arguments)
        body = await calls.run(name, functools.partial(fn, **kwargs))
    except KBError as e:
        return _failed(name, message_of(e))
    except Exception as e:  # a defect of kb: answered, and the server goes on
        print(f"kb mcp: {name}: {type(e).__name__}: {e}", file=sys.stderr)
        return _failed(name, f"kb failed ({type(e).__name__}: {str(e)[:300]}); please report it")
    return _result(name, body)


def _result(tool: str, body: dict[str, Any]) -> CallToolResult:
    """A tool's answer: its JSON; a tool error first naming the bad values when a check reports
    `problems` (as `kb check` exits 2), the JSON after them."""
    text = json.dumps(body, indent=2, ensure_ascii=False)
    problems = body.get("problems")
    if problems:
        named = "\n".join(f"{tool}: {p}" for p in problems)
        return CallToolResult(content=[TextContent(type="text", text=named),
                                       TextContent(type="text", text=text)], structured_content=body, is_error=True)
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=body)


def _failed(tool: str, message: str) -> CallToolResult:
    located = message if message.startswith(f"{tool}: ") else f"{tool}: {message}"
    return CallToolResult(content=[TextContent(type="text", text=located)], is_error=True)


INSTRUCTIONS = ("vLLM's errors: look one up, explain a paste, check a launch before spending GPU time, see whether "
                "it fits.")


def server(spec: SourceSpec, errors: Optional[Path], calls: Calls) -> Server[Any]:
    """The SDK's low-level server with kb's tools: it lists them and answers each call with kb's
    own checks and messages (the SDK's MCPServer would answer a bad argument with its own text)."""
    from kb.agent.arguments import input_schema

    releases = Releases(spec, errors)
    table = tools(releases)
    threading.Thread(target=releases.preload, name="kb mcp preload", daemon=True).start()
    listed = [Tool(name=name, description=inspect.getdoc(fn) or "", input_schema=input_schema(fn))
              for name, fn in table.items()]

    async def list_tools(ctx: Any, params: Any) -> ListToolsResult:
        return ListToolsResult(tools=listed)

    async def on_call(ctx: Any, params: Any) -> CallToolResult:
        return await call_tool(table, calls, params.name, params.arguments or {})

    return Server("vllm-error-kb", instructions=INSTRUCTIONS, on_list_tools=list_tools, on_call_tool=on_call)


def serve(spec: SourceSpec, errors: Optional[Path], transport: str = "stdio", port: int = 8765,
          call_timeout: Optional[float] = None) -> None:
    """Serve until stdin ends (stdio) or the process is stopped (HTTP); each tool call is bounded
    by `call_timeout` seconds."""
    seconds = DEFAULT_SECONDS if call_timeout is None else call_timeout
    if not 0 < seconds <= 86_400:
        raise UsageError(f"--call-timeout: expected seconds from more than 0 to 86400, got {seconds:g}")
    app = server(spec, errors, Calls(seconds))
    if transport == "stdio":
        anyio.run(_serve_stdio, app)
    else:
        anyio.run(_serve_http, app, port)


async def _serve_stdio(app: Server[Any]) -> None:
    from kb.agent.wire import checked_stdio

    async with checked_stdio() as (read, write):
        await app.run(read, write, app.create_initialization_options())


async def _serve_http(app: Server[Any], port: int) -> None:
    import uvicorn

    await uvicorn.Server(uvicorn.Config(app.streamable_http_app(host="127.0.0.1"), host="127.0.0.1", port=port,
                                        log_level="warning")).serve()
