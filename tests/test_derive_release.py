"""The checks derived from vLLM 0.33.0's own guards (kb/checks/derive.py), on the real release wheel:
how many config-time sites become a check (the issue's floor: 250), the curated checks against
their derived twins, and `kb check`'s index in the cache (kb/checks/index.py): read instead of a
scan, the same outcome, a damaged one built again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kb.checks.derive import derive
from kb.checks.facts import facts_of, run
from kb.checks.report import outcome_json
from kb.checks.verify import case_facts, verify_records
from kb.jobs import check_launch, curated_records, scan_release
from kb.model import ScanResult
from kb.scan.source import SourceSpec

pytestmark = pytest.mark.release
SPEC = SourceSpec(vllm_version="0.33.0")
REFERENCE = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 6144,
             "num_attention_heads": 48, "num_key_value_heads": 8, "num_hidden_layers": 4,
             "max_position_embeddings": 8192}


@pytest.fixture(scope="module")
def scan_0_33() -> ScanResult:
    return scan_release(SPEC)


def test_at_least_250_config_time_sites_become_checks(scan_0_33: ScanResult) -> None:
    index = derive(scan_0_33.sites, scan_0_33.config)
    assert index.sites == sum(s.file.startswith(("vllm/config/", "vllm/engine/arg_utils.py", "vllm/sampling_params.py"))
                              for s in scan_0_33.sites)  # the launch's sites, and the request's (kb check --request)
    assert len(index.checks) >= 250, len(index.checks)  # 279 when measured
    launch_time = [c for c in index.checks if not any(r.kind == "unknown" for r in c.refs)]
    # 53 when measured (69 before a review made the derivation stricter: fields set through a held
    # config or by name (VllmConfig._set_config_default), pydantic's conversion of JSON values, before
    # validators, exits kb cannot write): every value they read is known at launch
    assert len(launch_time) >= 53, len(launch_time)
    assert all(u.reason for u in index.uncheckable)
    # vLLM's own condition: TP must divide by DCP (vllm/config/parallel.py), over the two flags
    tp_dcp = next(c for c in index.checks if c.file == "vllm/config/parallel.py" and c.line == 600)
    model = scan_0_33.config
    assert model is not None
    assert run(tp_dcp, facts_of(model, {"tensor_parallel_size": 16, "decode_context_parallel_size": 3}, {}), "").raises
    assert run(tp_dcp, facts_of(model, {"tensor_parallel_size": 16, "decode_context_parallel_size": 4}, {}),
               "").raises is False


def test_curated_checks_agree_with_their_derived_twins(scan_0_33: ScanResult) -> None:
    records = curated_records([("", scan_0_33)], None).records
    assert scan_0_33.config is not None
    assert all(not problems for problems in verify_records(records, scan_0_33.config).values())
    twins = derive([s for r in records if r.entry and r.entry.check for s in r.sites], scan_0_33.config)
    decided = 0
    for r in records:
        if r.entry is None or r.entry.check is None:
            continue
        mine = [c for c in twins.checks if c.record_id == r.id]
        for case in r.entry.check.cases:
            verdicts = [run(c, case_facts(scan_0_33.config, case.inputs), r.template).raises for c in mine]
            decided += any(v is not None for v in verdicts)
    # 25 when measured (33 before the stricter derivation: VllmConfig sets fields by name first, so its
    # methods read only the values given): cases a twin decides, and agrees on (the lint above)
    assert decided >= 25, decided


def test_kb_check_reads_its_index_instead_of_scanning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps(REFERENCE))
    words = ["vllm", "serve", "m", "-tp", "16", "-dcp", "3"]
    first = outcome_json(check_launch(SPEC, words, config, {"gpu_count": 16}))
    import kb.jobs

    def no_scan(*args: object, **kwargs: object) -> ScanResult:
        raise AssertionError("scanned although the index is there")

    monkeypatch.setattr(kb.jobs, "scan_release", no_scan)
    assert outcome_json(check_launch(SPEC, words, config, {"gpu_count": 16})) == first
    path = kb.jobs._index_path(SPEC, None)
    assert path is not None and path.is_file()
    path.write_text("{not json")  # damaged: built again, from a scan
    monkeypatch.undo()
    assert outcome_json(check_launch(SPEC, words, config, {"gpu_count": 16})) == first
    assert json.loads(path.read_text())["format"] == "kb-check-index/1"
    data = json.loads(first)
    assert [p["id"] for p in data["predicted"]][:1] == ["8ce9b4cdaf700441"]  # vLLM's first: tp_size % dcp_size
    assert data["predicted"][0]["validValues"] == {"--decode-context-parallel-size": [1, 2]}


def test_fields_vllm_sets_later_are_not_read_as_given(tmp_path: Path) -> None:
    """`--kernel-config '{}'`: VllmConfig fills kernel_config.enable_flashinfer_autotune before its
    own check (vllm/config/vllm.py:1857), so kb must not predict that check (real vLLM accepts it);
    an EPLB async check reads `"use_async": "false"` as pydantic does (False)."""
    from kb.checks.launch_check import check_one

    scan = scan_release(SPEC)
    records = curated_records([("", scan)], None).records
    for words in (["--kernel-config", "{}"], ["--eplb-config", '{"use_async": "false", "communicator": "pynccl"}']):
        out = check_one(records, scan.config, ["vllm", "serve", "m", *words], None, {"gpu_count": 8}, with_valid=False)
        assert out.parse_error is None and not out.predicted, [p.message for p in out.predicted]


LLAMA3 = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
          "num_key_value_heads": 8, "num_hidden_layers": 32, "max_position_embeddings": 8192}


def test_values_vllm_computes_decide_the_scheduler_checks(scan_0_33: ScanResult) -> None:
    """SchedulerConfig's checks read max_num_batched_tokens and max_num_seqs as vLLM defaults them
    per GPU, and max_model_len as vLLM derives it (kb/checks/computed.py); the real vLLM 0.33.0
    raised exactly these (tests/data/oracle-computed-0.33.0.json)."""
    from kb.checks.computed import GIB, NEEDS, Hardware, modelled

    model = scan_0_33.config
    assert model is not None
    assert all(modelled(model, v) for v in NEEDS)  # 0.33.0's functions are the ones followed
    index = derive(scan_0_33.sites, model)
    seqs = next(c for c in index.checks if c.file == "vllm/config/scheduler.py" and c.line == 332)
    assert {r.kind for r in seqs.refs} >= {"computed"}
    template = "max_num_batched_tokens ({self.max_num_batched_tokens}) must be greater than or equal to " \
               "max_num_seqs ({self.max_num_seqs})."
    a100 = Hardware(80 * GIB, "NVIDIA A100-SXM4-80GB", (8, 0))
    h100 = Hardware(80 * GIB, "NVIDIA H100 80GB HBM3", (9, 0))
    verdict = run(seqs, facts_of(model, {"max_num_seqs": 4096}, LLAMA3, hardware=a100), template)
    assert verdict.raises and verdict.message == \
        "max_num_batched_tokens (2048) must be greater than or equal to max_num_seqs (4096)."
    assert run(seqs, facts_of(model, {"max_num_seqs": 4096}, LLAMA3, hardware=h100), template).raises is False
    unknown = run(seqs, facts_of(model, {"max_num_seqs": 4096}, LLAMA3), template)
    assert unknown.raises is None and any("--gpu" in m for m in unknown.missing)
    long_prefill = next(c for c in index.checks if c.file == "vllm/config/scheduler.py" and c.line == 356)
    linear = {**LLAMA3, "max_position_embeddings": 4096, "rope_scaling": {"type": "linear", "factor": 4.0}}
    assert run(long_prefill, facts_of(model, {"long_prefill_token_threshold": 16385}, linear), "").raises
    assert run(long_prefill, facts_of(model, {"long_prefill_token_threshold": 16384}, linear), "").raises is False


def test_kb_check_names_the_gpu(tmp_path: Path) -> None:
    import subprocess
    import sys

    config = tmp_path / "config.json"
    config.write_text(json.dumps(LLAMA3))

    def check(*gpu: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "kb", "check", "--vllm-version", "0.33.0", "--model-config",
                               str(config), *gpu, "--json", "--", "vllm", "serve", "m", "--max-num-seqs", "4096"],
                              capture_output=True, text=True, timeout=300)

    on_a100 = check("--gpu", "a100")
    first = json.loads(on_a100.stdout)["first"]
    assert first is not None and first["message"].startswith("max_num_batched_tokens (2048) must be"), on_a100.stderr
    assert json.loads(check("--gpu", "h100").stdout)["first"] is None
    bad = check("--gpu", "no-such-gpu")
    assert bad.returncode == 2 and "one of: h100" in bad.stderr and "Traceback" not in bad.stderr


def test_a_null_flag_in_a_case_is_not_given(scan_0_33: ScanResult) -> None:
    # `quantization: null` in a case is the launch without the flag (a check vLLM reaches only
    # through a flag's config is then not run), as kb check reads a launch that does not give it
    model = scan_0_33.config
    assert model is not None
    facts = case_facts(model, {"quantization": None, "tensor_parallel_size": 2})
    assert facts.flags.get("tensor_parallel_size") == 2 and "quantization" not in facts.flags
    assert case_facts(model, {"quantization": "awq"}).flags.get("quantization") == "awq"


# --- vLLM 0.34.0: what its new checks need kb to read -----------------------------------------------
@pytest.fixture(scope="module")
def records_0_34() -> tuple[list, object]:
    scan = scan_release(SourceSpec(vllm_version="0.34.0"))
    return list(curated_records([("", scan)], None).records), scan.config


def predicted_0_34(records_0_34: tuple[list, object], *flags: str) -> list[str]:
    """The messages `kb check` predicts on an H100 for the reference model, in vLLM's order."""
    from kb.checks.launch import ConfigFile
    from kb.checks.launch_check import check_one

    records, model = records_0_34
    out = check_one(records, model, ["vllm", "serve", "org/model", *flags],  # type: ignore[arg-type]
                    ConfigFile("config.json", REFERENCE), {"gpu_count": 8, "gpu_memory_gib": 80.0, "gpu_name": "H100",
                                                            "compute_capability": 9.0}, with_valid=False)
    if out.parse_error is not None:
        return [out.parse_error.message]
    return [e.printed if hasattr(e, "printed") else e.message for e in out.in_order()]


def test_an_unknown_speculative_method_is_refused_by_its_field_validator_first(records_0_34) -> None:
    # 0.34.0 turned `method` from a Literal (argparse's choices) into `SpeculativeMethod | str` checked by
    # a field validator against get_args(SpeculativeMethod) and the methods plugins register (none)
    first = predicted_0_34(records_0_34, "--spec-method", "not-a-choice")
    assert first[0].startswith("Unknown speculative method not-a-choice. Built-in methods: ['bailing_hybrid_mtp'")
    assert first[0].endswith("registered custom methods: [].")
    assert first[1].startswith("num_speculative_tokens must be provided")  # after it, in vLLM's order
    assert not any(m.startswith("Unknown speculative") for m in predicted_0_34(records_0_34, "--spec-method", "ngram"))


def test_the_new_config_checks_of_0_34(records_0_34) -> None:
    assert predicted_0_34(records_0_34, "--enable-extensible-kv-cache", "--kv-cache-memory-bytes", "8G") == [
        "enable_extensible_kv_cache: it sizes the KV cache from measured memory, which kv_cache_memory_bytes overrides."]
    assert predicted_0_34(records_0_34, "--enable-extensible-kv-cache", "--num-gpu-blocks-override", "100") == [
        "enable_extensible_kv_cache: it sizes the KV cache from measured memory, which num_gpu_blocks_override overrides."]
    assert predicted_0_34(records_0_34, "--kv-cache-memory-bytes", "8G") == []  # unset: vLLM turns it off itself
    runner = predicted_0_34(records_0_34, "--enable-dbo", "--pipeline-parallel-size", "4")
    assert runner and runner[0].startswith("The GPU model runner does not support: ")
    assert predicted_0_34(records_0_34, "--enable-batch-sharded-sampling") == [
        "Batch-sharded sampling was explicitly enabled via the --enable-batch-sharded-sampling flag, but is not "
        "supported in this configuration for the following reason(s): tensor_parallel_size is 1, so there is "
        "nothing to shard."]
    assert predicted_0_34(records_0_34, "--mm-processor-device", "not-a-choice") == [
        "argument --mm-processor-device: invalid choice: 'not-a-choice' (choose from 'auto', 'cpu', 'cuda')"]
