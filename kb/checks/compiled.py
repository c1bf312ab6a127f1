"""A check derived from vLLM's guard, as data: the condition over named values (`Ref`), what
create_engine_config passes for constrained fields (`Passed`), the sites that cannot be checked
and why; compiled by kb/checks/derive.py, run by kb/checks/facts.py, cached as JSON."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

DERIVED_FORMAT = "kb-derived/1"

# What vLLM's platform answers on the hardware `kb check` assumes: an NVIDIA GPU (CUDA), as the
# oracle fakes it (bench/oracle/). A platform call not listed is not known before launch.
PLATFORMS: dict[str, dict[str, Any]] = {
    "cuda": {"is_cuda": True, "is_cuda_alike": True, "is_rocm": False, "is_tpu": False, "is_xpu": False,
             "is_cpu": False, "is_out_of_tree": False, "is_neuron": False, "is_hpu": False,
             "is_sleep_mode_available": True, "is_cumem_allocator_available": True, "is_pin_memory_available": True,
             "is_async_output_supported": True, "device_type": "cuda", "device_name": "cuda", "simple_compile_backend": "inductor",
             "dispatch_key": "CUDA", "ray_device_key": "GPU", "device_control_env_var": "CUDA_VISIBLE_DEVICES"},
}


@dataclass(frozen=True)
class Ref:
    """One value a derived check reads: `name` in its expression."""

    name: str
    kind: str  # flag, flag-given (its value known only when given), flag-key (flag-key-given), given, config-json,
    # env, platform, computed (what vLLM computes before its guards: kb/checks/computed.py), value (a
    # module-level value of vLLM's source: kb.config.names; `key` is its tagged JSON),
    # unknown (what kb cannot give before launch: `shown` says why)
    key: str  # the flag's dest; "dest.key" of a JSON-valued flag; the config.json key; the variable; the call
    shown: str  # as users name it: --tensor-parallel-size, config.json num_attention_heads

    def to_json(self) -> list[str]:
        return [self.name, self.kind, self.key, self.shown]


@dataclass(frozen=True)
class Derived:
    """vLLM's condition for one raise site, over launch-time values."""

    record_id: str
    file: str
    line: int
    expr: str
    refs: tuple[Ref, ...]
    message: tuple[tuple[str, str], ...] = ()  # placeholder of the template -> its compiled expression
    # the JSON-valued flag (its dest) whose value vLLM's parser turns into the config the raise is
    # in: the error stops the command line, wrapped by pydantic (kb/checks/launch_check.py)
    parsed_by: str = ""
    config_class: str = ""
    field: str = ""  # the field a field validator checks; "" for __post_init__ and model validators

    def to_json(self) -> list[Any]:
        return [self.record_id, self.file, self.line, self.expr, [r.to_json() for r in self.refs],
                [list(m) for m in self.message], self.parsed_by, self.config_class, self.field]

    @staticmethod
    def from_json(d: list[Any]) -> Derived:
        return Derived(d[0], d[1], d[2], d[3], tuple(Ref(*r) for r in d[4]), tuple((m[0], m[1]) for m in d[5]),
                       d[6], d[7], d[8])


@dataclass(frozen=True)
class Passed:
    """What create_engine_config passes for a field with pydantic constraints (`data_parallel_rank=
    self.data_parallel_rank or 0`), over launch values; `when`: the condition the config is built
    under ("" always)."""

    config_class: str
    field: str
    expr: str
    when: str
    refs: tuple[Ref, ...]
    constraints: tuple[tuple[str, Any], ...]

    def to_json(self) -> list[Any]:
        return [self.config_class, self.field, self.expr, self.when, [r.to_json() for r in self.refs],
                [list(c) for c in self.constraints]]

    @staticmethod
    def from_json(d: list[Any]) -> Passed:
        return Passed(d[0], d[1], d[2], d[3], tuple(Ref(*r) for r in d[4]), tuple((c[0], c[1]) for c in d[5]))


@dataclass(frozen=True)
class Uncheckable:
    record_id: str
    file: str
    line: int
    reason: str


@dataclass(frozen=True)
class DerivedIndex:
    """The derived checks of one tree, and why the other config-time sites are not checkable."""

    checks: tuple[Derived, ...]
    uncheckable: tuple[Uncheckable, ...]
    passed: tuple[Passed, ...] = ()

    @property
    def sites(self) -> int:
        return len(self.checks) + len(self.uncheckable)

    def to_json(self) -> dict[str, Any]:
        return {"format": DERIVED_FORMAT, "checks": [c.to_json() for c in self.checks],
                "uncheckable": [[u.record_id, u.file, u.line, u.reason] for u in self.uncheckable],
                "passed": [p.to_json() for p in self.passed]}

    @staticmethod
    def from_json(d: dict[str, Any]) -> DerivedIndex:
        if d.get("format") != DERIVED_FORMAT:
            raise ValueError(f"not {DERIVED_FORMAT}")
        return DerivedIndex(tuple(Derived.from_json(c) for c in d["checks"]),
                            tuple(Uncheckable(*u) for u in d["uncheckable"]),
                            tuple(Passed.from_json(p) for p in d["passed"]))
