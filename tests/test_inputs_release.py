"""Environment variables, config.json keys and request fields against vLLM itself, on the real
0.33.0 and 0.34.0 wheels (read from the test cache through kb's own download code). The reference
files were recorded from real vLLM by bench/oracle/inputs.py: tests/data/vllm-X-envs.json (every
getter of `vllm.envs.environment_variables` called in an empty environment) and
tests/data/vllm-X-requests.json (msgspec's and pydantic's own field lists and defaults)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kb.jobs import read_flags
from kb.scan.source import SourceSpec

pytestmark = pytest.mark.release

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module", params=["0.33.0", "0.34.0"])
def release(request) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def model_0_33(release: str):
    return read_flags(SourceSpec(vllm_version=release))[1]


# Measured: (variables, defaults as vLLM gives them, typed, documented). The 12 left in each need the
# run time (the home folder, tempfile, the CPU count, torch's version, a random name) or a
# walrus/sys.modules the reader does not follow; they are shown as their source, never as a wrong value.
ENVS = {"0.33.0": (318, 306, 311, 299), "0.34.0": (333, 321, 332, 313)}


def test_every_environment_variable_with_the_default_vllm_gives(model_0_33, release: str) -> None:
    oracle = json.loads((DATA / f"vllm-{release}-envs.json").read_text())["environment_variables"]
    mine = {e.name: e for e in model_0_33.env}
    total, known, typed, documented = ENVS[release]
    assert len(oracle) == total
    assert sorted(mine) == sorted(oracle)  # all of them, none extra
    same = [n for n, o in oracle.items() if mine[n].default_known and
            (mine[n].default, mine[n].default_exact) == (o["default"], o["exact"])]
    assert len(same) >= known
    assert [n for n in oracle if n not in same and mine[n].default_known] == []
    port = mine["VLLM_PORT"]
    assert (port.type, port.default, port.file) == ("int | None", None, "vllm/envs.py")
    assert port.doc.startswith("used in distributed environment to manually set the communication port")
    assert mine["VLLM_TARGET_DEVICE"].doc == "Target device of vLLM, supporting [cuda (by default),\nrocm, cpu]"
    assert sum(1 for e in mine.values() if e.type is not None) >= typed
    assert sum(1 for e in mine.values() if e.doc) >= documented


def test_request_fields_with_the_defaults_of_msgspec_and_pydantic(model_0_33, release: str) -> None:
    oracle = json.loads((DATA / f"vllm-{release}-requests.json").read_text())["models"]
    for name, fields in oracle.items():
        mine = {f.name: f for f in model_0_33.request_fields if f.model == name}
        assert sorted(mine) == sorted(fields), name
        differ = [n for n, o in fields.items() if mine[n].required != o["required"] or not o["required"] and
                  (not mine[n].default_known or (mine[n].default, mine[n].default_exact) != (o["default"], o["exact"]))]
        # request_id's default is a fresh random id per request: its source is shown instead
        assert differ == ([] if name == "SamplingParams" else ["request_id"]), name
        if differ:
            assert not mine["request_id"].default_known
    temperature = model_0_33.request_field("SamplingParams", "temperature")
    assert temperature is not None and temperature.doc.startswith("Controls the randomness of the sampling.")
    seed = model_0_33.request_field("ChatCompletionRequest", "seed")
    assert seed is not None and dict(seed.constraints) == {"ge": -(2 ** 63), "le": 2 ** 63 - 1}
    messages = model_0_33.request_field("ChatCompletionRequest", "messages")
    assert messages is not None and messages.required


def test_config_json_keys_with_vllms_fallbacks(model_0_33) -> None:
    heads = model_0_33.config_key("num_attention_heads")
    assert heads is not None
    assert any(r.via == "hf_text_config" and r.default == 0 and r.function.endswith("get_total_num_attention_heads")
               for r in heads.reads)
    kv = model_0_33.config_key("num_key_value_heads")
    assert kv is not None
    (base,) = [r for r in kv.reads if r.function == "ModelArchConfigConvertorBase.get_total_num_kv_heads"]
    assert base.alternatives == ("n_head_kv", "num_kv_heads", "num_key_value_heads", "multi_query_group_num",
                                 "num_attention_groups")
    assert base.default == "self.get_total_num_attention_heads()"  # vLLM's default_factory, by what it names
    max_len = model_0_33.config_key("max_position_embeddings")
    assert max_len is not None
    (derived,) = [r for r in max_len.reads if r.function.endswith(".derive_max_model_len_and_key")]
    assert derived.alternatives[:3] == ("max_position_embeddings", "n_positions", "max_seq_len")
    assert derived.default is None and derived.has_default
    # Measured: 145 keys read at 522 places (197 of them in vllm/config/).
    assert len(model_0_33.config_keys) >= 140
    assert sum(len(k.reads) for k in model_0_33.config_keys) >= 500
    assert not [w for w in model_0_33.warnings if "not read" in w.message and "module" in w.message]
