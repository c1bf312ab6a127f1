"""`kb mcp`: an MCP server (the official `mcp` SDK) over stdio, or streamable HTTP on 127.0.0.1.

Its tools answer what the CLI answers, through the same library functions: `explain` is
`kb explain --json`, `check_launch` is `kb check --json`, `fit` is `kb fit --json`, `get_error`
is the site's `/api/errors/<id>` record, `search_errors` looks words or a paste up in the
release's match index. Every answer names the release it is about. The server is offline: a
release whose wheel is not in kb's cache is refused (fetch it once with `kb build` or `kb scan`),
never downloaded."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

from kb.errors import KBError, UsageError
from kb.scan.source import SourceSpec

MAX_TEXT = 1_000_000  # characters of a paste or a command one call takes


class Releases:
    """The releases the server answers for: the one it was started with, and any other whose
    wheel is in the cache; each one's records loaded once."""

    def __init__(self, spec: SourceSpec, errors: Optional[Path]) -> None:
        self.spec, self.errors = spec, errors
        self.records: dict[str, tuple[Any, Any]] = {}
        self.searchers: dict[str, Any] = {}

    def searcher(self, spec: SourceSpec) -> Any:
        """The release's ranked search (kb search's), loaded once."""
        from kb.jobs import searcher_for

        key = self.label(spec)
        if key not in self.searchers:
            self.searchers[key] = searcher_for(spec, errors=self.errors)
        return self.searchers[key]

    def label(self, spec: SourceSpec) -> str:
        return spec.vllm_version or spec.wheel or spec.source_dir or spec.git or "?"

    def spec_for(self, release: Optional[str]) -> SourceSpec:
        if not release or release == self.label(self.spec):
            return self.spec
        from kb.paths import cache_dir

        if not any((cache_dir() / "wheels").glob(f"vllm-{release}-*.whl")):
            raise UsageError(f"release {release} is not in kb's cache (the server never downloads): "
                             f"run `kb scan --vllm-version {release}` once")
        return SourceSpec(vllm_version=release)

    def available(self) -> list[str]:
        from kb.paths import cache_dir

        found = {p.name.split("-")[1] for p in (cache_dir() / "wheels").glob("vllm-*.whl")}
        return sorted(found | {self.label(self.spec)})

    def record(self, spec: SourceSpec, ident: str) -> Optional[dict[str, Any]]:
        from kb.derived.attach import attach_derived
        from kb.jobs import curated_records, scan_release
        from kb.paths import cache_dir
        from kb.records.merge import Merged, attach_set_by
        from kb.site.api import SiteInfo, api_record

        key = self.label(spec)
        if key not in self.records:
            scan = scan_release(spec)
            merged: Merged = curated_records([("", scan)], self.errors)
            # the guidance the site's page gives, derived parts too (kb/derived/; cached by digest)
            records = attach_derived(merged.records, scan.config, 1, cache_dir())
            self.records[key] = ({r.id: r for r in records}, (SiteInfo(scan.tree), scan.config))
        by_id, (info, config) = self.records[key]
        r = by_id.get(ident)
        if r is None:
            return None
        return api_record(attach_set_by([r], config)[0], info)  # as the site's /api/errors/<id> serves it


def hardware_of(given: Optional[dict[str, Any]]) -> dict[str, Any]:
    """A tool's `hardware` as `kb check --gpu ...` reads it (kb/hardware.py)."""
    from kb.hardware import hardware_facts

    g = given or {}
    return hardware_facts(g.get("gpu_name"), g.get("gpu_count"), g.get("compute_capability"), g.get("gpu_memory_gib"))


def _answer(release: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"release": release, **body}


def tools(releases: Releases) -> dict[str, Callable[..., dict[str, Any]]]:
    """The tools by name: plain functions of JSON-like arguments, so the tests can call them too."""
    from kb.checks.launch import command_words

    def explain(text: str, release: Optional[str] = None) -> dict[str, Any]:
        """What `kb explain --json` says of an error text or a log: the vLLM error it is, the values
        in it, its meaning and fixes."""
        from kb.explain.output import explanation_json
        from kb.jobs import explain_text

        spec = releases.spec_for(release)
        ex = explain_text(text[:MAX_TEXT], spec, errors=releases.errors)
        return _answer(releases.label(spec), json.loads(explanation_json(ex)))

    def search_errors(query: str, release: Optional[str] = None, limit: int = 10) -> dict[str, Any]:
        """vLLM errors for a paste or words, as `kb search --json` ranks them: the exact template
        matches first, then the errors ranked by the words (lunr: field weights, stemming, the
        shorthand users type). Each result has its id, score, title, url and kind."""
        from kb.search.query import hits_dict

        spec = releases.spec_for(release)
        hits = releases.searcher(spec).search(query[:MAX_TEXT], max(1, min(int(limit), 50)))
        return hits_dict(releases.label(spec), hits)

    def get_error(id: str, release: Optional[str] = None) -> dict[str, Any]:
        """The full record of one error id, as the site's /api/errors/<id> gives it."""
        spec = releases.spec_for(release)
        record = releases.record(spec, id)
        if record is None:
            raise UsageError(f"no error {id!r} in {releases.label(spec)}")
        return _answer(releases.label(spec), {"record": record})

    def check_launch(command: str, config_json: Optional[dict[str, Any]] = None,
                     hardware: Optional[dict[str, Any]] = None, release: Optional[str] = None) -> dict[str, Any]:
        """What `kb check --json` predicts for a `vllm serve` command: vLLM's parser, its config
        checks in vLLM's order, valid values. `hardware`: gpu_name (kb's GPU table), gpu_count,
        gpu_memory_gib, compute_capability."""
        from kb.checks.report import outcome_json
        from kb.jobs import check_launch as check

        spec = releases.spec_for(release)
        with tempfile.TemporaryDirectory(prefix="kb-mcp-") as tmp:
            config = None
            if config_json is not None:
                config = Path(tmp) / "config.json"
                config.write_text(json.dumps(config_json), encoding="utf-8")
            out = check(spec, command_words(command[:MAX_TEXT]), config, hardware_of(hardware), releases.errors)
        return _answer(releases.label(spec), json.loads(outcome_json(out)))

    def fit(command: str, config_json: dict[str, Any], hardware: dict[str, Any],
            release: Optional[str] = None) -> dict[str, Any]:
        """What `kb fit --json` says: vLLM's KV cache size for the launch on the GPU and the memory
        errors it would raise. `hardware`: gpu_name (kb's GPU table) or gpu_memory_gib, gpu_count."""
        from kb.fit.report import fit_dict
        from kb.jobs import fit_launch

        spec = releases.spec_for(release)
        with tempfile.TemporaryDirectory(prefix="kb-mcp-") as tmp:
            config = Path(tmp) / "config.json"
            config.write_text(json.dumps(config_json), encoding="utf-8")
            report = fit_launch(spec, command_words(command[:MAX_TEXT]), config, hardware_of(hardware),
                                releases.errors)
        return _answer(releases.label(spec), fit_dict(report))

    def list_releases() -> dict[str, Any]:
        """The releases this server answers for without the network."""
        return {"release": releases.label(releases.spec), "releases": releases.available()}

    return {f.__name__: f for f in (search_errors, get_error, explain, check_launch, fit, list_releases)}


def serve(spec: SourceSpec, errors: Optional[Path], transport: str = "stdio", port: int = 8765) -> None:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer(name="vllm-error-kb", instructions="vLLM's errors: look one up, explain a paste, check a "
                                                           "launch before spending GPU time, see whether it fits.")
    for name, fn in tools(Releases(spec, errors)).items():
        server.add_tool(_guarded(fn), name=name, description=(fn.__doc__ or "").strip())
    if transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=port)


def _guarded(fn: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
    """The tool with kb's located errors as answers (`{"error": ...}`), never a traceback."""
    import functools

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> dict[str, Any]:
        try:
            return fn(*args, **kwargs)
        except KBError as e:
            return {"error": str(e)}
    return call
