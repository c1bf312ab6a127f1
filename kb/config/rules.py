"""The rules that say what a name a guard reads is, as users know it: a flag of the scanned
`vllm serve`, a config.json key, an environment variable, a request field, the hardware, one of
vLLM's constants. Each rule answers or passes (`Rule`); kb/config/resolve.py asks them in order."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from typing import Optional, Protocol

from kb.configmodel import ConfigModel, Flag, RequestField
from kb.model import Caller
from kb.setby import (
    CHECKPOINT,
    CONFIG_JSON,
    ENV,
    FLAG,
    HARDWARE,
    INTERNAL,
    REQUEST_FIELD,
    Input,
)

# ModelArchitectureConfig / ModelConfig accessors -> the config.json key they read (vLLM's
# `vllm/config/model_arch.py` and `ModelConfig.get_*`; `hf_config` attributes are keys as named).
ARCH_KEYS = {
    "total_num_attention_heads": "num_attention_heads", "get_num_attention_heads": "num_attention_heads",
    "total_num_kv_heads": "num_key_value_heads", "get_total_num_kv_heads": "num_key_value_heads",
    "get_num_kv_heads": "num_key_value_heads", "hidden_size": "hidden_size", "get_hidden_size": "hidden_size",
    "vocab_size": "vocab_size", "get_vocab_size": "vocab_size", "head_size": "head_dim", "get_head_size": "head_dim",
    "num_hidden_layers": "num_hidden_layers", "get_num_layers": "num_hidden_layers",
    "total_num_hidden_layers": "num_hidden_layers", "architectures": "architectures",
    "max_position_embeddings": "max_position_embeddings", "num_experts": "num_experts",
    "get_num_experts": "num_experts", "quantization_config": "quantization_config",
}
# ModelConfig attributes vLLM derives from the checkpoint (config.json and the architecture).
CHECKPOINT_FIELDS = frozenset({"use_mla", "is_multimodal_model", "is_hybrid", "is_attention_free", "has_noops",
                               "is_encoder_decoder", "is_deepseek_mla", "uses_mrope", "is_cross_encoder",
                               "registry", "model_arch_config", "hf_config", "hf_text_config", "architecture",
                               "is_moe", "multimodal_config", "is_matryoshka", "attention_chunk_size"})
_HF = ("hf_config", "hf_text_config", "text_config", "hf_image_processor_config")
_HARDWARE_ROOTS = frozenset({"current_platform", "torch", "platform", "cuda", "device", "psutil"})
_HARDWARE_WORDS = re.compile(r"(memory|device|capability|gpu|cuda|rocm|tpu|xpu|cpu_count|world_size|rank|nccl|"
                             r"platform|bytes_free|mem_|torch_version|is_torch_equal|flash_attn_version|"
                             r"has_triton|_available|is_installed|find_spec)", re.I)


@dataclass(frozen=True)
class Scope:
    """Where a reference is read: the class and function of the raise, its recorded locals."""

    file: str
    owner: str  # the class of the enclosing method, else ""
    function: str
    locals: dict[str, str] = field(default_factory=dict)
    validated: dict[str, str] = field(default_factory=dict)  # a field_validator's parameter -> the field
    callers: tuple[Caller, ...] = ()  # same-file calls of the function, with what they pass
    memo: dict[tuple[tuple[str, ...], str, int], list[Input]] = field(default_factory=dict, compare=False, repr=False)
    caller_scopes: dict[int, Scope] = field(default_factory=dict, compare=False, repr=False)

    @property
    def params(self) -> frozenset[str]:
        """The parameters whose arguments the recorded calls show."""
        return frozenset(a.param for c in self.callers for a in c.args)

    def of_caller(self, c: Caller) -> Scope:
        """Where a call of this function is: the caller's class, function and assignments."""
        if id(c) not in self.caller_scopes:
            qual = c.qualname.split(".")
            owner = qual[-2] if len(qual) > 1 and qual[-2][:1].isupper() else ""
            self.caller_scopes[id(c)] = Scope(self.file, owner, qual[-1], {d.name: d.source for d in c.locals},
                                              callers=c.callers)
        return self.caller_scopes[id(c)]


class Rule(Protocol):
    """Resolves a reference (its dotted parts, `name()` for a call) or says None: not mine."""

    def __call__(self, parts: tuple[str, ...], text: str, scope: Scope) -> Optional[Input]: ...


def show_default(f: Flag | RequestField) -> str:
    """A default as vLLM's --help shows it: JSON when exact, else the repr vLLM prints."""
    if not f.default_exact:
        return str(f.default)
    return json.dumps(f.default, ensure_ascii=False, sort_keys=True)


def flag_input(f: Flag, text: str, via: str) -> Input:
    return Input(FLAG, f.name, text, via, show_default(f),
                 None if f.choices is None else tuple(c if isinstance(c, str) else json.dumps(c) for c in f.choices),
                 f.help, f"flags/{flag_slug(f)}/")


def flag_slug(f: Flag) -> str:
    """`--tensor-parallel-size` -> `tensor-parallel-size`: one safe path segment, whatever the source."""
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", f.name.lstrip("-") or f.dest)[:100].strip("-")
    return slug or "flag"


def page_slug(name: str) -> str:
    """An environment variable or config.json key -> one safe path segment, whatever the source."""
    slug = re.sub(r"\.{2,}", ".", re.sub(r"[^A-Za-z0-9_.-]+", "-", name))[:100].strip("-.")
    return slug + "-" if re.fullmatch(r"page-\d+", slug) else slug or "key"  # page-2/ is an index's


def input_page(envs: frozenset[str], keys: frozenset[str], i: Input) -> Input:
    """The input with the page of its environment variable or config.json key, when the tree has one
    (`envs`, `keys`: the names the tree's config model holds)."""
    if i.flag_page:
        return i
    if i.kind == ENV and i.key in envs:
        return replace(i, flag_page=f"env/{page_slug(i.key)}/")
    if i.kind == CONFIG_JSON and i.key in keys:
        return replace(i, flag_page=f"config-json/{page_slug(i.key)}/")
    return i


class FlagRule:
    """Fields of config classes that `vllm serve` flags set; the flags of `EngineArgs` by dest; the
    keys of JSON-valued flags (`--kv-transfer-config`) as the fields of the class they parse into.
    Classes are matched by name without case and underscores (`parallel_config` ~ ParallelConfig)."""

    def __init__(self, model: Optional[ConfigModel]) -> None:
        flags = model.flags if model is not None else ()
        self.by_field = {(_squash(f.config_class), f.config_field): f for f in flags
                         if f.config_class and f.config_field}
        self.by_dest: dict[str, Flag] = {}
        for f in flags:
            self.by_dest.setdefault(f.dest, f)
        self.names = {_squash(f.config_class): f.config_class for f in flags if f.config_class}
        self.json = {_squash(f.dest): f for f in flags if f.dest.endswith("_config") and f.action == "store"}
        for f in flags:  # the class a JSON value parses into (`--quantization-config` -> QuantizationConfigArgs)
            if f.parses_into and f.action == "store":
                self.json.setdefault(_squash(f.parses_into), f)

    def owner_of(self, name: str, scope: Scope) -> Optional[str]:
        if name in ("self", "cls"):
            return _squash(scope.owner) if scope.owner else None
        if name in ("args", "engine_args", "parsed_args"):
            return "engineargs"
        return self.owner_key(name) if name.endswith("_config") else None

    def owner_key(self, name: str) -> str:
        """`parallel_config` -> "parallelconfig"; `draft_model_config` -> "modelconfig" (the
        longest known class its name ends with)."""
        key = _squash(name)
        if key in self.names or key in self.json:
            return key
        return max((k for k in (*self.names, *self.json) if key.endswith(k)), key=len, default=key)

    def __call__(self, parts: tuple[str, ...], text: str, scope: Scope) -> Optional[Input]:
        owner = self.owner_of(parts[0], scope)
        rest = list(parts[1:])
        if parts[0] in scope.validated and scope.owner and parts[0] not in scope.locals:  # a validator's value
            every = self.json.get(_squash(scope.owner)) if not scope.validated[parts[0]] else None
            if every is not None:  # a model validator's input: the keys given to a JSON-valued flag
                return flag_input(every, text, f"the keys given to {every.name}, which a model validator of "
                                  f"{scope.owner} reads")
            if (_squash(scope.owner), scope.validated[parts[0]]) not in self.by_field and \
                    _squash(scope.owner) not in self.json:
                return None
            owner, rest = _squash(scope.owner), [scope.validated[parts[0]]]
        written = parts[0]
        while owner is not None and len(rest) > 1 and rest[0].endswith("_config"):
            owner = self.owner_key(rest[0])  # self.parallel_config.x, vllm_config.model_config.x
            written, rest = rest[0], rest[1:]
        if owner is None:
            return None
        if not rest:
            if parts[0].endswith("_config") and (owner in self.names or owner in self.json):
                return Input(INTERNAL, text, text, "the config object vLLM passes along, not a value "
                             "users set")
            return None
        name = rest[0]
        shown = self.names.get(owner) or (scope.owner if _squash(scope.owner) == owner else written)
        f = self.by_field.get((owner, name))
        if f is None and owner.endswith("args"):
            f = self.by_dest.get(name)
        if f is not None:
            return flag_input(f, text, f"the field {shown}.{name}, which {f.name} sets")
        j = self.json.get(owner)
        if j is not None and name.endswith("()"):
            return flag_input(j, text, f"{shown}.{name}, which vLLM computes from the keys of {j.name} (a JSON value)")
        if owner == "modelconfig" and name.endswith("()"):
            return Input(CHECKPOINT, f"{shown}.{name}", text, f"{shown}.{name}, which vLLM computes from the model "
                         "and its config.json")
        if owner in self.names and name.endswith("()"):
            return Input(INTERNAL, f"{shown}.{name}", text, f"{shown}.{name}, a method vLLM computes from the "
                         "config's fields")
        if owner == "engineargs" and re.fullmatch(r"create_\w+_config\(\)", name):
            built = self.by_dest.get(name.removeprefix("create_").removesuffix("()"))
            if built is not None:  # `self.create_speculative_config(...)`: built from --speculative-config
                return flag_input(built, text, f"EngineArgs.{name}, which builds the config from {built.name}")
            return Input(INTERNAL, f"EngineArgs.{name}", text, f"EngineArgs.{name}: the config object vLLM builds "
                         "from the flags and passes along; the checks read its fields")
        if j is not None and not name.startswith("_"):
            return replace(flag_input(j, text, f"the field {shown}.{name}: the key {name} of {j.name} (a JSON value)"),
                           key=f"{j.name}.{name}")
        if owner in self.names and name in CHECKPOINT_FIELDS:
            return Input(CHECKPOINT, f"{shown}.{name}", text, f"{shown}.{name}, which vLLM derives from the model "
                         "checkpoint (config.json and its architecture)")
        if (owner in self.names or owner in self.json) and not name.endswith("()"):
            return Input(INTERNAL, f"{shown}.{name}", text, f"the field {shown}.{name}, which no `vllm serve` flag "
                         "sets: internal, not set by users")
        return None


class NameRule:
    """A bare name that is not a local (a parameter, mostly) named exactly as a flag's field:
    vLLM passes `max_model_len` on by that name. Matched by name, and the page says so."""

    def __init__(self, model: Optional[ConfigModel]) -> None:
        self.by_dest: dict[str, Flag] = {}
        for f in model.flags if model is not None else ():
            if f.config_field:
                self.by_dest.setdefault(f.config_field, f)

    def __call__(self, parts: tuple[str, ...], text: str, scope: Scope) -> Optional[Input]:
        f = self.by_dest.get(parts[0]) if len(parts) == 1 and parts[0] not in scope.locals else None
        if f is None:
            return None
        return flag_input(f, text, f"a name read by {scope.function}, the same as the field "
                          f"{f.config_class}.{f.config_field} that {f.name} sets (matched by name; kb does not "
                          "follow the call)")


def config_json_rule(parts: tuple[str, ...], text: str, scope: Scope) -> Optional[Input]:
    """`hf_config.X`, `hf_text_config.X`, `model_arch_config.X`, `get_total_num_kv_heads()`."""
    for i, p in enumerate(parts):
        if p in _HF and i + 1 == len(parts):
            return Input(CONFIG_JSON, "config.json", text, "the model's config.json")
        if p in _HF and i + 1 < len(parts):
            key = parts[i + 1].removesuffix("()")
            if key in ("get", "to_dict") or key.startswith("_"):
                return Input(CONFIG_JSON, "config.json", text, "the model's config.json")
            return Input(CONFIG_JSON, key, text, f"the config.json key {key}, as vLLM loads it into {p}")
        bare = p.removesuffix("()")
        before = parts[i - 1] if i > 0 else ""
        model = before in ("model_arch_config", "arch_config") or before.endswith("model_config") or (
            before == "self" and scope.owner in ("ModelConfig", "ModelArchitectureConfig"))
        if bare in ARCH_KEYS and model:
            key = ARCH_KEYS[bare]
            return Input(CONFIG_JSON, key, text, f"vLLM reads it from the config.json key {key}")
    return None


def env_rule(parts: tuple[str, ...], text: str, scope: Scope) -> Optional[Input]:
    if parts[0] == "envs" and len(parts) > 1:
        return Input(ENV, parts[1], text, f"the environment variable {parts[1]}, through vllm.envs")
    if parts == ("envs",):  # `getattr(envs, current_platform.device_control_env_var)`
        return Input(ENV, "the environment", text, "an environment variable of vllm.envs whose name vLLM "
                     "computes at run time")
    if parts[:2] in (("os", "environ"), ("os", "getenv()"), ("os", "environ.get()")) or parts[:3] == (
            "os", "environ", "get()"):
        m = re.search(r"""\(\s*['"](\w+)['"]|\[\s*['"](\w+)['"]""", text)
        name = (m.group(1) or m.group(2)) if m else "the environment"
        return Input(ENV, name, text, f"the environment variable {name}")
    return None


class RequestRule:
    """Fields of the request models of the tree's config model (SamplingParams, the OpenAI
    protocol's ChatCompletionRequest and CompletionRequest): `self.n` in a method of one, a field
    validator's value, `sampling_params.n`; `request.n` and `params.n` only where requests are
    served (REQUEST_FILES: elsewhere a `request` is the engine's own). Matched by the field's name."""

    _REQUESTS = ("request", "req", "raw_request")
    _PARAMS = ("sampling_params", "params")

    def __init__(self, model: Optional[ConfigModel]) -> None:
        self.fields: dict[tuple[str, str], RequestField] = {}
        self.models: dict[str, list[str]] = {}  # field name -> the models that have it
        for f in model.request_fields if model is not None else ():
            self.fields[(f.model, f.name)] = f
            self.models.setdefault(f.name, []).append(f.model)

    def __call__(self, parts: tuple[str, ...], text: str, scope: Scope) -> Optional[Input]:
        head = parts[0]
        if head in scope.validated and scope.validated[head] and any(m == scope.owner for m, _ in self.fields):
            return self.field(scope.owner, scope.validated[head], text, f"the value a field validator of "
                              f"{scope.owner} checks")
        if len(parts) < 2 or parts[1].endswith("()"):
            return None
        name = parts[1]
        if head in ("self", "cls") and (scope.owner, name) in self.fields:
            return self.field(scope.owner, name, text, f"the field {scope.owner}.{name}")
        models = self.models.get(name, [])
        serving = scope.file.startswith(REQUEST_FILES)
        if head in self._PARAMS and "SamplingParams" in models and (serving or head == "sampling_params"):
            return self.field("SamplingParams", name, text, f"{head}.{name}: the field SamplingParams.{name} "
                              "(matched by name)")
        if head in self._REQUESTS and models and serving:
            named = [m for m in models if m != "SamplingParams"] or models
            return self.field(named[0], name, text, f"{head}.{name}: the request field {name} of "
                              f"{', '.join(named)} (matched by name)")
        return None

    def field(self, model: str, name: str, text: str, via: str) -> Optional[Input]:
        f = self.fields.get((model, name))
        if f is None:
            return None
        return Input(REQUEST_FIELD, name, text, f"{via}, which each request sets",
                     None if f.required else show_default(f), None, f.doc)


def hardware_rule(parts: tuple[str, ...], text: str, scope: Scope) -> Optional[Input]:
    if parts[0] in _HARDWARE_ROOTS or (len(parts) > 1 and parts[0] == "self" and
                                       any(_HARDWARE_WORDS.search(p) for p in parts[1:])) or \
            (len(parts) == 1 and _HARDWARE_WORDS.search(parts[0]) and parts[0] not in scope.locals):
        return Input(HARDWARE, text, text, "the platform, device or process vLLM runs on: known at run time")
    return None


def constant_rule(parts: tuple[str, ...], text: str, scope: Scope) -> Optional[Input]:
    head = parts[0].removesuffix("()")
    if any(p.isupper() and len(p) > 1 for p in parts) or (head[:1].isupper() and "()" not in parts[0]) or (
            len(parts) == 2 and parts[0].islower() and parts[1][:1].isupper() and "()" not in parts[1]):  # me_quant.QuantizationMethods
        return Input(INTERNAL, text, text, "a constant or class of vLLM's source, not set by users")
    return None


def default_rules(model: Optional[ConfigModel]) -> tuple[Rule, ...]:
    return (env_rule, config_json_rule, FlagRule(model), RequestRule(model), hardware_rule, constant_rule,
            NameRule(model))


REQUEST_FILES = ("vllm/entrypoints/openai/", "vllm/entrypoints/serve/", "vllm/entrypoints/pooling/",
                  "vllm/entrypoints/anthropic/", "vllm/sampling_params.py", "vllm/pooling_params.py",
                  "vllm/entrypoints/chat_utils.py", "vllm/v1/engine/input_processor.py", "vllm/v1/engine/processor.py",
                  "vllm/entrypoints/renderer.py", "vllm/multimodal/", "vllm/reasoning/", "vllm/tool_parsers/",
                  "vllm/entrypoints/openai_", "vllm/v1/structured_output/", "vllm/entrypoints/llm.py")


def _squash(name: str) -> str:
    return name.replace("_", "").lower()
