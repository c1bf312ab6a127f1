"""`kb fit`'s output: pure functions of a FitReport (text, and JSON whose top-level figures are
plain numbers, with `exact` and `how` for each beside them)."""

from __future__ import annotations

import json
from typing import Any, Optional

from kb.fit.launch import FitReport
from kb.fit.memory import GIB, Figure

FORMAT = "kb-fit/2"


def _figures(report: FitReport) -> dict[str, tuple[Figure, float]]:
    f = report.fit
    assert f is not None
    capacity = {} if f.capacity is None else {"kv_capacity_gib": (f.capacity, round(f.capacity.value / GIB, 2))}
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
    }


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
                            **({"url": f"{site_url.rstrip('/')}/errors/{e.id}/"} if site_url and e.id else {})}
                           for e in report.errors]})
    if report.rules is not None:
        out["rules"] = report.rules.to_json()
    return out


def fit_text(report: FitReport, site_url: Optional[str] = None) -> str:
    if report.parse_error is not None:
        return f"vLLM's parser refuses the command: {report.parse_error.printed}\n"
    fit = report.fit
    assert fit is not None
    lines = ["Will it fit? (per GPU, as vLLM sizes its KV cache at startup)"]
    for key, (fig, shown) in _figures(report).items():
        mark = "exact" if fig.exact else "estimated"
        lines.append(f"  {key:22s} {shown!s:>14}  ({mark}: {fig.how})")
    lines.append(f"  max_model_len {fit.max_model_len}, block size {fit.block_size}, {fit.num_blocks} blocks")
    for a in report.assumptions:
        lines.append(f"  assumed: {a}")
    if not report.errors:
        lines.append("Fits: vLLM starts with this KV cache.")
    for n, e in enumerate(report.errors):
        where = f" {site_url.rstrip('/')}/errors/{e.id}/" if site_url and e.id else (f" [{e.id}]" if e.id else "")
        when = " after CUDA graph capture and warmup" if e.after_warmup else ""
        said = (f"vLLM raises{when}: " if n == 0 else "and: ") if e.id else ("kb predicts: " if n == 0 else "and kb: ")
        lines.append(said + e.message + where)
    return "\n".join(lines) + "\n"
