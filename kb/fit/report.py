"""`kb fit`'s output: pure functions of a FitReport (text, and JSON whose top-level figures are
plain numbers, with `exact` and `how` for each beside them)."""

from __future__ import annotations

import json
import shlex
from typing import Any, Optional

from kb.fit.follow import STEP_WORDS
from kb.fit.launch import FitReport, Suggestion
from kb.fit.memory import GIB, Figure, Fit
from kb.fit.suggest import shown
from kb.urls import error_url

FORMAT = "kb-fit/2"


def _figures(report: FitReport) -> dict[str, tuple[Figure, float]]:
    assert report.fit is not None
    return _fit_figures(report.fit)


def _fit_figures(f: Fit) -> dict[str, tuple[Figure, float]]:
    capacity = {} if f.capacity is None else {"kv_capacity_gib": (f.capacity, round(f.capacity.value / GIB, 2))}
    headroom = {} if f.kv_headroom is None else {"kv_headroom_gib": (f.kv_headroom, round(f.kv_headroom.value / GIB, 2))}
    return {**capacity,
        "weights_gib": (f.weights, round(f.weights.value / GIB, 2)),
        "activation_peak_gib": (f.activation_peak, round(f.activation_peak.value / GIB, 2)),
        "non_torch_gib": (f.non_torch, round(f.non_torch.value / GIB, 2)),
        "cuda_graph_gib": (f.cuda_graph, round(f.cuda_graph.value / GIB, 2)),
        "requested_gib": (f.requested, round(f.requested.value / GIB, 2)),
        "available_kv_gib": (f.available_kv, round(f.available_kv.value / GIB, 2)),
        "kv_bytes_per_token": (f.kv_bytes_per_token, int(f.kv_bytes_per_token.value)),
        "kv_cache_tokens": (f.kv_cache_tokens, int(f.kv_cache_tokens.value)),
        "max_concurrency": (f.max_concurrency, round(f.max_concurrency.value, 2)),
        "max_model_len_fits": (f.max_model_len_fits, int(f.max_model_len_fits.value)),
        **headroom,
    }


# the figures of a suggested launch that say how much room it leaves
HEADROOM = ("weights_gib", "available_kv_gib", "kv_headroom_gib", "kv_cache_tokens", "max_concurrency")


def suggestion_dict(s: Suggestion) -> dict[str, Any]:
    figures = _fit_figures(s.fit)
    return {"flag": s.dest, "option": s.option, "from": s.old, "to": s.new, "verdict": "fits",
            "command": list(s.argv), "command_text": shlex.join(s.argv), "changed": list(s.changed),
            **{k: figures[k][1] for k in HEADROOM if k in figures},
            "exact": {k: figures[k][0].exact for k in HEADROOM if k in figures},
            "max_model_len": s.fit.max_model_len,
            "tried": [{"value": t.value, "outcome": t.outcome} for t in s.tried]}


def marked_command(s: Suggestion) -> tuple[str, str]:
    """The changed command as a shell line, and a line of carets under the words changed."""
    words = [shlex.quote(w) for w in s.argv]
    start = sum(len(w) + 1 for w in words[:s.changed[0]])
    width = len(" ".join(words[s.changed[0]:s.changed[1]]))
    return " ".join(words), " " * start + "^" * width


def suggestion_text(s: Suggestion) -> list[str]:
    figures = _fit_figures(s.fit)
    estimated = "" if all(figures[k][0].exact for k in HEADROOM if k in figures) else " (estimated)"
    tried = [t for t in s.tried if t.value != s.old]
    short = [f"{shown(t.value)} ({t.outcome})" for t in tried if not t.outcome.startswith("invalid")][-3:]
    invalid = [shown(t.value) for t in tried if t.outcome.startswith("invalid")]
    proof = (["does not fit: " + ", ".join(short)] if short else []) + \
        (["not valid for the model: " + ", ".join(invalid)] if invalid else [])
    line, marks = marked_command(s)
    headroom = figures["kv_headroom_gib"][1] if "kv_headroom_gib" in figures else 0.0
    return [f"  {s.option} {shown(s.new)} (was {shown(s.old)}): fits" + ("; " + "; ".join(proof) if proof else ""),
            f"    {line}", f"    {marks}",
            f"    headroom{estimated}: weights {figures['weights_gib'][1]} GiB per GPU, KV cache "
            f"{figures['available_kv_gib'][1]} GiB, {headroom} GiB beyond one request of {s.fit.max_model_len} tokens; "
            f"{figures['kv_cache_tokens'][1]} tokens, {figures['max_concurrency'][1]} such requests at once"]


def verdict(report: FitReport) -> str:
    return report.errors[0].key if report.errors else "fits"


def fit_json(report: FitReport, site_url: Optional[str] = None) -> str:
    return json.dumps(fit_dict(report, site_url), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def fit_dict(report: FitReport, site_url: Optional[str] = None) -> dict[str, Any]:
    """`kb fit --json`, and the `fit` of `kb check --json` when the GPU's memory is known."""
    out: dict[str, Any] = {"format": FORMAT}
    if report.parse_error is not None:
        out["parseError"] = {"stage": report.parse_error.stage, "message": report.parse_error.printed}
        return out
    fit = report.fit
    assert fit is not None
    figures = _figures(report)
    out.update({k: v for k, (_, v) in figures.items()})
    out["exact"] = {k: fig.exact for k, (fig, _) in figures.items()}
    out["how"] = {k: fig.how for k, (fig, _) in figures.items()}
    out.update({"max_model_len": fit.max_model_len, "block_size": fit.block_size, "num_gpu_blocks": fit.num_blocks,
                "verdict": verdict(report), "assumptions": list(report.assumptions),
                "errors": [{"id": e.id, "kind": e.key, "message": e.message, "after_warmup": e.after_warmup,
                            "vllm_words": e.id is not None, "unfilled": list(e.unfilled),
                            **({"url": error_url(e.id, site_url, report.release)} if site_url and e.id else {})}
                           for e in report.errors]})
    if report.rules is not None:
        out["rules"] = report.rules.to_json()
    out["gpu_memory_utilization"] = report.utilization
    out["not_reached"] = [{"step": step, "what": STEP_WORDS.get(step, step), "file": file or None, "line": line or None}
                          for step, file, line in report.not_reached]
    out["suggestions"] = [suggestion_dict(s) for s in report.suggestions]
    if report.config_read is not None:
        out["config_read"] = report.config_read
    return out


def fit_text(report: FitReport, site_url: Optional[str] = None) -> str:
    if report.parse_error is not None:
        return f"vLLM's parser refuses the command: {report.parse_error.printed}\n"
    fit = report.fit
    assert fit is not None
    lines = [] if report.config_read is None else [f"config.json: {report.config_read}"]
    lines.append("Will it fit? (per GPU, as vLLM sizes its KV cache at startup)")
    for key, (fig, value) in _figures(report).items():
        mark = "exact" if fig.exact else "estimated"
        lines.append(f"  {key:22s} {value!s:>14}  ({mark}: {fig.how})")
    lines.append(f"  max_model_len {fit.max_model_len}, block size {fit.block_size}, {fit.num_blocks} blocks")
    for a in report.assumptions:
        lines.append(f"  assumed: {a}")
    if not report.errors:
        lines.append("Fits: vLLM starts with this KV cache.")
    for n, e in enumerate(report.errors):
        where = f" {error_url(e.id, site_url, report.release)}" if site_url and e.id else (f" [{e.id}]" if e.id else "")
        when = " after CUDA graph capture and warmup" if e.after_warmup else ""
        said = (f"vLLM raises{when}: " if n == 0 else "and: ") if e.id else ("kb predicts: " if n == 0 else "and kb: ")
        lines.append(said + e.message + where)
    if report.errors and report.not_reached:
        lines.append("  not reached (vLLM stops at its first failure): " + "; ".join(
            STEP_WORDS.get(step, step) + (f" at {file}:{line}" if file else "") for step, file, line in report.not_reached))
    if report.suggestions:
        lines.append("Smallest changes that fit (each changed launch sized again by kb fit):")
        for s in report.suggestions:
            lines.extend(suggestion_text(s))
    elif report.errors:
        lines.append("No change of --tensor-parallel-size, --max-model-len or --gpu-memory-utilization alone fits.")
    return "\n".join(lines) + "\n"
