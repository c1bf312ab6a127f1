"""What sets an error: every name its guard reads, resolved to what a user controls.

A raise site's guard terms name locals (`fact.locals`), fields of the config class the raise is
in (`self.tensor_parallel_size`), fields of other configs (`self.parallel_config.x`,
`parallel_config.x`), `hf_config` attributes, `envs.VLLM_*` and platform calls. Each reference is
resolved by the first rule of a chain that knows it (`Rule`: flags of the scanned `vllm serve`,
config.json keys, environment variables, hardware and run time, vLLM's own constants), else it is
`unresolved`. New rules (request fields, the declared environment variables) are added to the
chain without changing the rest. Pure functions of the scan; nothing of vLLM is imported or run.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any, Optional, Protocol

from kb.config.model import ConfigModel, Flag, RequestField
from kb.model import Caller, RaiseSite
from kb.scan.extract import nesting_ok

# Kinds of input, as pages name them.
FLAG, CONFIG_JSON, CHECKPOINT, ENV, REQUEST_FIELD, HARDWARE, INTERNAL, UNRESOLVED = (
    "flag", "config-json", "checkpoint", "env", "request-field", "hardware", "internal", "unresolved")
# Reachability classes.
LAUNCH, REQUEST, MODEL, RUNTIME, INVARIANT = (
    "launch configuration", "request", "model checkpoint", "hardware/run time", "internal invariant")
REACHABILITY = (LAUNCH, REQUEST, MODEL, RUNTIME, INVARIANT)
KIND_LABELS = {FLAG: "flag", CONFIG_JSON: "config.json key", CHECKPOINT: "from the model checkpoint",
               ENV: "environment variable", REQUEST_FIELD: "request field", HARDWARE: "hardware or run time", INTERNAL: "internal: not set by users",
               UNRESOLVED: "not resolved by kb"}

_WORDS = re.compile(r"\w+")
MAX_DEPTH = 6  # locals followed through locals
MAX_REFS = 64  # references read per site
MAX_TERM = 5000  # characters of a guard term parsed (the scan keeps none longer)
MAX_NESTING = 100  # levels of a term's syntax tree walked

_BUILTINS = frozenset({"len", "isinstance", "hasattr", "getattr", "any", "all", "str", "int", "float", "bool", "type",
                       "list", "dict", "set", "tuple", "min", "max", "sum", "sorted", "callable", "issubclass",
                       "None", "True", "False", "self", "cls", "range", "zip", "enumerate", "repr", "abs", "round",
                       "frozenset", "iter", "next", "id", "vars", "super", "object", "print", "map", "filter"})

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


NOT_FOLLOWED = "not followed by kb: a parameter, a call or a name it does not know"

@dataclass(frozen=True)
class Input:
    """One thing a guard reads, as users know it. `read` is the source text read (after locals);
    `via` is how it was resolved, in words built from the source."""

    kind: str
    key: str  # the flag (`--tensor-parallel-size`), the config.json key, the variable, or the source text
    read: str
    via: str
    default: Optional[str] = None  # as vLLM's --help shows it
    choices: Optional[tuple[str, ...]] = None
    help: str = ""
    flag_page: Optional[str] = None  # its page: `flags/<name>/`, `env/<VAR>/`, `config-json/<key>/`

    @property
    def label(self) -> str:
        return self.key

    @property
    def resolved(self) -> bool:
        return self.kind != UNRESOLVED

    def to_json(self) -> dict[str, Any]:
        """The input as API records carry it: `read` only where it differs from `key`; `default`,
        `choices`, `help` and `page` only where there is one (thousands of records carry inputs)."""
        out: dict[str, Any] = {"kind": self.kind, "key": self.key, "via": self.via}
        if self.read != self.key:
            out["read"] = self.read
        if self.default is not None:
            out["default"] = self.default
        if self.choices is not None:
            out["choices"] = list(self.choices)
        if self.help:
            out["help"] = self.help
        if self.flag_page:
            out["page"] = f"/{self.flag_page}"
        return out


@dataclass(frozen=True)
class SetBy:
    """What sets one error: the inputs its guard reads, those of the earlier checks of the same
    block (it is raised only when they pass), its reachability class and why, and the trigger
    written with users' names."""

    inputs: tuple[Input, ...]
    earlier: tuple[Input, ...]
    reachability: str
    basis: str  # why that class, in words
    trigger: str  # the innermost condition and what encloses it, with flags and keys for names
    unparsed: int = 0  # guard terms too long or not Python (counted, never guessed)

    @property
    def resolved(self) -> bool:
        return self.unparsed == 0 and all(i.resolved for i in self.inputs)

    def to_json(self) -> dict[str, Any]:
        return {"inputs": [i.to_json() for i in self.inputs], "earlier": [i.to_json() for i in self.earlier],
                "reachability": self.reachability, "basis": self.basis, "trigger": self.trigger,
                "resolved": self.resolved}


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
    served (_REQUEST_FILES: elsewhere a `request` is the engine's own). Matched by the field's name."""

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
        serving = scope.file.startswith(_REQUEST_FILES)
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


# --- references in a guard ------------------------------------------------------------------------
@lru_cache(maxsize=65536)
def _parse(text: str) -> Optional[ast.expr]:
    if len(text) > MAX_TERM:
        return None
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return node if nesting_ok(node, MAX_NESTING) else None  # nested deeper than kb walks: not followed


def _chain(node: ast.expr) -> Optional[tuple[str, ...]]:
    """`self.parallel_config.x` -> ("self", "parallel_config", "x"); a call `a.f()` ends in "f()"."""
    parts: list[str] = []
    while True:
        if isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name)) and not parts:
            inner = _chain(node.func)
            if inner is None:
                return None
            return (*inner[:-1], inner[-1] + "()")
        if isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Name):
            parts.append(node.id)
            return tuple(reversed(parts))
        else:
            return None


def _named_attribute(node: ast.AST) -> Optional[tuple[str, ...]]:
    """`getattr(x.y, "z", d)` or `hasattr(x.y, "z")` -> ("x", "y", "z"); else None."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr")
            and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str) and node.args[1].value.isidentifier()):
        return None
    inner = _chain(node.args[0])
    return None if inner is None else (*inner, node.args[1].value)


def references(node: ast.AST, bound: frozenset[str] = frozenset()) -> Iterator[tuple[tuple[str, ...], ast.expr]]:
    """The maximal attribute chains a node reads, outermost first; builtins' arguments are read,
    and of a comprehension the collections it walks (its own loop names are `bound`)."""
    named = _named_attribute(node)
    if named is not None and named[0] not in bound and isinstance(node, ast.Call):  # getattr(config, "x"): config.x
        yield named, node
        for a in node.args[2:]:
            yield from references(a, bound)
        return
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _BUILTINS:
        for a in [*node.args, *(k.value for k in node.keywords)]:
            yield from references(a, bound)
        return
    if isinstance(node, (ast.Attribute, ast.Name, ast.Call)):
        parts = _chain(node)
        if parts is not None:
            if not (len(parts) == 1 and parts[0] in _BUILTINS) and parts[0] not in bound:
                yield parts, node
            if isinstance(node, ast.Call):
                for a in [*node.args, *(k.value for k in node.keywords)]:
                    yield from references(a, bound)
            return
    if isinstance(node, ast.GeneratorExp | ast.ListComp | ast.SetComp | ast.DictComp):
        inner = set(bound)
        for gen in node.generators:
            yield from references(gen.iter, frozenset(inner))
            inner |= {n.id for n in ast.walk(gen.target) if isinstance(n, ast.Name)}
            for cond in gen.ifs:
                yield from references(cond, frozenset(inner))
        for part in ([node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]):
            yield from references(part, frozenset(inner))
        return
    if isinstance(node, ast.Lambda):
        return
    for child in ast.iter_child_nodes(node):
        yield from references(child, bound)


class Resolver:
    """The rules in order; `inputs_of(site)` resolves every reference of its guard."""

    def __init__(self, rules: Sequence[Rule]) -> None:
        self.rules = tuple(rules)

    def resolve(self, parts: tuple[str, ...], text: str, scope: Scope, depth: int = 0) -> list[Input]:
        key = (parts, text, depth)
        if key not in scope.memo:
            scope.memo[key] = self._resolve(parts, text, scope, depth)
        return scope.memo[key]

    def _resolve(self, parts: tuple[str, ...], text: str, scope: Scope, depth: int) -> list[Input]:
        local = parts[0] in scope.locals and depth < MAX_DEPTH
        named = len(parts) > 1 and parts[0].endswith("_config")  # `parallel_config.x`: rules know it by name
        if local and not named:
            return self.follow_local(parts, scope, depth)
        traced = parts[0] in scope.params and parts[0] not in scope.locals and depth < MAX_DEPTH
        if traced and not parts[0].endswith("_config"):  # a `*_config` is named for its class: rules first
            return self.through_callers(parts, text, scope, depth)
        for rule in self.rules:
            found = rule(parts, text, scope)
            if found is not None:
                return [found]
        if local:
            return self.follow_local(parts, scope, depth)
        if traced:
            return self.through_callers(parts, text, scope, depth)
        return [Input(UNRESOLVED, text, text, NOT_FOLLOWED)]

    def follow_local(self, parts: tuple[str, ...], scope: Scope, depth: int) -> list[Input]:
        """A local, read as the value the function assigned it before the raise."""
        source = re.sub(r"^copy\.(?:deep)?copy\((.*)\)$", r"\1", scope.locals[parts[0]])
        if len(parts) > 1:
            source = f"({source})." + ".".join(parts[1:])
        if parts[0] in _WORDS.findall(source):  # `x = x or 1`: the x it reads is the earlier one
            scope = replace(scope, locals={k: v for k, v in scope.locals.items() if k != parts[0]}, memo={},
                            caller_scopes={})
        return self.resolve_text(source, scope, depth + 1)

    def through_callers(self, parts: tuple[str, ...], text: str, scope: Scope, depth: int) -> list[Input]:
        """A parameter, read as what each call of its function in the same file passes for it."""
        out: list[Input] = []
        for c in scope.callers:
            arg = next((a for a in c.args if a.param == parts[0]), None)
            where = f"{c.qualname} (line {c.line})"
            if arg is None:
                out.append(Input(UNRESOLVED, text, text, f"the parameter {parts[0]}, which the call in {where} "
                                 "fills from *args or **kwargs: not followed by kb"))
                continue
            source = arg.source if len(parts) == 1 else f"({arg.source})." + ".".join(parts[1:])
            how = f"passes {parts[0]}={arg.source}" if arg.passed else f"leaves {parts[0]} to its default {arg.source}"
            found = self.resolve_text(source, scope.of_caller(c), depth + 1)
            if not found:
                out.append(Input(INTERNAL, text, text, f"{where} {how}: a constant of vLLM's source"))
            out += [replace(i, via=f"{where} {how}; {i.via}") for i in found]
        return out

    def resolve_text(self, text: str, scope: Scope, depth: int = 0) -> list[Input]:
        node = _parse(text)
        if node is None:
            return [Input(UNRESOLVED, text[:200], text[:200], "not parsed by kb")]
        out: list[Input] = []
        for parts, ref in references(node):
            found = self.resolve(parts, _text(parts, ref), scope, depth)
            if isinstance(ref, ast.Call) and parts[-1].endswith("()") and (ref.args or ref.keywords) and found and \
                    not found[0].resolved and parts[0] not in ("self", "cls"):
                continue  # a function of its arguments, which are read on their own
            out += found
            if len(out) >= MAX_REFS:
                break
        return out

    def rewrite(self, text: str, scope: Scope, depth: int = 0, memo: Optional[dict[str, Optional[str]]] = None) -> str:
        """The term with every flag, key and variable it reads written as users name them; a
        local whose value reads them is written out in its place (`memo`: labels of locals)."""
        if _parse(text) is None:
            return text
        node = ast.parse(text.strip(), mode="eval").body  # a fresh tree: the parsed ones are shared
        swap = _Swap(self, scope, depth, {} if memo is None else memo)
        try:
            out = ast.unparse(swap.visit(node))
        except (RecursionError, ValueError):
            return text
        for key in sorted(swap.names, key=len, reverse=True):
            out = out.replace(key, swap.names[key])
        return out

    def label_of(self, parts: tuple[str, ...], node: ast.expr, scope: Scope, depth: int,
                 memo: dict[str, Optional[str]]) -> Optional[str]:
        if parts[0] in scope.locals and depth < MAX_DEPTH and not (len(parts) > 1 and parts[0].endswith("_config")):
            if len(parts) > 1:
                return None
            if parts[0] not in memo:
                memo[parts[0]] = None  # a local defined through itself stays named
                source = scope.locals[parts[0]]
                parsed = _parse(source)
                inner = self.rewrite(source, scope, depth + 1, memo)
                if parsed is None or inner == ast.unparse(parsed) or len(inner) > 120:
                    memo[parts[0]] = None  # nothing of users' in it, or too long to inline: keep its name
                else:
                    memo[parts[0]] = inner if isinstance(parsed, (ast.Name, ast.Attribute, ast.Call)) else f"({inner})"
            return memo[parts[0]]
        if parts[0] in scope.params and parts[0] not in scope.locals and depth < MAX_DEPTH and \
                not parts[0].endswith("_config"):
            return self.caller_label(parts, scope, depth)
        found = self.resolve(parts, _text(parts, node), scope, depth)
        if len(found) == 1 and found[0].kind in (FLAG, CONFIG_JSON, ENV):
            return found[0].key
        return None


    def caller_label(self, parts: tuple[str, ...], scope: Scope, depth: int) -> Optional[str]:
        """A parameter written as what its callers pass, when they all pass the same users' names."""
        shown: set[str] = set()
        for c in scope.callers:
            arg = next((a for a in c.args if a.param == parts[0]), None)
            source = None if arg is None else arg.source if len(parts) == 1 else \
                f"({arg.source})." + ".".join(parts[1:])
            parsed = _parse(source) if source is not None else None
            if source is None or parsed is None:
                return None
            inner = self.rewrite(source, scope.of_caller(c), depth + 1, {})
            if inner == ast.unparse(parsed) or len(inner) > 120:
                return None
            shown.add(inner if isinstance(parsed, (ast.Name, ast.Attribute, ast.Call)) else f"({inner})")
        return shown.pop() if len(shown) == 1 else None


class _Swap(ast.NodeTransformer):
    """Replaces each chain that names a flag, a key or a variable by a placeholder name."""

    def __init__(self, resolver: Resolver, scope: Scope, depth: int, memo: dict[str, Optional[str]]) -> None:
        self.resolver, self.scope, self.depth, self.memo = resolver, scope, depth, memo
        self.names: dict[str, str] = {}

    def generic_visit(self, node: ast.AST) -> ast.AST:
        if isinstance(node, (ast.Attribute, ast.Name, ast.Call)):
            parts = _named_attribute(node) or _chain(node)
            if parts is not None and not (len(parts) == 1 and parts[0] in _BUILTINS):
                label = self.resolver.label_of(parts, node, self.scope, self.depth, self.memo)
                if label is not None:
                    key = f"_kb_{len(self.names)}_"
                    self.names[key] = label
                    return ast.Name(key, ast.Load())
                if not isinstance(node, ast.Call):
                    return node  # a chain kb does not name: kept as vLLM wrote it
        return super().generic_visit(node)


def _text(parts: tuple[str, ...], node: ast.expr) -> str:
    return ast.unparse(node) if isinstance(node, ast.Call) else ".".join(parts)


def scope_of(site: RaiseSite) -> Scope:
    qual = site.fact.qualname.split(".")
    owner = qual[-2] if len(qual) > 1 and qual[-2][:1].isupper() else ""
    validated = {}
    if site.fact.validation == "field_validator":
        field_name = _validated_field(site, qual[-1])
        validated = {"value": field_name, "v": field_name, "values": field_name}
    elif site.fact.validation == "model_validator":
        validated = {"data": "", "values": ""}  # every field given to the class
    bound: dict[str, str] = {}
    for c in site.fact.contexts:
        if c.kind == "for":
            bound.update(_loop_names(c.source))
    for term in site.fact.guard_terms:
        bound.update(_walrus_names(term))
    return Scope(site.file, owner, qual[-1], bound | {d.name: d.source for d in site.fact.locals}, validated,
                 site.fact.callers)


@lru_cache(maxsize=16384)
def _loop_names(head: str) -> tuple[tuple[str, str], ...]:
    """`for family, buckets in value.items()` -> each name it binds, read as the collection it walks."""
    try:
        loop = ast.parse(head.rstrip(":") + ":\n    pass").body[0] if len(head) <= MAX_TERM else None
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ()
    if not isinstance(loop, (ast.For, ast.AsyncFor)) or not nesting_ok(loop, MAX_NESTING):
        return ()
    walked = ast.unparse(loop.iter)
    return tuple((n.id, walked) for n in ast.walk(loop.target) if isinstance(n, ast.Name))


@lru_cache(maxsize=16384)
def _walrus_names(term: str) -> tuple[tuple[str, str], ...]:
    """`(pooling_type := self.pooling_type)` in a guard: the name, read as its value."""
    node = _parse(term) if ":=" in term else None
    if node is None:
        return ()
    return tuple((n.target.id, ast.unparse(n.value)) for n in ast.walk(node)
                 if isinstance(n, ast.NamedExpr) and isinstance(n.target, ast.Name))


def _validated_field(site: RaiseSite, function: str) -> str:
    """The field a pydantic `field_validator` validates: its first argument where the excerpt
    shows the decorator, else the function's name (`validate_mode_before` -> `mode`)."""
    e = site.excerpt
    lines = e.lines[: max(0, site.line - e.start)]
    for n in range(len(lines) - 1, -1, -1):
        if re.match(rf"\s*(?:async\s+)?def\s+{re.escape(function)}\b", lines[n]):
            for above in reversed(lines[max(0, n - 6) : n]):
                m = re.search(r"""field_validator\(\s*['"](\w+)['"]""", above)
                if m:
                    return m.group(1)
            break
    return re.sub(r"^_*(validate|check|verify)_|_(before|after|wrap)$", "", function)


def _dedupe(inputs: Iterable[Input]) -> tuple[Input, ...]:
    seen: dict[tuple[str, str], Input] = {}
    for i in inputs:
        seen.setdefault((i.kind, i.key), i)
    return tuple(seen.values())


_REQUEST_FILES = ("vllm/entrypoints/openai/", "vllm/entrypoints/serve/", "vllm/entrypoints/pooling/",
                  "vllm/entrypoints/anthropic/", "vllm/sampling_params.py", "vllm/pooling_params.py",
                  "vllm/entrypoints/chat_utils.py", "vllm/v1/engine/input_processor.py", "vllm/v1/engine/processor.py",
                  "vllm/entrypoints/renderer.py", "vllm/multimodal/", "vllm/reasoning/", "vllm/tool_parsers/",
                  "vllm/entrypoints/openai_", "vllm/v1/structured_output/", "vllm/entrypoints/llm.py")
_LAUNCH_FILES = ("vllm/config/", "vllm/engine/arg_utils.py", "vllm/entrypoints/cli/", "vllm/entrypoints/utils.py")
_MODEL_FILES = ("vllm/model_executor/models/", "vllm/transformers_utils/", "vllm/model_executor/model_loader/",
                "vllm/model_executor/layers/quantization/")
_RUNTIME_FILES = ("vllm/platforms/", "vllm/distributed/", "vllm/device_allocator/", "vllm/v1/worker/")


def reachability(file: str, inputs: Sequence[Input]) -> tuple[str, str]:
    kinds = {i.kind for i in inputs}
    if FLAG in kinds or ENV in kinds:
        return LAUNCH, "its guard reads a flag or an environment variable"
    if REQUEST_FIELD in kinds:
        return REQUEST, "its guard reads a field of the request"
    if kinds & {CONFIG_JSON, CHECKPOINT}:
        return MODEL, "its guard reads the model's config.json or what vLLM derives from it"
    if HARDWARE in kinds:
        return RUNTIME, "its guard reads the platform, device or process it runs on"
    for prefixes, cls in ((_REQUEST_FILES, REQUEST), (_LAUNCH_FILES, LAUNCH), (_MODEL_FILES, MODEL),
                          (_RUNTIME_FILES, RUNTIME)):
        if file.startswith(prefixes):
            return cls, f"where it is raised ({file}): its guard names nothing kb resolves to a user's input"
    return INVARIANT, "nothing its guard reads is set by users, as far as kb follows it"


class SetByReader:
    """Resolves sites against one tree's flag model with the default rules (or given ones)."""

    def __init__(self, model: Optional[ConfigModel], rules: Optional[Sequence[Rule]] = None) -> None:
        self.resolver = Resolver(rules if rules is not None else default_rules(model))
        self.envs = frozenset(e.name for e in model.env) if model is not None else frozenset()
        self.keys = frozenset(k.key for k in model.config_keys) if model is not None else frozenset()
        self.cache: dict[tuple[str, int, str], tuple[tuple[Input, ...], int]] = {}
        self.scopes: dict[tuple[str, int, str], Scope] = {}

    def inputs(self, site: RaiseSite) -> tuple[tuple[Input, ...], int]:
        key = (site.file, site.line, site.id)
        if key not in self.cache:
            self.cache[key] = self._inputs(site)
        return self.cache[key]

    def scope(self, site: RaiseSite) -> Scope:
        key = (site.file, site.line, site.id)
        if key not in self.scopes:
            self.scopes[key] = scope_of(site)
        return self.scopes[key]

    def _inputs(self, site: RaiseSite) -> tuple[tuple[Input, ...], int]:
        scope = self.scope(site)
        found: list[Input] = []
        unparsed = 0
        for term in site.fact.guard_terms:
            if _parse(term) is None:
                unparsed += 1
                continue
            found += self.resolver.resolve_text(term, scope)
        return tuple(input_page(self.envs, self.keys, i) for i in _dedupe(found)), unparsed

    def trigger(self, site: RaiseSite) -> str:
        scope = self.scope(site)
        memo: dict[str, Optional[str]] = {}
        terms = [self.resolver.rewrite(t, scope, 0, memo) for t in site.fact.guard_terms]
        return " and ".join(f"({t})" if len(terms) > 1 and " or " in t else t for t in terms)

    def set_by(self, sites: Sequence[RaiseSite], siblings: Sequence[RaiseSite] = ()) -> SetBy:
        """`sites` of one id; `siblings`: every site of the same file (for the earlier checks)."""
        first = sites[0]
        inputs, unparsed = self.inputs(first)
        for s in sites[1:]:
            more, bad = self.inputs(s)
            inputs, unparsed = _dedupe(inputs + more), unparsed + bad
        earlier: list[Input] = []
        for s in earlier_checks(first, siblings):
            earlier += self.inputs(s)[0]
        seen = {(i.kind, i.key) for i in inputs}
        cls, basis = reachability(first.file, inputs)
        return SetBy(inputs, tuple(i for i in _dedupe(earlier) if (i.kind, i.key) not in seen), cls, basis,
                     self.trigger(first), unparsed)


def earlier_checks(site: RaiseSite, siblings: Sequence[RaiseSite]) -> list[RaiseSite]:
    """Raises before this one in the same function under the same enclosing conditions: vLLM
    reaches this raise only when none of them raised."""
    inside = site.fact.guard_terms[:-1]
    if not inside:
        return []
    return [s for s in siblings if s.fact.qualname == site.fact.qualname and s.line < site.line
            and s.fact.guard_terms[: len(inside)] == inside and s.id != site.id]


def _squash(name: str) -> str:
    return name.replace("_", "").lower()
