"""The rest of the configuration model (kb.config) on small vLLM-shaped trees in tmp_path:
environment variables (vllm/envs.py), the config.json keys vLLM reads, the request fields;
`kb flags --env/--config-json/--request`; the model in the scan JSON and /api/config.json;
hostile source (bounded, located, never a traceback)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from fixture_tree import write_tree
from kb.cli import main
from kb.config.envs import comment_above
from kb.config.read import read_config
from kb.configmodel import ConfigModel
from kb.records.merge import attach_set_by
from kb.site.api import SiteInfo, config_api_files, config_schema
from test_flags import tree_of

SCHEMA = json.loads((Path(__file__).parent.parent / "kb/schemas/scan.schema.json").read_text())

ENVS = '''
import os
import tempfile
from typing import TYPE_CHECKING, Any, Callable, Literal

if TYPE_CHECKING:
    VLLM_HOST_IP: str = ""
    VLLM_PORT: int | None = None
    VLLM_LOGGING_LEVEL: str = "INFO"
    VLLM_ATTENTION_BACKEND: Literal["FLASH_ATTN", "XFORMERS"] | None = None
    VLLM_DISABLED_KERNELS: list[str] = []


def get_vllm_port() -> int | None:
    """The port from VLLM_PORT."""
    if "VLLM_PORT" not in os.environ:
        return None
    return int(os.environ["VLLM_PORT"])


def env_with_choices(env_name, default, choices, case_sensitive=True):
    def _get_validated_env():
        value = os.getenv(env_name)
        if value is None:
            return default
        return value

    return _get_validated_env


environment_variables: dict[str, Callable[[], Any]] = {
    # ================== Installation Time Env Vars ==================
    # Target device of vLLM, supporting [cuda (by default),
    # rocm, cpu]
    "VLLM_TARGET_DEVICE": lambda: os.getenv("VLLM_TARGET_DEVICE", "cuda").lower(),
    # ================== Runtime Env Vars ==================
    # used in distributed environment to determine the ip address
    # of the current node
    "VLLM_HOST_IP": lambda: os.getenv("VLLM_HOST_IP", ""),
    # used in distributed environment to manually set the communication port
    "VLLM_PORT": get_vllm_port,
    "VLLM_SERVER_DEV_MODE": lambda: bool(int(os.getenv("VLLM_SERVER_DEV_MODE", "0"))),

    # Logging level
    "VLLM_LOGGING_LEVEL": lambda: os.getenv("VLLM_LOGGING_LEVEL", "INFO").upper(),
    # The backend of attention
    "VLLM_ATTENTION_BACKEND": env_with_choices("VLLM_ATTENTION_BACKEND", None, ["FLASH_ATTN", "XFORMERS"]),
    "VLLM_DISABLED_KERNELS": lambda: []
    if "VLLM_DISABLED_KERNELS" not in os.environ
    else os.environ["VLLM_DISABLED_KERNELS"].split(","),
    # where to put temporary files: the run time decides
    "VLLM_RPC_BASE_PATH": lambda: os.getenv("VLLM_RPC_BASE_PATH", tempfile.gettempdir()),
    "VLLM_PORT": lambda: 1,
}


def __getattr__(name: str):
    return environment_variables[name]()
'''

HF_UTILS = '''
CONFIG_FIELD_ALIASES: dict[str, tuple[str, ...]] = {
    "total_num_kv_heads": ("n_head_kv", "num_kv_heads", "num_key_value_heads"),
}


def getattr_iter(object, names, default=None, default_factory=None):
    for name in names:
        if hasattr(object, name):
            return getattr(object, name)
    return default_factory() if default_factory is not None else default
'''

CONVERTOR = '''
from vllm.transformers_utils.config import CONFIG_FIELD_ALIASES, getattr_iter


class Convertor:
    def __init__(self, hf_config, hf_text_config):
        self.hf_config = hf_config
        self.hf_text_config = hf_text_config

    def get_total_num_attention_heads(self) -> int:
        return getattr(self.hf_text_config, "num_attention_heads", 0)

    def get_total_num_kv_heads(self) -> int:
        names = CONFIG_FIELD_ALIASES["total_num_kv_heads"]
        default_factory = self.get_total_num_attention_heads
        return getattr_iter(self.hf_text_config, names, default_factory=default_factory)

    def derive_max_model_len(self) -> float:
        possible_keys = ["max_position_embeddings", "n_positions"]
        derived = float("inf")
        for key in possible_keys:
            max_len = getattr(self.hf_text_config, key, None)
            if max_len is not None:
                derived = min(derived, max_len)
        return derived
'''

MODEL_KEYS = '''
from vllm.config.utils import config


@config
class ModelConfig:
    model: str = "Qwen/Qwen3-0.6B"

    def verify(self, parallel_config) -> None:
        heads = self.hf_text_config.num_attention_heads
        if heads % parallel_config.tensor_parallel_size != 0:
            raise ValueError("heads must divide")
        if hasattr(self.hf_config, "dual_chunk_attention_config"):
            pass
        cfg = self.hf_text_config
        window = getattr(cfg, "sliding_window", None) or getattr(cfg, "attention_window", 4096)
        dtype = getattr(self.hf_config.vision_config, "dtype", None)
        kv = getattr(self.hf_text_config, "num_key_value_heads", getattr(self.hf_text_config, "n_head_kv", 1))
        self.hf_config.written_not_read = 1
        text = self.hf_config.get_text_config()
        return heads, window, dtype, kv, text
'''

SAMPLING = '''
from enum import Enum

import msgspec
from pydantic import Field


class RequestOutputKind(Enum):
    CUMULATIVE = 0
    DELTA = 1


class SamplingParams(msgspec.Struct, omit_defaults=True):
    """Sampling parameters for text generation."""

    n: int = 1
    """Number of outputs to return for the given prompt request."""
    temperature: float = 1.0
    """Controls the randomness of the sampling.
    Zero means greedy sampling."""
    stop: str | list[str] | None = None
    output_kind: RequestOutputKind = RequestOutputKind.CUMULATIVE
    _all_stop_token_ids: set[int] = msgspec.field(default_factory=set)
'''

PROTOCOL_BASE = '''
from pydantic import BaseModel, ConfigDict, Field


class OpenAIBaseModel(BaseModel):
    model_config = ConfigDict(extra="allow")
    request_id: str = Field(default="x", description="The request id.")
'''

CHAT_PROTOCOL = '''
from typing import Annotated, ClassVar, Literal

from pydantic import Field

from vllm.entrypoints.openai.base import OpenAIBaseModel

_INT64_MAX = 2**63 - 1


class ChatCompletionRequest(OpenAIBaseModel):
    kind: ClassVar[str] = "chat"
    messages: list[dict]
    model: str | None = None
    n: int | None = 1
    seed: int | None = Field(None, ge=-(2**63), le=_INT64_MAX)
    stop: list[str] = []
    bad_words: list[str] = Field(default_factory=list)
    truncate_prompt_tokens: Annotated[int, Field(ge=-1)] | None = None
    tool_choice: Literal["none", "auto"] | None = "none"
    echo: bool = Field(default=False, description=("If true, the new message will be "
                                                   "prepended with the last message."))
    request_id: str = Field(default="chat", description="The chat request id.")
'''

COMPLETION_PROTOCOL = '''
from vllm.entrypoints.openai.base import OpenAIBaseModel


class CompletionRequest(OpenAIBaseModel):
    prompt: list[int] | str
    max_tokens: int | None = 16
'''


def inputs_tree(root: Path, extra: dict[str, str] | None = None) -> Path:
    return tree_of(root, {
        "vllm/envs.py": ENVS,
        "vllm/transformers_utils/__init__.py": "",
        "vllm/transformers_utils/config.py": HF_UTILS,
        "vllm/transformers_utils/model_arch_config_convertor.py": CONVERTOR,
        "vllm/config/model.py": MODEL_KEYS,
        "vllm/sampling_params.py": SAMPLING,
        "vllm/entrypoints/openai/base.py": PROTOCOL_BASE,
        "vllm/entrypoints/openai/chat_completion/__init__.py": "",
        "vllm/entrypoints/openai/chat_completion/protocol.py": CHAT_PROTOCOL,
        "vllm/entrypoints/openai/completion/__init__.py": "",
        "vllm/entrypoints/openai/completion/protocol.py": COMPLETION_PROTOCOL,
        **(extra or {}),
    })


def model_of(root: Path) -> ConfigModel:
    paths = sorted(p.relative_to(root).as_posix() for p in (root / "vllm").rglob("*.py"))
    return read_config(paths, lambda p: (root / p).read_bytes())


@pytest.fixture
def model(tmp_path: Path) -> ConfigModel:
    return model_of(inputs_tree(tmp_path / "tree"))


# --- environment variables -------------------------------------------------------------------------
def test_every_entry_of_the_table_with_its_getters_default_type_and_doc(model: ConfigModel) -> None:
    names = [e.name for e in model.env]
    assert names == sorted({"VLLM_TARGET_DEVICE", "VLLM_HOST_IP", "VLLM_PORT", "VLLM_SERVER_DEV_MODE",
                            "VLLM_LOGGING_LEVEL", "VLLM_ATTENTION_BACKEND", "VLLM_DISABLED_KERNELS",
                            "VLLM_RPC_BASE_PATH"})
    target = model.env_var("VLLM_TARGET_DEVICE")
    assert target is not None
    assert (target.default, target.default_exact, target.default_known, target.type) == ("cuda", True, True, None)
    assert target.doc == "Target device of vLLM, supporting [cuda (by default),\nrocm, cpu]"
    assert (target.file, target.line) == ("vllm/envs.py", 34)
    host = model.env_var("VLLM_HOST_IP")
    assert host is not None and (host.default, host.type) == ("", "str")
    assert host.doc == "used in distributed environment to determine the ip address\nof the current node"
    port = model.env_var("VLLM_PORT")
    assert port is not None and port.type == "int | None"
    dev = model.env_var("VLLM_SERVER_DEV_MODE")
    assert dev is not None and (dev.default, dev.doc, dev.type) == (False, "", None)
    level = model.env_var("VLLM_LOGGING_LEVEL")
    assert level is not None and (level.default, level.doc) == ("INFO", "Logging level")
    backend = model.env_var("VLLM_ATTENTION_BACKEND")
    assert backend is not None and backend.default is None and backend.default_known
    assert backend.type == "Literal['FLASH_ATTN', 'XFORMERS'] | None"
    kernels = model.env_var("VLLM_DISABLED_KERNELS")  # `"X" in os.environ` is False in an empty environment
    assert kernels is not None and (kernels.default, kernels.default_exact) == ([], True)


def test_a_key_given_twice_keeps_its_last_getter_as_a_dict_does(model: ConfigModel) -> None:
    port = model.env_var("VLLM_PORT")
    assert port is not None and (port.default, port.default_known) == (1, True)
    assert port.doc == ""


def test_a_default_the_run_time_decides_is_its_source_not_a_guess(model: ConfigModel) -> None:
    base = model.env_var("VLLM_RPC_BASE_PATH")
    assert base is not None and not base.default_known and not base.default_exact
    assert base.default == "lambda: os.getenv('VLLM_RPC_BASE_PATH', tempfile.gettempdir())"
    assert base.doc == "where to put temporary files: the run time decides"


def test_comment_above_stops_at_code_and_drops_section_headings() -> None:
    lines = ["x = 1", "# ===== Heading =====", "# first", "#second", "  # third  ", '"K": 1']
    assert comment_above(lines, 6) == "first\nsecond\nthird"
    assert comment_above(lines, 1) == ""
    assert comment_above(["# only"], 2) == "only"


def test_a_tree_without_envs_or_table_has_no_env_and_says_why(tmp_path: Path) -> None:
    assert model_of(inputs_tree(tmp_path / "a", {"vllm/envs.py": "X = 1\n"})).env == ()
    m = model_of(inputs_tree(tmp_path / "b", {"vllm/envs.py": "X = 1\n"}))
    assert any(w.path == "vllm/envs.py" and "no `environment_variables` table" in w.message for w in m.warnings)


# --- config.json keys --------------------------------------------------------------------------------
def reads(model: ConfigModel, key: str) -> list[tuple[str, object, bool, tuple[str, ...], str, int]]:
    found = model.config_key(key)
    assert found is not None, f"{key} not in {[k.key for k in model.config_keys]}"
    return [(r.via, r.default, r.has_default, r.alternatives, r.function, r.line) for r in found.reads]


def test_attribute_getattr_and_hasattr_reads_with_their_defaults(model: ConfigModel) -> None:
    assert reads(model, "num_attention_heads") == [
        ("hf_text_config", None, False, ("num_attention_heads",), "ModelConfig.verify", 9),
        ("hf_text_config", 0, True, ("num_attention_heads",), "Convertor.get_total_num_attention_heads", 10),
    ]
    assert reads(model, "dual_chunk_attention_config") == [
        ("hf_config", False, True, ("dual_chunk_attention_config",), "ModelConfig.verify", 12)]
    assert reads(model, "vision_config.dtype") == [
        ("hf_config", None, True, ("vision_config.dtype",), "ModelConfig.verify", 16)]


def test_fallbacks_in_vllms_order(model: ConfigModel) -> None:
    kv = ("n_head_kv", "num_kv_heads", "num_key_value_heads")
    assert reads(model, "num_kv_heads") == [
        ("hf_text_config", "self.get_total_num_attention_heads()", True, kv, "Convertor.get_total_num_kv_heads", 15)]
    loop = ("max_position_embeddings", "n_positions")
    assert reads(model, "n_positions") == [("hf_text_config", None, True, loop, "Convertor.derive_max_model_len", 21)]
    # `getattr(cfg, "x", None) or getattr(cfg, "y", 4096)` through a local alias of the config object
    assert reads(model, "sliding_window") == [
        ("hf_text_config", None, True, ("sliding_window", "attention_window"), "ModelConfig.verify", 15)]
    assert reads(model, "attention_window")[0][1:4] == (4096, True, ("sliding_window", "attention_window"))
    # a getattr whose default is a getattr: both keys, then the last default
    nested = ("num_key_value_heads", "n_head_kv")
    assert [r[1:4] for r in reads(model, "num_key_value_heads") if r[4] == "ModelConfig.verify"] == [
        (1, True, nested)]
    assert [r[1:4] for r in reads(model, "n_head_kv") if r[4] == "ModelConfig.verify"] == [(1, True, nested)]


def test_the_keys_a_function_reads(model: ConfigModel) -> None:
    assert model.keys_read_in("get_total_num_kv_heads") == ("n_head_kv", "num_key_value_heads", "num_kv_heads")
    assert model.keys_read_in("Convertor.get_total_num_attention_heads") == ("num_attention_heads",)
    assert model.keys_read_in("erify") == ()  # a whole name, not a suffix of one
    assert model.keys_read_in("verify") == model.keys_read_in("ModelConfig.verify")
    assert "dual_chunk_attention_config" in model.keys_read_in("verify")


def test_writes_method_calls_and_the_objects_themselves_are_not_keys(model: ConfigModel) -> None:
    keys = {k.key for k in model.config_keys}
    assert not keys & {"written_not_read", "get_text_config", "hf_config", "hf_text_config", ""}
    assert keys == {"num_attention_heads", "dual_chunk_attention_config", "sliding_window", "attention_window",
                    "vision_config", "vision_config.dtype", "num_key_value_heads", "n_head_kv", "num_kv_heads",
                    "max_position_embeddings", "n_positions"}
    # `getattr(self.hf_config.vision_config, "dtype", None)` needs vision_config itself: a read without default
    assert reads(model, "vision_config") == [("hf_config", None, False, ("vision_config",), "ModelConfig.verify", 16)]


# --- request fields --------------------------------------------------------------------------------
def fields(model: ConfigModel, name: str) -> dict[str, tuple[object, ...]]:
    return {f.name: (f.type, f.default, f.default_exact, f.required, dict(f.constraints), f.doc)
            for f in model.request_fields if f.model == name}


def test_sampling_params_fields_with_defaults_and_docs_private_ones_left_out(model: ConfigModel) -> None:
    assert fields(model, "SamplingParams") == {
        "n": ("int", 1, True, False, {}, "Number of outputs to return for the given prompt request."),
        "temperature": ("float", 1.0, True, False, {}, "Controls the randomness of the sampling.\n"
                                                       "Zero means greedy sampling."),
        "stop": ("str | list[str] | None", None, True, False, {}, ""),
        "output_kind": ("RequestOutputKind", "<RequestOutputKind.CUMULATIVE: 0>", False, False, {}, ""),
    }


def test_openai_request_models_in_pydantic_order_with_constraints(model: ConfigModel) -> None:
    chat = fields(model, "ChatCompletionRequest")
    assert list(chat) == ["request_id", "messages", "model", "n", "seed", "stop", "bad_words",
                          "truncate_prompt_tokens", "tool_choice", "echo"]
    assert chat["request_id"] == ("str", "chat", True, False, {}, "The chat request id.")  # overridden in place
    assert chat["messages"] == ("list[dict]", None, True, True, {}, "")
    assert chat["seed"] == ("int | None", None, True, False, {"ge": -(2 ** 63), "le": 2 ** 63 - 1}, "")
    assert chat["bad_words"][1:4] == ([], True, False)
    assert chat["truncate_prompt_tokens"][4] == {"ge": -1}
    assert chat["tool_choice"][1] == "none"
    assert chat["echo"][1] is False and chat["echo"][5] == "If true, the new message will be prepended with the " \
                                                          "last message."
    completion = fields(model, "CompletionRequest")
    assert list(completion) == ["request_id", "prompt", "max_tokens"]
    assert completion["request_id"][1] == "x" and completion["prompt"][3] is True
    m = next(f for f in model.request_fields if f.model == "CompletionRequest" and f.name == "max_tokens")
    assert (m.file, m.line) == ("vllm/entrypoints/openai/completion/protocol.py", 6)


def test_no_request_models_in_the_tree_is_no_fields(tmp_path: Path) -> None:
    assert model_of(tree_of(tmp_path / "tree")).request_fields == ()


# --- the CLI, the scan JSON, the site API ---------------------------------------------------------------
def test_kb_flags_views(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = inputs_tree(tmp_path / "tree")
    assert main(["flags", "--source", str(root), "--env"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("vLLM 0.1.0: 8 environment variables, read from vllm/envs.py\n")
    assert "\n  VLLM_HOST_IP\n      default: \"\"\n      type: str\n      used in distributed environment to " \
           "determine the ip address of the current node\n" in out
    assert "\n  VLLM_RPC_BASE_PATH\n      default: not read (lambda: os.getenv(" in out
    assert main(["flags", "--source", str(root), "--config-json"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("vLLM 0.1.0: 11 config.json keys read by vLLM\n")
    assert ("\n  num_kv_heads\n      hf_text_config; vllm/transformers_utils/model_arch_config_convertor.py:15 "
            "Convertor.get_total_num_kv_heads; tried with: n_head_kv, num_kv_heads, num_key_value_heads; "
            "default: \"self.get_total_num_attention_heads()\"\n") in out
    assert "vllm/config/model.py:9 ModelConfig.verify; required\n" in out
    assert main(["flags", "--source", str(root), "--request"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("vLLM 0.1.0: 17 request fields of SamplingParams, ChatCompletionRequest, "
                          "CompletionRequest\n")
    assert "\n  seed\n      type: int | None\n      default: null\n      constraints: ge=-9223372036854775808, " \
           "le=9223372036854775807\n" in out
    assert "\n  messages\n      type: list[dict]\n      required\n" in out


def test_views_are_exclusive_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["flags", "--source", str(tmp_path), "--env", "--request"])
    assert e.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_scan_json_and_flags_json_carry_the_inputs_and_validate(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    root = inputs_tree(tmp_path / "tree", {"vllm/config/model.py": MODEL_KEYS + "\n\ndef check(x):\n"
                                                                               "    if x < 0:\n"
                                                                               "        raise ValueError('bad')\n"})
    assert main(["scan", "--source", str(root), "--no-cache", "--quiet"]) == 0
    doc = json.loads(capsys.readouterr().out)
    jsonschema.validate(doc, SCHEMA)
    counts = doc["config"]["counts"]
    assert (counts["env"], counts["config_keys"], counts["request_fields"]) == (8, 11, 17)
    assert {e["name"] for e in doc["config"]["env"]} >= {"VLLM_HOST_IP", "VLLM_PORT"}
    assert main(["flags", "--source", str(root), "--json", "--env"]) == 0  # --json: the whole model
    flags_doc = json.loads(capsys.readouterr().out)
    assert flags_doc["env"] == doc["config"]["env"] and flags_doc["request_fields"] == doc["config"]["request_fields"]


def test_api_config_json_validates_against_its_schema_and_is_deterministic(tmp_path: Path) -> None:
    from kb.model import TreeInfo

    model = model_of(inputs_tree(tmp_path / "tree"))
    info = SiteInfo(TreeInfo(kind="source", location="x", ref="v0.1.0", commit="c0ffee", commit_date=None,
                             release="0.1.0", dirty=False))
    files = dict(config_api_files(model, info))
    assert sorted(files) == ["api/config.json", "api/config.schema.json"]
    doc = json.loads(files["api/config.json"])
    schema = json.loads(files["api/config.schema.json"])
    assert schema == config_schema()
    jsonschema.validate(doc, schema)
    assert (doc["format"], doc["release"], doc["commit"]) == ("kb-config-api/1", "0.1.0", "c0ffee")
    assert doc["config"]["counts"]["env"] == 8 and len(doc["config"]["flags"]) == len(model.flags)
    again = dict(config_api_files(model_of(inputs_tree(tmp_path / "again")), info))
    assert again == files
    assert list(config_api_files(None, info)) == []
    bad = json.loads(files["api/config.json"])
    bad["config"]["env"][0]["line"] = 0
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)


# --- hostile source: bounded, located, never run, never a traceback ------------------------------------
def kb_flags(root: Path, view: str) -> subprocess.CompletedProcess[str]:
    """`kb flags VIEW` in a process of its own, given 60 s."""
    return subprocess.run([sys.executable, "-m", "kb", "flags", "--source", str(root), view], capture_output=True,
                          text=True, timeout=60, cwd=root)


HOSTILE_ENVS = '''
import os

def spin():
    while True:
        pass

def forever():
    return forever()

def must_be_set():
    raise ValueError("VLLM_RAISE must be set")

def choice():
    value = os.getenv("VLLM_CHOICE")
    if value is None:
        return "a"
    raise ValueError(value)

def busy():
    for i in [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]:
        for j in [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]:
            for k in [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]:
                for m in [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]:
                    for n in [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]:
                        x = i + j + k + m + n
    return 1

environment_variables = {
    "VLLM_SPIN": spin,
    "VLLM_FOREVER": forever,
    "VLLM_RAISE": must_be_set,
    "VLLM_CHOICE": choice,
    "VLLM_BUSY": busy,
    "VLLM_RUN": lambda: os.system("touch pwned") or eval("1 + 1"),
    "VLLM_BIG": lambda: 9 ** 9 ** 9,
    "VLLM_LONG": lambda: ''' + " + ".join(["1"] * 500) + ''',
    "VLLM_AFTER": lambda: os.getenv("VLLM_AFTER", "ok"),
}
'''

HOSTILE_KEYS = '''
class C:
    def f(self):
        x = getattr(self.hf_config, "a", ''' + "getattr(self.hf_config, 'b', " * 60 + "0" + ")" * 60 + ''')
        for k in ["k%d" % i for i in range(10 ** 9)]:
            getattr(self.hf_config, k)
        return self.hf_config.''' + ".".join(["deep"] * 50) + '''
'''

HOSTILE_REQUEST = '''
class SamplingParams:
''' + "".join(f"    f{i}: int = {i} ** {i} ** {i}\n" for i in range(3000)) + '''
'''


def test_hostile_envs_end_in_bounded_time_located_and_nothing_runs(tmp_path: Path) -> None:
    root = inputs_tree(tmp_path / "tree", {"vllm/envs.py": HOSTILE_ENVS})
    result = kb_flags(root, "--env")
    assert "Traceback" not in result.stderr and result.returncode == 0, result.stderr
    assert not (root / "pwned").exists()
    assert "\n  VLLM_RUN\n      default: not read (lambda: os.system('touch pwned') or eval('1 + 1'))\n" \
        in result.stdout
    assert "\n  VLLM_BIG\n      default: not read (lambda: 9 ** 9 ** 9)\n" in result.stdout
    assert "\n  VLLM_LONG\n      default: not read (" in result.stdout
    # a getter that never ends has a budget of its own: the others are still read
    assert "\n  VLLM_SPIN\n      default: not read (spin)\n" in result.stdout  # a `while` is not followed
    assert "\n  VLLM_RAISE\n      default: not read (must_be_set)\n" in result.stdout  # nor a `raise`
    assert "\n  VLLM_CHOICE\n      default: \"a\"\n" in result.stdout  # a `raise` not reached is no matter
    assert "warning: vllm/envs.py:33: VLLM_BUSY: default not read: more than 50000 steps\n" in result.stderr
    assert "\n  VLLM_BUSY\n      default: not read (busy)\n" in result.stdout
    assert "\n  VLLM_FOREVER\n      default: not read (" in result.stdout
    assert "\n  VLLM_AFTER\n      default: \"ok\"\n" in result.stdout


def test_hostile_config_key_reads_and_request_classes_are_bounded(tmp_path: Path) -> None:
    root = inputs_tree(tmp_path / "tree", {"vllm/config/hostile.py": HOSTILE_KEYS,
                                           "vllm/sampling_params.py": HOSTILE_REQUEST})
    keys = kb_flags(root, "--config-json")
    assert "Traceback" not in keys.stderr and keys.returncode == 0, keys.stderr
    assert "\n  a\n      hf_config; vllm/config/hostile.py:3 C.f; tried with: a, b" in keys.stdout
    assert "\n  deep" not in keys.stdout  # deeper than MAX_PATH below the config object: not a key
    requests = kb_flags(root, "--request")
    assert "Traceback" not in requests.stderr and requests.returncode == 0, requests.stderr
    assert "\n  f1999\n      type: int\n      default: not read (1999 ** 1999 ** 1999)\n" in requests.stdout
    assert "\n  f2000\n" not in requests.stdout
    assert "warning: vllm/sampling_params.py:2002: SamplingParams: more than 2000 fields, the rest not read\n" \
        in requests.stderr


def test_the_site_build_writes_api_config_json_byte_identical_twice(tmp_path: Path) -> None:
    from dataclasses import replace

    from kb.records.merge import build_records
    from kb.scan.scanner import scan
    from kb.scan.source import from_dir
    from kb.site.build import BuildOptions, build_site

    root = inputs_tree(tmp_path / "tree")
    with from_dir(root, include_vendored=False) as t:
        result = replace(scan(t, jobs=1), config=model_of(root))
    outs = []
    for name in ("a", "b"):
        out = tmp_path / name
        build_site(result, BuildOptions(out, jobs=1), attach_set_by(build_records(result), result.config))
        outs.append(((out / "api/config.json").read_bytes(), (out / "api/config.schema.json").read_bytes()))
    assert outs[0] == outs[1]
    doc = json.loads(outs[0][0])
    jsonschema.validate(doc, json.loads(outs[0][1]))
    assert doc["release"] == "0.1.0" and doc["config"]["counts"]["request_fields"] == 17
    assert "/api/config.json" in (tmp_path / "a/api/index.html").read_text()


def test_keys_read_where_guards_are_outside_the_per_model_code(tmp_path: Path) -> None:
    guard = '''
def check(vllm_config):
    text = vllm_config.model_config.hf_text_config
    layers = getattr(text, "num_hidden_layers", 1)
    if layers % vllm_config.parallel_config.pipeline_parallel_size:
        raise ValueError("layers must divide")
'''
    per_model = '''
def load(hf_config):
    return hf_config.only_this_model_reads_it
'''
    m = model_of(inputs_tree(tmp_path / "tree", {"vllm/v1/worker/check.py": guard,
                                                 "vllm/model_executor/models/llama.py": per_model,
                                                 "vllm/v1/worker/unrelated.py": "def f(x):\n    return x.hidden\n"}))
    assert reads(m, "num_hidden_layers") == [("hf_text_config", 1, True, ("num_hidden_layers",), "check", 3)]
    assert m.config_key("only_this_model_reads_it") is None and m.config_key("hidden") is None


def test_the_model_of_a_wheel_is_read_once_and_a_damaged_cache_is_read_again(tmp_path: Path) -> None:
    """kb.config.store: the model round-trips through its JSON; a wheel's is kept under a key of
    its members; a damaged cached file is replaced, never trusted."""
    from kb.config.store import config_of
    from kb.configmodel import ConfigModel

    calls: list[str] = []
    files = {"vllm/__init__.py": b"", "vllm/envs.py": b'environment_variables = {"VLLM_X": lambda: "1"}\n'}

    def read(p: str) -> bytes:
        calls.append(p)
        return files[p]

    stamp = {p: f"crc:{len(d)}" for p, d in files.items()}.__getitem__
    folder = tmp_path / "config"
    first = config_of(sorted(files), read, stamp, folder)
    assert ConfigModel.from_json(first.to_json()) == first
    n = len(calls)
    assert config_of(sorted(files), read, stamp, folder) == first and len(calls) == n  # from the cache
    (cached,) = folder.iterdir()
    cached.write_text('{"format": "kb-config/1", "flags": [{"name": 1}]}')
    assert config_of(sorted(files), read, stamp, folder) == first and len(calls) > n  # read again
    assert ConfigModel.from_json(json.loads(cached.read_text())) == first
    assert config_of(sorted(files), read, None, folder) == first  # no stamps: no cache
