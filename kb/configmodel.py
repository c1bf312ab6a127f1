"""The configuration model of one vLLM tree: frozen dataclasses handed to later stages."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Union

from kb.errors import Located

JSON = Union[None, bool, int, float, str, list[Any], dict[str, Any]]
# str methods a flag's `lambda s: s.lower().replace("-", "_")` may apply (Flag.value_type records them)
STRING_METHODS = frozenset({"lower", "upper", "strip", "lstrip", "rstrip", "replace", "removeprefix", "removesuffix",
                            "casefold"})
CONFIG_FORMAT = "kb-config/1"


@dataclass(frozen=True)
class Flag:
    """One argparse action of `vllm serve`, as vLLM's own parser would hold it.

    `default` is a JSON value when `default_exact`, else the Python repr vLLM prints
    (`AttentionConfig(backend=None, ...)`, `set()`); `default_known` is False when the source's
    default could not be followed (then `default` is its source text)."""

    name: str  # the first long option (`--tensor-parallel-size`), or the dest of a positional
    options: tuple[str, ...]  # every option string argparse accepts, the visible ones first
    visible: tuple[str, ...]  # those `--help` shows
    dest: str
    action: str  # store, store_true, store_false, boolean, append, count, custom:<Class>
    type: Optional[str]  # int, float, str, json, bool-or-str, <function name>, ...
    nargs: Optional[Union[str, int]]
    choices: Optional[tuple[JSON, ...]]
    default: JSON
    default_exact: bool
    default_known: bool
    help: str
    group: str
    config_class: Optional[str]  # the config dataclass and field whose kwargs built it
    config_field: Optional[str]
    deprecated: bool
    file: str
    line: int
    parses_into: Optional[str] = None  # the config dataclass a JSON value of the flag is parsed into
    value_type: Optional[str] = None  # the converter of a value (`int` for `optional_type(int)`), else `type`
    constraints: tuple[tuple[str, JSON], ...] = ()  # pydantic's ge, gt, le, lt, ... on its config field

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name, "options": list(self.options), "visible": list(self.visible), "dest": self.dest,
            "action": self.action, "type": self.type, "nargs": self.nargs,
            "choices": None if self.choices is None else list(self.choices),
            "default": self.default, "default_exact": self.default_exact, "default_known": self.default_known,
            "help": self.help, "group": self.group, "config_class": self.config_class,
            "config_field": self.config_field, "deprecated": self.deprecated, "file": self.file, "line": self.line,
            "parses_into": self.parses_into, "value_type": self.value_type,
            "constraints": [list(c) for c in self.constraints],
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> Flag:
        return Flag(d["name"], tuple(d["options"]), tuple(d["visible"]), d["dest"], d["action"], d["type"], d["nargs"],
                    None if d["choices"] is None else tuple(d["choices"]), d["default"], d["default_exact"],
                    d["default_known"], d["help"], d["group"], d["config_class"], d["config_field"], d["deprecated"],
                    d["file"], d["line"], d["parses_into"], d["value_type"],
                    tuple((c[0], c[1]) for c in d["constraints"]))


@dataclass(frozen=True)
class FlagGroup:
    title: str
    description: str


@dataclass(frozen=True)
class EnvVar:
    """One entry of `environment_variables` in vllm/envs.py: `default` is what its getter returns
    in an empty environment (JSON when `default_exact`, else the Python repr; its source text
    when not `default_known`); `type` is the `if TYPE_CHECKING:` annotation, None if undeclared;
    `doc` the comment block above the entry, as vLLM's docs show it."""

    name: str
    type: Optional[str]
    default: JSON
    default_exact: bool
    default_known: bool
    doc: str
    file: str
    line: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "type": self.type, "default": self.default, "default_exact": self.default_exact,
                "default_known": self.default_known, "doc": self.doc, "file": self.file, "line": self.line}

    @staticmethod
    def from_json(d: dict[str, Any]) -> EnvVar:
        return EnvVar(d["name"], d["type"], d["default"], d["default_exact"], d["default_known"], d["doc"], d["file"],
                      d["line"])


@dataclass(frozen=True)
class KeyRead:
    """One place vLLM reads a config.json key off the model's Hugging Face config.

    `via` is the object read (`hf_config`, `hf_text_config`); `default` the value used when
    the key is absent (`has_default` False: the read fails without it); `alternatives` the
    keys tried at the same place, in vLLM's order (this key among them)."""

    via: str
    default: JSON
    has_default: bool
    alternatives: tuple[str, ...]
    function: str  # the enclosing Class.method or function
    file: str
    line: int

    def to_json(self) -> dict[str, Any]:
        return {"via": self.via, "default": self.default, "has_default": self.has_default,
                "alternatives": list(self.alternatives), "function": self.function, "file": self.file,
                "line": self.line}

    @staticmethod
    def from_json(d: dict[str, Any]) -> KeyRead:
        return KeyRead(d["via"], d["default"], d["has_default"], tuple(d["alternatives"]), d["function"], d["file"],
                       d["line"])


@dataclass(frozen=True)
class ConfigKey:
    """A config.json key (`num_attention_heads`; nested keys dotted: `text_config.head_dim`)."""

    key: str
    reads: tuple[KeyRead, ...]  # sorted by (file, line)

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "reads": [r.to_json() for r in self.reads]}

    @staticmethod
    def from_json(d: dict[str, Any]) -> ConfigKey:
        return ConfigKey(d["key"], tuple(KeyRead.from_json(r) for r in d["reads"]))


@dataclass(frozen=True)
class RequestField:
    """A field of a request model (`SamplingParams`, `ChatCompletionRequest`, ...).

    `default` as for flags (`required` when there is none); `constraints` are pydantic's
    `ge`/`gt`/`le`/`lt`/`min_length`/`max_length` as the source states them."""

    model: str
    name: str
    type: str
    default: JSON
    default_exact: bool
    default_known: bool
    required: bool
    constraints: tuple[tuple[str, JSON], ...]
    doc: str
    file: str
    line: int

    def to_json(self) -> dict[str, Any]:
        return {"model": self.model, "name": self.name, "type": self.type, "default": self.default,
                "default_exact": self.default_exact, "default_known": self.default_known,
                "required": self.required, "constraints": dict(self.constraints), "doc": self.doc,
                "file": self.file, "line": self.line}

    @staticmethod
    def from_json(d: dict[str, Any]) -> RequestField:
        return RequestField(d["model"], d["name"], d["type"], d["default"], d["default_exact"], d["default_known"],
                            d["required"], tuple(d["constraints"].items()), d["doc"], d["file"], d["line"])


@dataclass(frozen=True)
class Build:
    """One config `EngineArgs.create_engine_config` builds (directly, or in the `create_x_config`
    method it calls): the condition it is built under and the keyword arguments of the call, as
    source text read in EngineArgs' scope (`self` is the EngineArgs). "" when always built."""

    config_class: str
    line: int  # of vllm/engine/arg_utils.py
    when: str
    args: tuple[tuple[str, str], ...]  # (field, source) in the call's order
    spread: bool = False  # the call also passes `**kwargs`: fields not listed may be set too
    made_at: int = 0  # the line of the `XConfig(...)` call itself (in a create_x_config method), else `line`

    def to_json(self) -> list[Any]:
        return [self.config_class, self.line, self.when, [list(a) for a in self.args], self.spread, self.made_at]

    @staticmethod
    def from_json(d: list[Any]) -> Build:
        return Build(d[0], d[1], d[2], tuple((a[0], a[1]) for a in d[3]), d[4], d[5])


@dataclass(frozen=True)
class JsonField:
    """A field of a config that a JSON-valued flag parses into, as pydantic validates the JSON:
    the members of its type hint (kind: bool int float str none list tuple set dict literal
    dataclass other; a literal's options) and its constraints."""

    config_class: str
    name: str
    members: tuple[tuple[str, tuple[JSON, ...]], ...]
    constraints: tuple[tuple[str, JSON], ...] = ()
    before: bool = False  # a `mode="before"` or `"wrap"` field validator changes the value first

    def to_json(self) -> list[Any]:
        return [self.config_class, self.name, [[k, list(o)] for k, o in self.members], [list(c) for c in self.constraints],
                self.before]

    @staticmethod
    def from_json(d: list[Any]) -> JsonField:
        return JsonField(d[0], d[1], tuple((m[0], tuple(m[1])) for m in d[2]), tuple((c[0], c[1]) for c in d[3]),
                         bool(d[4]))


@dataclass(frozen=True)
class ConfigModel:
    """`flags` sorted by name; `env` by name; `config_keys` by key; `request_fields` by
    (model, order in the class); `warnings` say what could not be read (located)."""

    flags: tuple[Flag, ...]
    groups: tuple[FlagGroup, ...]
    parser_file: Optional[str]  # where `make_arg_parser` was found
    warnings: tuple[Located, ...]
    env: tuple[EnvVar, ...] = ()
    config_keys: tuple[ConfigKey, ...] = ()
    request_fields: tuple[RequestField, ...] = ()
    # (config class, line of vllm/engine/arg_utils.py) in the order create_engine_config builds them
    build_order: tuple[tuple[str, int], ...] = ()
    # what vLLM's parser adds to an "unrecognized arguments" error: (the pattern it searches, the text)
    parser_hints: tuple[tuple[str, str], ...] = ()
    builds: tuple[Build, ...] = ()  # in build_order's order: what each config is built from
    # (class, field, "default" | "set", method, line, when): where a method of a config or EngineArgs
    # sets a field itself, and under which condition (kb.config.order)
    assigned: tuple[tuple[str, str, str, str, int, str], ...] = ()
    # (attribute of VllmConfig, method, condition): the config methods VllmConfig.__post_init__ calls
    config_calls: tuple[tuple[str, str, str], ...] = ()
    # (class, field, default) of the configs vLLM builds (create_engine_config's, and those a JSON-valued
    # flag parses into): what a field nothing sets holds, what a key left out of the JSON holds
    class_defaults: tuple[tuple[str, str, JSON], ...] = ()
    json_fields: tuple[JsonField, ...] = ()  # their fields' types, as pydantic validates a JSON value
    # (local, config class, line): the locals of create_engine_config that hold a config it builds
    engine_configs: tuple[tuple[str, str, int], ...] = ()
    # (qualified name, digest) of the functions kb/checks/computed.py follows, as this tree has them
    followed: tuple[tuple[str, str], ...] = ()
    # config.json model types whose `derive_max_model_len_and_key` vLLM overrides (kb.config.computed)
    max_len_overrides: tuple[str, ...] = ()
    # (qualified name, value) of the number constants kb fit reads (kb.config.computed.CONSTANTS)
    constants: tuple[tuple[str, float], ...] = ()
    # (file, name, kind, value): what the module-level names the launch files read hold (kb.config.names)
    module_names: tuple[tuple[str, str, str, JSON], ...] = ()
    # (file, class, member, expression): what a config's property (`x`) or method (`x()`) computes (kb.config.members)
    members: tuple[tuple[str, str, str, str], ...] = ()
    # (file, function, line, negated test): the early exits of the launch files' functions (kb.config.flow)
    exits: tuple[tuple[str, str, int, str], ...] = ()
    # (file, function, local, first line, last line, expression): a local an if/elif chain assigns (kb.config.flow)
    chains: tuple[tuple[str, str, str, int, int, str], ...] = ()
    # (class, setter, holder, field): what a by-name default setter (VllmConfig._set_config_default) can
    # fill; holder "" the class's own field; ("*", "*") not read (kb.config.byname.name_filled)
    name_filled: tuple[tuple[str, str, str, str], ...] = ()
    # (class, method, line): where a config's __post_init__ first runs each method it calls (kb.config.order)
    post_init_order: tuple[tuple[str, str, int], ...] = ()
    # (dest, choices on CUDA): the flags whose choices vLLM makes from the platform at run time
    platform_choices: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # (step, file, line of its call): the steps of vLLM's startup that can fail for memory, in the
    # order it reaches them (kb.config.startup; kb fit predicts the first failure only)
    startup: tuple[tuple[str, str, int], ...] = ()

    @property
    def counts(self) -> dict[str, int]:
        return {"flags": len(self.flags), "groups": len(self.groups),
                "defaults_unresolved": sum(not f.default_known for f in self.flags),
                "env": len(self.env), "config_keys": len(self.config_keys),
                "request_fields": len(self.request_fields), "warnings": len(self.warnings)}

    def env_var(self, name: str) -> Optional[EnvVar]:
        return next((e for e in self.env if e.name == name), None)

    def config_key(self, key: str) -> Optional[ConfigKey]:
        return next((k for k in self.config_keys if k.key == key), None)

    def keys_read_in(self, function: str) -> tuple[str, ...]:
        """The config.json keys read in a function (`get_total_num_kv_heads`, or `Class.method`), sorted:
        what a guard calling that function depends on."""
        return tuple(k.key for k in self.config_keys
                     if any(r.function == function or r.function.endswith("." + function) for r in k.reads))

    def request_field(self, model: str, name: str) -> Optional[RequestField]:
        return next((f for f in self.request_fields if f.model == model and f.name == name), None)

    def flag(self, option: str) -> Optional[Flag]:
        return next((f for f in self.flags if option in f.options or f.dest == option), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": CONFIG_FORMAT,
            "parser_file": self.parser_file,
            "counts": self.counts,
            "groups": [{"title": g.title, "description": g.description} for g in self.groups],
            "flags": [f.to_json() for f in self.flags],
            "env": [e.to_json() for e in self.env],
            "config_keys": [k.to_json() for k in self.config_keys],
            "request_fields": [f.to_json() for f in self.request_fields],
            "build_order": [list(b) for b in self.build_order],
            "parser_hints": [list(h) for h in self.parser_hints],
            "builds": [b.to_json() for b in self.builds],
            "assigned": [list(a) for a in self.assigned],
            "config_calls": [list(c) for c in self.config_calls],
            "class_defaults": [list(c) for c in self.class_defaults],
            "json_fields": [f.to_json() for f in self.json_fields],
            "engine_configs": [list(c) for c in self.engine_configs],
            "followed": [list(f) for f in self.followed],
            "max_len_overrides": list(self.max_len_overrides),
            "constants": [list(c) for c in self.constants],
            "module_names": [list(n) for n in self.module_names],
            "members": [list(m) for m in self.members],
            "exits": [list(e) for e in self.exits],
            "chains": [list(c) for c in self.chains],
            "name_filled": [list(f) for f in self.name_filled],
            "post_init_order": [list(o) for o in self.post_init_order],
            "platform_choices": [[d, list(c)] for d, c in self.platform_choices],
            "startup": [list(s) for s in self.startup],
            "warnings": [{"path": w.path, "line": w.line, "message": w.message} for w in self.warnings],
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> ConfigModel:
        """The model back from `to_json` (the cache of kb.config.store); KeyError/TypeError on another shape."""
        if d.get("format") != CONFIG_FORMAT:
            raise ValueError(f"not {CONFIG_FORMAT}")
        return ConfigModel(
            tuple(Flag.from_json(f) for f in d["flags"]),
            tuple(FlagGroup(g["title"], g["description"]) for g in d["groups"]), d["parser_file"],
            tuple(Located(w["path"], w["line"], w["message"]) for w in d["warnings"]),
            tuple(EnvVar.from_json(e) for e in d["env"]), tuple(ConfigKey.from_json(k) for k in d["config_keys"]),
            tuple(RequestField.from_json(f) for f in d["request_fields"]),
            tuple((b[0], b[1]) for b in d["build_order"]), tuple((h[0], h[1]) for h in d["parser_hints"]),
            tuple(Build.from_json(b) for b in d["builds"]), tuple((a[0], a[1], a[2], a[3], a[4], a[5]) for a in d["assigned"]),
            tuple((c[0], c[1], c[2]) for c in d["config_calls"]),
            tuple((c[0], c[1], c[2]) for c in d["class_defaults"]),
            tuple(JsonField.from_json(f) for f in d["json_fields"]),
            tuple((c[0], c[1], c[2]) for c in d["engine_configs"]),
            tuple((f[0], f[1]) for f in d["followed"]), tuple(d["max_len_overrides"]),
            tuple((c[0], c[1]) for c in d.get("constants", ())),
            tuple((n[0], n[1], n[2], n[3]) for n in d.get("module_names", ())),
            tuple((m[0], m[1], m[2], m[3]) for m in d.get("members", ())),
            tuple((e[0], e[1], e[2], e[3]) for e in d.get("exits", ())),
            tuple((c[0], c[1], c[2], c[3], c[4], c[5]) for c in d.get("chains", ())),
            tuple((f[0], f[1], f[2], f[3]) for f in d.get("name_filled", ())),
            tuple((o[0], o[1], o[2]) for o in d.get("post_init_order", ())),
            tuple((c[0], tuple(c[1])) for c in d.get("platform_choices", ())),
            startup=tuple((s[0], s[1], s[2]) for s in d.get("startup", ())))
