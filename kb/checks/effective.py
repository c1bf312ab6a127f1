"""A flag's value where a guard reads it: as vLLM's parser gives it, unless vLLM's own code changes
it first (a config's `__post_init__` in the order it runs, VllmConfig's by-name defaults, a field
create_engine_config builds) under the conditions it does; a request field likewise."""

from __future__ import annotations

import ast
import re
from typing import Optional

from kb.checks.compiled import PLATFORMS
from kb.checks.compiling import (
    ENGINE_SCOPE,
    NotCheckable,
    UnknownValue,
)
from kb.checks.computed import SET_IN, modelled
from kb.checks.guardrefs import References
from kb.config.order import REQUEST_CLASS
from kb.config.rules import Scope
from kb.configmodel import Flag
from kb.setby import CONFIG_JSON, ENV, FLAG, HARDWARE, INTERNAL, REQUEST_FIELD, Input

_ABSENT = object()
_PLATFORM_CALL = re.compile(r"current_platform\.(\w+)(\(\))?")


class Effective(References):
    def ref_of(self, i: Input, parts: tuple[str, ...], n: ast.expr, depth: int, engine: bool) -> ast.expr:
        last = parts[-1]
        if i.kind == FLAG:
            if last.endswith("()") or "computes" in i.via or "keys given to" in i.via or "builds the config" in i.via:
                raise UnknownValue(f"{i.read[:80]}: computed from {i.key}, not its value")
            if "matched by name" in i.via:
                raise UnknownValue(f"{i.read[:80]}: a name matched to {i.key}, not followed")
            name, dot, key = i.key.partition(".")
            flag = self.flags_by_name.get(name)
            if flag is None:
                raise UnknownValue(f"{i.key}: not a flag of the model")
            if dot:
                cls = flag.parses_into or self.class_names.get(flag.dest.replace("_", "").lower(), "")
                how = self.how_set(cls, key) if cls else None
                if how == "set":
                    raise UnknownValue(f"{i.key}: vLLM's own code sets {cls}.{key}")
                if how == "default":
                    return self.named("flag-key-given", f"{flag.dest}.{key}", i.key)
                return self.named("flag-key", f"{flag.dest}.{key}", i.key)
            if engine or i.via.startswith("the field EngineArgs.") or flag.config_field is None:
                return self.flag(flag, engine_field=True)
            if flag.config_class in self.builds:
                return self.built_field(flag, depth)
            whole = self.parsed_into.get(flag.config_class or "")
            if whole is not None:  # the config comes whole from a JSON-valued flag: its key, not this flag
                key, shown = f"{whole.dest}.{flag.config_field}", f"{whole.name}.{flag.config_field}"
                how = self.how_set(flag.config_class or "", flag.config_field or "")
                if how == "set":
                    raise UnknownValue(f"{shown}: vLLM's own code sets {flag.config_class}.{flag.config_field}")
                return self.named("flag-key-given" if how == "default" else "flag-key", key, shown)
            raise UnknownValue(f"{flag.config_class}.{flag.config_field}: how vLLM builds {flag.config_class} is not read "
                           "by kb")
        if i.kind == CONFIG_JSON:
            if i.key == "config.json":
                raise UnknownValue(f"{i.read[:80]}: the whole config.json")
            if last.endswith("()") and last[:-2] not in ("get_total_num_kv_heads", "get_num_attention_heads",
                                                         "get_hidden_size", "get_num_layers", "get_vocab_size"):
                raise UnknownValue(f"{i.read[:80]}: computed by vLLM from config.json")
            return self.named("config-json", i.key, f"config.json {i.key}")
        if i.kind == ENV:
            if not re.fullmatch(r"[A-Z_][A-Z0-9_]*", i.key):
                raise UnknownValue(f"{i.read[:80]}: an environment variable named at run time")
            return self.named("env", i.key, i.key)
        if i.kind == INTERNAL and (i.via.startswith("the config object") or (
                len(parts) > 1 and last.replace("_", "").lower() in self.flag_rule.names)):  # self.lora_config
            return self.config_object(parts, depth)
        if i.kind == INTERNAL and i.via.startswith("the field ") and "which no `vllm serve` flag sets" in i.via:
            return self.internal_field(i, parts, depth)
        if i.kind == REQUEST_FIELD and i.via.startswith(f"the field {REQUEST_CLASS}."):  # `self.n` of its method
            if len(parts) != 2:  # `self.structured_outputs.json`: an attribute of a field's object
                raise UnknownValue(f"{'.'.join(parts)[:80]}: an attribute of the request's {i.key}, not followed")
            return self.request_field(i.key)
        if i.kind == HARDWARE:
            m = _PLATFORM_CALL.fullmatch(i.read)
            if m and m.group(1) in PLATFORMS["cuda"]:
                return self.named("platform", m.group(1), f"the platform ({m.group(1)})")
        raise UnknownValue(f"{i.read[:80]}: {i.kind} ({i.via[:80]})")

    def request_field(self, name: str) -> ast.expr:
        """A field of the request's sampling parameters as the guard reads it: the value the request
        gives (else the field's default), or unknown where SamplingParams' own `__post_init__` changes
        it before the site, under the conditions it does (`0 < temperature < _MAX_TEMP`)."""
        value = self.named("request", name, name)
        if self.in_own or self.how_set(REQUEST_CLASS, name) is None:
            return value  # read by the condition it is changed under: the value the request gives
        changed = self.own_changed_when(REQUEST_CLASS, name)
        if changed is None:
            raise UnknownValue(f"{name}: SamplingParams' own code sets it")
        unknown = self.named("unknown", f"{name} as vLLM sets it", f"{name}: SamplingParams' own code sets it")
        return ast.IfExp(changed, unknown, value)

    def flag(self, flag: Flag, engine_field: bool = False) -> ast.expr:
        """The flag's value as the guard reads it. When vLLM's own code may change it first: where
        EngineArgs changes it under conditions kb reads (`if self.x is None and ...: self.x = ...` in
        __post_init__ or create_engine_config), unknown only when they hold; else known only when
        given if the code only fills it when unset, else unknown. `engine_field`: the guard reads
        EngineArgs' own field (only EngineArgs' code sets it); else the config's field too."""
        value = self.named("flag", flag.dest, flag.name)
        if flag.dest in self.filling:
            return value  # read by the condition it is changed under: the value before
        if self.computed(flag, engine_field):
            return self.named("computed", flag.dest, f"{flag.name} as vLLM computes it")
        config_how = None if engine_field else self.how_set(flag.config_class or "", flag.config_field or "")
        engine_how = self.how_set("EngineArgs", flag.dest)
        if config_how is None and engine_how is not None:
            changed = self.changed_when(flag)
            if changed is not None:
                unknown = self.named("unknown", f"{flag.name} as vLLM sets it", f"{flag.name}: vLLM's own code sets it")
                return ast.IfExp(changed, unknown, value)
        hows = {config_how, engine_how}
        if "set" in hows:
            raise UnknownValue(f"{flag.name}: vLLM's own code sets it")
        if "default" in hows:
            return self.named("flag-given", flag.dest, flag.name)
        return value

    def computed(self, flag: Flag, engine_field: bool) -> bool:
        """vLLM sets the value before the site only where kb/checks/computed.py follows it (the
        functions of this release that it follows exactly)."""
        if flag.dest not in SET_IN or not modelled(self.model, flag.dest):
            return False
        if flag.config_class in self.fully_set or self.named_fill(flag.config_class or "", flag.config_field or ""):
            return False
        sets = [("EngineArgs", a) for a in self.effective("EngineArgs", flag.dest)]
        if not engine_field and flag.config_class and flag.config_field:
            sets += [(flag.config_class, a) for a in self.effective(flag.config_class, flag.config_field)]
        return bool(sets) and all((cls, method) in SET_IN[flag.dest] for cls, (_, method, _, _) in sets)

    def only_none_filled(self, cls: str, field_name: str) -> bool:
        """Nothing sets the field before the site but VllmConfig._set_config_default, which fills
        a field by name only when it is None."""
        return not self.effective(cls, field_name) and cls not in self.fully_set and \
            self.named_fill(cls, field_name) == "default"

    def named_fill(self, cls: str, field_name: str) -> Optional[str]:
        """How VllmConfig's code may set the field by name (`setattr(config_obj, key, value)`) before
        a site that runs once VllmConfig is built: "default", "set", or None when it does not (its
        by-name setters fill only the keys of the defaults tables they walk: kb.config.byname.name_filled)."""
        if not self.late_site or "VllmConfig" not in self.anything_set:
            return None
        if self.by_name_setters and all(self.runs_after("VllmConfig", m, self.read_line or self.here[2])
                                        for m in self.by_name_setters.get("VllmConfig", {"?"})):
            return None  # its by-name setters run only after the site
        known = self.by_name.get("VllmConfig")
        if known is not None:
            key = cls.replace("_", "").lower()
            if not any((not holder and cls == "VllmConfig" and name == field_name) or
                       (holder and holder.replace("_", "").lower() == key and name == field_name)
                       for holder, name in known):
                return None
        return self.anything_set["VllmConfig"]

    def own_changed_when(self, cls: str, field_name: str) -> Optional[ast.expr]:
        """When a config's own __post_init__ changes one of its fields before the site (SchedulerConfig
        turns chunked prefill off `if is_encoder_decoder`): those conditions, read in __post_init__
        (its InitVars are what create_engine_config passes), joined by `or`; None when one is not
        read, or the change is elsewhere. Only for a site of that class: its file is the class's."""
        if self.here[0] != cls or cls in self.fully_set or self.named_fill(cls, field_name) or self.in_own:
            return None  # not inside another such condition: one level, so the check stays small
        conditions: list[ast.expr] = []
        scope = Scope(self.site_file, cls, "__post_init__")
        for _, method, _, when in self.effective(cls, field_name):
            if method != "__post_init__" or when in ("", "?"):
                return None
            saved = dict(self.refs)
            self.in_own = True
            try:
                conditions.append(self.term(when, scope, 1))
            except NotCheckable:
                self.refs = saved
                return None
            finally:
                self.in_own = False
        if not conditions:
            return None
        return conditions[0] if len(conditions) == 1 else ast.BoolOp(ast.Or(), conditions)

    def changed_when(self, flag: Flag) -> Optional[ast.expr]:
        """When EngineArgs' own code changes the field before the site: the conditions of its
        assignments (in create_engine_config or __post_init__, read in EngineArgs' scope; one that
        only fills an unset value also needs the flag not given), joined by `or`; None when one
        is not read."""
        conditions: list[ast.expr] = []
        for how, method, _, when in self.effective("EngineArgs", flag.dest):
            if when in ("", "?") or method not in ("create_engine_config", "__post_init__"):
                return None
            saved = dict(self.refs)
            self.filling.add(flag.dest)
            try:
                condition = self.term(when, ENGINE_SCOPE, 1, engine=True)
            except NotCheckable:
                self.refs = saved
                return None
            finally:
                self.filling.discard(flag.dest)
            if how == "default":
                condition = ast.BoolOp(ast.And(), [ast.UnaryOp(ast.Not(), self.given(flag)), condition])
            conditions.append(condition)
        if not conditions:
            return None
        return conditions[0] if len(conditions) == 1 else ast.BoolOp(ast.Or(), conditions)

    def how_set(self, cls: str, field_name: str) -> Optional[str]:
        """"set" when vLLM's own code may change the field before the site raises, "default" when it only
        fills it when unset, None when it does not set it: an assignment later in the site's own
        function does not count."""
        if cls in self.fully_set and not self.runs_first(cls):
            return "set"
        hows = {how for how, _, _, _ in self.effective(cls, field_name)}
        by_name = self.named_fill(cls, field_name)  # VllmConfig sets fields by name first
        if by_name:
            hows.add(by_name)
        return "set" if "set" in hows else "default" if hows else None

    def runs_after(self, cls: str, method: str, line: int, assigned_at: int = 0) -> bool:
        """What `method` does (at `assigned_at`) runs after the site (at `line` of its own function):
        the config's __post_init__ first runs `method`, or runs that line of itself, after it runs the
        site, as kb.config.order.post_init_order reads it; False when not known."""
        _, function, _ = self.here
        at = line if function == "__post_init__" else self.post_init_order.get((cls, function))
        if at is None:
            return False
        if method == "__post_init__":
            return function != "__post_init__" and assigned_at > at
        first = self.post_init_order.get((cls, method))
        return first is not None and first > at

    def runs_first(self, cls: str) -> bool:
        """The site runs as the config is made, before any other class's code may touch it: a
        field validator of that config, or a check of a config vLLM's parser makes from a flag's JSON."""
        return self.validating == cls or (self.parsed_by is not None and self.parsed_by[1] == cls)

    def effective(self, cls: str, field_name: str) -> list[tuple[str, str, int, str]]:
        """The assignments of a field that may run before the site: not those later in its own
        function, nor, for a site that runs before VllmConfig is built, those of VllmConfig's own
        methods and of the config methods VllmConfig.__post_init__ calls."""
        owner, function, line = self.here
        line = self.read_line if self.read_line is not None else line
        out = []
        for a in self.assignments.get((cls, field_name), []):
            container, _, method = a[1].rpartition(".")  # "VllmConfig.__post_init__" for a field set through a holder
            container = container or cls
            if container == owner and method == function and a[2] > line:
                continue
            if self.validating and container == self.validating:
                continue  # the config's own code runs after its field validators
            if self.parsed_by is not None and container != self.parsed_by[1]:
                continue  # built by vLLM's parser from the flag's JSON: no other code has run yet
            if container == owner and self.runs_after(owner, method, line, a[2]):
                continue  # __post_init__ calls that method only after the site
            if not self.late_site and (container == "VllmConfig" or method in self.late_methods):
                continue
            out.append(a)
        return out

    def given(self, flag: Flag) -> ast.expr:
        """True when the command gives the flag."""
        return self.named("given", flag.dest, f"{flag.name} given")

    def config_object(self, parts: tuple[str, ...], depth: int) -> ast.expr:
        """A config object (`self.lora_config is not None`): True when vLLM builds it, else None."""
        key = parts[-1].replace("_", "").lower()  # exactly its class: a draft_model_config is not the ModelConfig
        cls = self.flag_rule.names.get(key) or next((c for c in self.parsed_into if c.replace("_", "").lower() == key), None)
        if cls is None:
            raise UnknownValue(f"{'.'.join(parts)}: a config kb does not know")
        build = self.builds.get(cls)
        if build is not None and build.when != "?":
            if not build.when:
                return ast.Constant(True)
            return ast.IfExp(self.term(build.when, ENGINE_SCOPE, depth + 1, engine=True), ast.Constant(True),
                             ast.Constant(None))
        flag = self.parsed_into.get(cls)
        if flag is not None and flag.default is None and flag.default_exact:
            return ast.IfExp(self.given(flag), ast.Constant(True), ast.Constant(None))
        if flag is not None and isinstance(flag.default, str) and flag.default.startswith(cls + "("):
            return ast.Constant(True)  # its default is an instance: always built
        raise UnknownValue(f"{'.'.join(parts)}: when vLLM builds {cls} is not read by kb")

    def internal_field(self, i: Input, parts: tuple[str, ...], depth: int) -> ast.expr:
        """A field no flag sets (`ModelConfig.is_submodel_config`): what create_engine_config passes
        for it, else its class's default, when vLLM's own code never sets it."""
        cls, _, name = i.key.partition(".")
        if "." in name or not name or parts[-1] != name:  # `self.prefetch.offload_group_size`: not `prefetch`
            raise UnknownValue(f"{i.read[:80]}: internal ({i.via[:80]})")
        build = self.builds.get(cls)
        if self.how_set(cls, name) is not None:
            flag = next((f for f in self.model.flags if (f.config_class, f.config_field) == (cls, name)), None)
            if flag is not None and self.computed(flag, engine_field=False):
                return self.named("computed", flag.dest, f"{flag.name} as vLLM computes it")
            value = self.class_defaults.get((cls, name), _ABSENT)
            if not (self.only_none_filled(cls, name) and (build is None or name not in dict(build.args))
                    and isinstance(value, (str, int, float, bool))):
                raise UnknownValue(f"{i.key}: vLLM's own code sets it")
            return ast.Constant(value)  # VllmConfig fills by name only what is None: its default stays
        source = dict(build.args).get(name) if build is not None else None
        if source is not None:
            return self.term(source, ENGINE_SCOPE, depth + 1, engine=True)
        if build is not None and build.spread:
            raise UnknownValue(f"{i.key}: create_engine_config may pass it in **kwargs")
        value = self.class_defaults.get((cls, name), _ABSENT)
        if not (value is None or isinstance(value, (str, int, float, bool))):
            raise UnknownValue(f"{i.read[:80]}: internal ({i.via[:80]})")
        return ast.Constant(value)

    def built_field(self, flag: Flag, depth: int) -> ast.expr:
        """The field as create_engine_config builds its config: what the call passes for it."""
        assert flag.config_class is not None
        build = self.builds[flag.config_class]
        source = dict(build.args).get(flag.config_field or "")
        if self.computed(flag, engine_field=False):
            return self.named("computed", flag.dest, f"{flag.name} as vLLM computes it")
        how = self.how_set(flag.config_class, flag.config_field or "")
        if how == "set":
            own = self.own_changed_when(flag.config_class, flag.config_field or "")
            if own is None or source is None:
                raise UnknownValue(f"{flag.config_class}.{flag.config_field}: vLLM's own code sets it")
            changed = self.named("unknown", f"{flag.config_class}.{flag.config_field} as vLLM sets it",
                                 f"{flag.config_class}.{flag.config_field}: vLLM's own code sets it")
            return ast.IfExp(own, changed, self.term(source, ENGINE_SCOPE, depth + 1, engine=True))
        if how == "default":
            if source is not None and source != f"self.{flag.dest}":
                raise UnknownValue(f"{flag.config_class}.{flag.config_field}: built from `{source[:60]}` and set again by "
                               "vLLM's own code")
            return self.named("flag-given", flag.dest, flag.name)  # its value is known only when given
        if source is None:
            if build.spread:
                return self.flag(flag)
            raise UnknownValue(f"{flag.config_class}.{flag.config_field}: not passed by create_engine_config, so "
                        f"{flag.name} does not set it there")
        return self.term(source, ENGINE_SCOPE, depth + 1, engine=True)
