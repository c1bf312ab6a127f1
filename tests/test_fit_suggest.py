"""kb fit on vLLM 0.34.0 for a launch that does not fit: the first failure only, and the smallest
change of one flag that fits, each suggestion proved here again with kb fit's library (the changed
launch fits, the nearer value does not) and, for a value kb fit calls not valid, with kb check's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kb.errors import UsageError
from kb.fit.launch import FitReport, Suggestion
from kb.hardware import hardware_facts
from kb.jobs import check_launch, fit_launch
from kb.scan.source import SourceSpec

pytestmark = pytest.mark.release

SPEC = SourceSpec(vllm_version="0.34.0")
MODEL = "meta-llama/Llama-3.1-70B-Instruct"
# Llama-3.1-70B-Instruct's config.json (the keys kb reads)
LLAMA_70B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 8192,
             "num_attention_heads": 64, "num_key_value_heads": 8, "num_hidden_layers": 80,
             "intermediate_size": 28672, "vocab_size": 128256, "torch_dtype": "bfloat16",
             "max_position_embeddings": 131072, "rope_theta": 500000.0, "tie_word_embeddings": False,
             "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                              "original_max_position_embeddings": 8192, "rope_type": "llama3"}}


@pytest.fixture()
def config(tmp_path: Path) -> Path:
    (tmp_path / "config.json").write_text(json.dumps(LLAMA_70B))
    return tmp_path / "config.json"


def h100(**more: Any) -> dict[str, Any]:
    return {**hardware_facts("h100", None, None, None), **more}


def fit(config: Path, *flags: str, **hardware: Any) -> FitReport:
    return fit_launch(SPEC, ["vllm", "serve", MODEL, *flags], config, h100(**hardware))


def verdict(report: FitReport) -> str:
    return report.errors[0].key if report.errors else "fits"


def suggestion(report: FitReport, dest: str) -> Suggestion:
    found = [s for s in report.suggestions if s.dest == dest]
    assert len(found) == 1, [s.dest for s in report.suggestions]
    return found[0]


def test_70b_with_tp_1_fails_loading_and_the_smallest_tp_that_fits_is_proved(config: Path) -> None:
    report = fit(config, "-tp", "1")
    assert [e.key for e in report.errors] == ["weights"]  # loading fails: no KV cache error is reached
    assert not any("No available memory for the cache blocks" in e.message for e in report.errors)
    assert [s for s, _, _ in report.not_reached] == ["determine_available_memory", "get_kv_cache_configs",
                                                     "compile_or_warm_up_model", "finalize_extensible_kv_cache"]
    assert report.rules is not None and [s for s, _, _ in report.rules.startup][:2] == ["request_memory", "load_model"]
    assert all(f.startswith("vllm/v1/") and n > 0 for _, f, n in report.rules.startup)  # read from the source
    tp = suggestion(report, "tensor_parallel_size")
    assert (tp.old, tp.new, tp.option) == (1, 4, "-tp")
    assert tp.argv == ("vllm", "serve", MODEL, "-tp", "4") and tp.argv[tp.changed[0]:tp.changed[1]] == ("-tp", "4")
    # the proof, again with kb fit's library: 4 fits, 2 does not; 3 is refused by vLLM's own check (kb check)
    assert verdict(fit(config, "-tp", "4")) == "fits"
    assert verdict(fit(config, "-tp", "2")) == "max-seq-len"
    three = check_launch(SPEC, ["vllm", "serve", MODEL, "-tp", "3"], config, h100())
    assert any("must be divisible by tensor parallel size (3)" in p.message for p in three.predicted)
    assert [(t.value, t.outcome.split(":")[0]) for t in tp.tried] == [(1, "weights"), (2, "max-seq-len"), (3, "invalid")]
    assert [s.dest for s in report.suggestions] == ["tensor_parallel_size"]  # the KV cache is not the problem


def test_the_smallest_tp_stays_within_the_gpus_given(config: Path) -> None:
    report = fit(config, "-tp", "1", gpu_count=2)
    assert not report.suggestions  # 4 GPUs would fit, 2 are given
    report = fit(config, "-tp", "1", gpu_count=8)
    assert suggestion(report, "tensor_parallel_size").new == 4


def test_the_largest_max_model_len_that_fits_is_proved(config: Path) -> None:
    report = fit(config, "-tp", "2")
    assert verdict(report) == "max-seq-len"
    mml = suggestion(report, "max_model_len")
    assert mml.old == 131072 and 0 < mml.new < 131072
    assert mml.argv == ("vllm", "serve", MODEL, "-tp", "2", "--max-model-len", str(mml.new))
    assert verdict(fit(config, "-tp", "2", "--max-model-len", str(mml.new))) == "fits"
    assert verdict(fit(config, "-tp", "2", "--max-model-len", str(mml.new + 1))) == "max-seq-len"
    assert suggestion(report, "tensor_parallel_size").new == 4


def test_the_nearest_gpu_memory_utilization_that_fits_is_proved(config: Path) -> None:
    report = fit(config, "-tp", "4", "--gpu-memory-utilization", "0.5")
    util = suggestion(report, "gpu_memory_utilization")
    assert util.old == 0.5 and 0.5 < util.new <= 1
    assert util.argv[util.changed[0]:util.changed[1]] == ("--gpu-memory-utilization", f"{util.new:.2f}")
    assert verdict(fit(config, "-tp", "4", "--gpu-memory-utilization", f"{util.new:.2f}")) == "fits"
    assert verdict(fit(config, "-tp", "4", "--gpu-memory-utilization", f"{util.new - 0.01:.2f}")) != "fits"
    # at vLLM's bound (le=1 on CacheConfig.gpu_memory_utilization) there is nothing above to suggest
    full = fit(config, "-tp", "2")
    assert full.utilization == 1.0 and not [s for s in full.suggestions if s.dest == "gpu_memory_utilization"]


def test_other_processes_holding_memory_get_the_largest_utilization_below(config: Path) -> None:
    flags = ("-tp", "4", "--max-model-len", "8192", "--no-enable-extensible-kv-cache")
    report = fit(config, *flags, gpu_memory_used_gib=20)
    assert verdict(report) == "free-memory"
    util = suggestion(report, "gpu_memory_utilization")
    assert util.new < util.old == 0.92
    assert verdict(fit(config, *flags, "--gpu-memory-utilization", f"{util.new:.2f}", gpu_memory_used_gib=20)) == "fits"
    above = f"{util.new + 0.01:.2f}"
    assert verdict(fit(config, *flags, "--gpu-memory-utilization", above, gpu_memory_used_gib=20)) == "free-memory"


def test_kb_fit_text_and_json_show_the_first_failure_and_the_marked_command(config: Path) -> None:
    base = [sys.executable, "-m", "kb", "fit", "--vllm-version", "0.34.0", "--model-config", str(config), "--gpu", "h100"]
    words = ["--", "vllm", "serve", MODEL, "-tp", "1"]
    text = subprocess.run([*base, *words], capture_output=True, text=True, timeout=600)
    assert text.returncode == 1, text.stderr
    out = text.stdout
    assert "kb predicts: loading the weights fails with CUDA out of memory" in out
    assert "No available memory for the cache blocks" not in out
    assert "not reached (vLLM stops at its first failure): the profile run (determine_available_memory)" in out
    lines = out.splitlines()
    at = lines.index(f"    vllm serve {MODEL} -tp 4")
    assert lines[at + 1] == " " * len(f"    vllm serve {MODEL} ") + "^^^^^"
    assert lines[at - 1] == "  -tp 4 (was 1): fits; does not fit: 2 (max-seq-len); not valid for the model: 3"
    assert lines[at + 2].startswith("    headroom (estimated): weights 32.85 GiB per GPU")
    done = subprocess.run([*base, "--json", *words], capture_output=True, text=True, timeout=600)
    got = json.loads(done.stdout)
    assert got["verdict"] == "weights" and [e["kind"] for e in got["errors"]] == ["weights"]
    assert [s["step"] for s in got["not_reached"]][:2] == ["determine_available_memory", "get_kv_cache_configs"]
    first = got["suggestions"][0]
    assert (first["flag"], first["from"], first["to"], first["verdict"]) == ("tensor_parallel_size", 1, 4, "fits")
    assert first["command"][first["changed"][0]:first["changed"][1]] == ["-tp", "4"]
    assert first["kv_headroom_gib"] > 0 and first["tried"][1] == {"value": 2, "outcome": "max-seq-len"}
    for key in ("weights_gib", "available_kv_gib", "kv_cache_tokens", "max_model_len_fits", "rules", "exact", "how"):
        assert key in got, key  # the fields kb fit had before stay


def test_the_model_config_comes_from_the_hugging_face_cache(tmp_path: Path) -> None:
    snapshot = tmp_path / "hub" / "models--meta-llama--Llama-3.1-70B-Instruct" / "snapshots" / ("a" * 40)
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps(LLAMA_70B))
    (snapshot.parent.parent / "refs").mkdir()
    (snapshot.parent.parent / "refs" / "main").write_text("a" * 40)
    env = {"HF_HUB_CACHE": str(tmp_path / "hub")}
    report = fit_launch(SPEC, ["vllm", "serve", MODEL, "-tp", "1"], None, h100(), env=env)
    assert report.config_read == str(snapshot / "config.json") and verdict(report) == "weights"
    with pytest.raises(UsageError, match=r"give --model-config FILE_OR_DIR: kb found no config\.json of meta-llama/Other"):
        fit_launch(SPEC, ["vllm", "serve", "meta-llama/Other", "-tp", "1"], None, h100(), env=env)
