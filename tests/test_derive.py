"""Checks derived from vLLM's own guards (kb/checks/derive.py), on a small vLLM-shaped tree in
tmp_path: the guard with its early exits, the arguments create_engine_config builds a config
with and the condition it builds it under; values vLLM sets itself known only when given;
unknown inputs that only matter when vLLM's condition reaches them; the reasons a site is not
checkable; the derived predictions in `kb check`; the index's JSON form."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kb.checks.compiled import DerivedIndex
from kb.checks.derive import derive
from kb.checks.evaluate import evaluate
from kb.checks.facts import facts_of, run
from kb.checks.launch_check import check_one
from kb.checks.report import outcome_json
from kb.errors import ExprError
from kb.jobs import scan_release
from kb.model import ScanResult
from kb.records.merge import build_records
from kb.scan.source import SourceSpec
from test_sets import ARG_UTILS_DCP, PARALLEL_DCP, dcp_tree

PARALLEL_DERIVE = PARALLEL_DCP.replace("from vllm.config.utils import config\n", '''from vllm.config.utils import config
from vllm.platforms import current_platform
''') + '''

    def __post_init__(self):
        if self.disable_custom_all_reduce is None:
            self.disable_custom_all_reduce = self.tensor_parallel_size == 1
        if self.disable_custom_all_reduce is None:
            raise ValueError("custom all-reduce undecided")
        if self.tensor_parallel_size > 8 and self.some_internal_thing():
            raise ValueError("needs the internal thing")
        if self.enable_expert_parallel and self.tensor_parallel_size > 4:
            raise ValueError(f"expert parallel caps tp at 4, got {self.tensor_parallel_size}")
        if self.master_port < 1024 and current_platform.is_cuda():
            raise ValueError("privileged port on CUDA")
        for size in self.sizes:
            if size < 0:
                raise ValueError("a negative size")
        if self.distributed_executor_backend is None:
            return
        if self.tensor_parallel_size % self.decode_context_parallel_size != 0:
            raise ValueError("tp must be divisible by dcp when a backend is set")


@config
class LoRAConfig:
    max_loras: int = 1
    """Max LoRAs in a batch."""
    spare: int = Field(default=1, ge=1)
    """Spare slots."""

    def __post_init__(self):
        if self.max_loras > 4:
            raise ValueError("at most 4 LoRAs")
'''
ARG_UTILS_DERIVE = ARG_UTILS_DCP.replace(
    "from vllm.config import ModelConfig, ParallelConfig", "from vllm.config import LoRAConfig, ModelConfig, ParallelConfig"
).replace('''    port: int = envs.VLLM_PORT
''', '''    port: int = envs.VLLM_PORT
    enable_lora: bool = False
    max_loras: int = LoRAConfig.max_loras

    def create_engine_config(self):
        parallel_config = ParallelConfig(
            tensor_parallel_size=self.tensor_parallel_size,
            decode_context_parallel_size=self.decode_context_parallel_size,
            distributed_executor_backend=self.distributed_executor_backend,
            enable_expert_parallel=self.enable_expert_parallel,
            disable_custom_all_reduce=self.disable_custom_all_reduce,
            master_port=self.master_port,
            sizes=self.sizes,
        )
        lora_config = LoRAConfig(max_loras=self.max_loras, spare=self.max_loras - 1) if self.enable_lora else None
        return parallel_config, lora_config
''').replace('''        parser.add_argument("--disable-log-stats",''', '''        lora_kwargs = get_kwargs(LoRAConfig)
        lora_group = parser.add_argument_group(title="LoRAConfig")
        lora_group.add_argument("--enable-lora", action=argparse.BooleanOptionalAction, default=False,
                                help="Enable LoRA adapters.")
        lora_group.add_argument("--max-loras", **lora_kwargs["max_loras"])
        parser.add_argument("--disable-log-stats",''')


@pytest.fixture
def derive_scan(tmp_path: Path) -> ScanResult:
    root = dcp_tree(tmp_path / "tree")
    (root / "vllm/config/parallel.py").write_text(PARALLEL_DERIVE)
    (root / "vllm/engine/arg_utils.py").write_text(ARG_UTILS_DERIVE)
    return scan_release(SourceSpec(source_dir=str(root)), use_cache=False)


def index_of(scan: ScanResult) -> DerivedIndex:
    return derive(scan.sites, scan.config)


def ids(scan: ScanResult) -> dict[str, str]:
    return {s.template: s.id for s in scan.sites}


def first_ids(scan: ScanResult, *argv: str) -> list[str]:
    records = build_records(scan)
    out = check_one(records, scan.config, ["vllm", "serve", "org/m", *argv], None, None, with_valid=False)
    assert out.parse_error is None, out.parse_error
    return [p.record.template for p in out.predicted]


def test_the_builds_and_the_fields_vllm_sets_are_read_from_the_source(derive_scan: ScanResult) -> None:
    model = derive_scan.config
    assert model is not None
    builds = {b.config_class: b for b in model.builds}
    assert builds["ParallelConfig"].when == ""
    assert dict(builds["ParallelConfig"].args)["decode_context_parallel_size"] == "self.decode_context_parallel_size"
    assert builds["LoRAConfig"].when == "self.enable_lora"
    assert [a[:3] for a in model.assigned if a[1] == "disable_custom_all_reduce"] == [
        ("ParallelConfig", "disable_custom_all_reduce", "default")]  # only under `if ... is None:`


def test_each_guard_becomes_vllms_own_condition_over_launch_values(derive_scan: ScanResult) -> None:
    index = index_of(derive_scan)
    by_template = {derive_scan.sites[[s.id for s in derive_scan.sites].index(c.record_id)].template: c
                   for c in index.checks}
    dcp = by_template["tp must be divisible by dcp when a backend is set"]
    # the early exit before it (`if backend is None: return`) is part of its condition
    assert {r.kind for r in dcp.refs} == {"flag"}
    assert {r.shown for r in dcp.refs} == {"--tensor-parallel-size", "--decode-context-parallel-size",
                                           "--distributed-executor-backend"}
    lora = by_template["at most 4 LoRAs"]
    assert {(r.kind, r.shown) for r in lora.refs} == {("flag", "--enable-lora"), ("flag", "--max-loras")}
    loop = by_template["a negative size"]  # raised in `for size in self.sizes`: any of its items
    assert loop.expr.startswith("any(") and [r.shown for r in loop.refs] == ["--sizes"]
    assert any("nothing in its file calls it" in u.reason for u in index.uncheckable)  # verify_with_parallel_config
    assert DerivedIndex.from_json(json.loads(json.dumps(index.to_json()))) == index


def test_kb_check_predicts_what_the_derived_conditions_raise(derive_scan: ScanResult) -> None:
    assert "tp must be divisible by dcp when a backend is set" not in first_ids(derive_scan, "-tp", "3", "-dcp", "2")
    assert "tp must be divisible by dcp when a backend is set" in first_ids(
        derive_scan, "-tp", "3", "-dcp", "2", "--distributed-executor-backend", "mp")
    assert "at most 4 LoRAs" not in first_ids(derive_scan, "--max-loras", "8")  # LoRAConfig is not built
    assert "at most 4 LoRAs" in first_ids(derive_scan, "--enable-lora", "--max-loras", "8")
    assert "at most 4 LoRAs" not in first_ids(derive_scan, "--enable-lora", "--max-loras", "4")
    assert "privileged port on CUDA" in first_ids(derive_scan, "--master-port", "80")  # the platform: CUDA
    assert "privileged port on CUDA" not in first_ids(derive_scan, "--master-port", "8000")
    assert "a negative size" in first_ids(derive_scan, "--sizes", "1", "-2")
    assert "a negative size" not in first_ids(derive_scan, "--sizes", "1", "2")


def test_the_constraints_of_what_create_engine_config_passes(derive_scan: ScanResult) -> None:
    records = build_records(derive_scan)

    def failures(*argv: str) -> list[str]:
        out = check_one(records, derive_scan.config, ["vllm", "serve", "m", *argv], None, None, with_valid=False)
        return [v.printed for v in out.validation]

    assert failures("--enable-lora", "--max-loras", "1") == [  # spare=self.max_loras - 1 is 0
        "1 validation error for LoRAConfig\nspare\n  Input should be greater than or equal to 1 "
        "[type=greater_than_equal, input_value=0, input_type=int]"]
    assert failures("--max-loras", "1") == []  # LoRAConfig is not built
    assert failures("--enable-lora", "--max-loras", "2") == []


def test_the_message_is_filled_with_the_launchs_values(derive_scan: ScanResult) -> None:
    records = build_records(derive_scan)
    out = check_one(records, derive_scan.config, ["vllm", "serve", "m", "-ep", "-tp", "8"], None, None)
    messages = [p.message for p in out.predicted]
    assert "expert parallel caps tp at 4, got 8" in messages
    data = json.loads(outcome_json(out))
    assert {"id", "template", "message"} <= set(data["predicted"][0])


def test_a_value_vllm_sets_itself_is_known_only_when_given(derive_scan: ScanResult) -> None:
    assert "custom all-reduce undecided" not in first_ids(derive_scan)  # vLLM decides it before the guard
    records = build_records(derive_scan)
    out = check_one(records, derive_scan.config, ["vllm", "serve", "m"], None, None)
    unknown = {s.record.template: s.missing for s in out.unknown}
    assert unknown["custom all-reduce undecided"] == ("--disable-custom-all-reduce",)


def test_an_unknown_input_matters_only_where_the_condition_reaches_it(derive_scan: ScanResult) -> None:
    index = index_of(derive_scan)
    template_of = {s.id: s.template for s in derive_scan.sites}
    check = next(c for c in index.checks if template_of[c.record_id] == "needs the internal thing")
    assert [r.kind for r in check.refs if "some_internal_thing" in r.shown] == ["unknown"]
    model = derive_scan.config
    assert model is not None
    assert run(check, facts_of(model, {"tensor_parallel_size": 2}, {}), "").raises is False  # short-circuits
    verdict = run(check, facts_of(model, {"tensor_parallel_size": 16}, {}), "")
    assert verdict.raises is None and verdict.missing[0].startswith("self.some_internal_thing()")


def test_the_derived_evaluator_stays_within_its_whitelist() -> None:
    assert evaluate("not isinstance(x, (int, float)) and x.startswith('a')", {"x": 1}, derived=True) is False
    assert evaluate("x.lower().startswith('fp8')", {"x": "FP8_E4M3"}, derived=True) is True
    assert evaluate("d.get('k', 3) + len(set(xs))", {"d": {}, "xs": [1, 1, 2]}, derived=True) == 5
    assert evaluate("any(a >= b for a, b in pairs) or [x[1:] for x in xs if x]", {"pairs": [[1, 2]], "xs": ["", "ab"]},
                    derived=True) == ["b"]
    with pytest.raises(ExprError):  # a comprehension is bounded like any other value
        evaluate("[a for a in xs for b in xs for c in xs]", {"xs": list(range(200))}, derived=True)
    for bad in ("x.__class__", "x.format(1)", "isinstance(x, object)", "open('f')", "x.split() * 10**9"):
        with pytest.raises(ExprError):
            evaluate(bad, {"x": "a b"}, derived=True)
    with pytest.raises(ExprError):  # curated checks keep the narrow set the page's script knows
        evaluate("x.lower()", {"x": "A"})


def test_valid_values_of_a_derived_prediction(derive_scan: ScanResult) -> None:
    records = build_records(derive_scan)
    out = check_one(records, derive_scan.config, ["vllm", "serve", "m", "--enable-lora", "--max-loras", "8"], None, None)
    lora = next(p for p in out.predicted if p.record.template == "at most 4 LoRAs")
    assert out.valid[lora.record.id] == {"--max-loras": [1, 2, 3, 4]}
    data = json.loads(outcome_json(out))
    shown = next(p for p in data["predicted"] if p["template"] == "at most 4 LoRAs")
    assert shown["validValues"] == {"--max-loras": [1, 2, 3, 4]} and shown["source"] == "derived"


def test_a_hostile_guard_is_bounded(tmp_path: Path) -> None:
    """Locals that double at each step (x1 = x0 + x0, ...) and a guard nested deep: the derived
    check is refused or kept small, in bounded time, never a crash."""
    import signal

    chain = "\n".join(f"        x{i} = x{i - 1} + x{i - 1}" for i in range(1, 40))
    deep = "(" * 200 + "self.tensor_parallel_size" + ")" * 200
    hostile = PARALLEL_DERIVE.replace('''    def __post_init__(self):
''', f'''    def __post_init__(self):
        x0 = self.tensor_parallel_size
{chain}
        if x39 > 0:
            raise ValueError("doubled")
        if {deep} > 1:
            raise ValueError("deep")
''')
    root = dcp_tree(tmp_path / "tree")
    (root / "vllm/config/parallel.py").write_text(hostile)
    (root / "vllm/engine/arg_utils.py").write_text(ARG_UTILS_DERIVE)
    scan = scan_release(SourceSpec(source_dir=str(root)), use_cache=False)
    signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(TimeoutError("derive took too long")))
    signal.alarm(60)
    try:
        index = derive(scan.sites, scan.config)
    finally:
        signal.alarm(0)
    templates = {s.id: s.template for s in scan.sites}
    for c in index.checks:
        assert len(c.expr) <= 10_000, templates[c.record_id]
    assert {"doubled", "deep"} <= {templates[c.record_id] for c in (*index.checks, *index.uncheckable)}
    records = build_records(scan)
    out = check_one(records, scan.config, ["vllm", "serve", "m", "-tp", "2"], None, None)
    assert out.parse_error is None


def test_a_configs_own_change_under_an_initvar_is_read_with_its_condition(tmp_path: Path) -> None:
    """`if grow: self.max_loras = 0` in LoRAConfig.__post_init__, where `grow` is an InitVar that
    create_engine_config passes: the check that reads max_loras afterwards is vLLM's condition
    with the change in it (unknown only where `grow` holds)."""
    root = dcp_tree(tmp_path / "tree")
    parallel = PARALLEL_DERIVE.replace('''    def __post_init__(self):
        if self.max_loras > 4:
            raise ValueError("at most 4 LoRAs")''', '''    def __post_init__(self, grow: bool):
        if grow:
            self.max_loras = 0
        self.verify()

    def verify(self):
        if self.max_loras > 4:
            raise ValueError("at most 4 LoRAs")''')
    assert parallel != PARALLEL_DERIVE
    (root / "vllm/config/parallel.py").write_text(parallel)
    (root / "vllm/engine/arg_utils.py").write_text(ARG_UTILS_DERIVE.replace(
        "spare=self.max_loras - 1)", "spare=self.max_loras - 1, grow=self.max_loras > 6)"))
    scan = scan_release(SourceSpec(source_dir=str(root)), use_cache=False)
    assert scan.config is not None
    check = next(c for c in index_of(scan).checks if c.record_id == ids(scan)["at most 4 LoRAs"])
    assert "if" in check.expr and {r.shown for r in check.refs if r.kind == "flag"} >= {"--max-loras", "--enable-lora"}

    def raises(*flags: tuple[str, object]) -> object:
        return run(check, facts_of(scan.config, dict(flags), {}), "").raises  # type: ignore[arg-type]

    assert raises(("enable_lora", True), ("max_loras", 5)) is True
    assert raises(("enable_lora", True), ("max_loras", 3)) is False
    assert raises(("enable_lora", True), ("max_loras", 7)) is None  # vLLM sets it to 0 first: kb cannot say
    assert raises(("max_loras", 5)) is False  # LoRAConfig is not built


# --- what kb reads of a tree to decide more of vLLM's guards ---------------------------------------
def test_a_condition_is_decided_by_the_operand_that_decides_it() -> None:
    from kb.checks.evaluate import holds
    from kb.errors import MissingInput

    assert holds("unknown or x > 1", {"x": 2}) is True  # whatever `unknown` is
    assert holds("unknown and x > 1", {"x": 0}) is False
    with pytest.raises(MissingInput):
        holds("unknown or x > 1", {"x": 0})
    with pytest.raises(MissingInput):  # vLLM may fail evaluating `y > 1` (None > 1) when `unknown` is false
        holds("unknown or y > 1 or x", {"x": True, "y": None})
    assert holds("(['a'] if unknown else []) + list(['b'] if x else [])", {"x": True}) is True  # a list joined


def _tree(files: dict[str, str]) -> tuple[list[str], Any]:
    import textwrap

    data = {p: textwrap.dedent(t).encode() for p, t in files.items()}
    return list(data), data.__getitem__


def test_module_values_literal_aliases_flag_enums_and_registries_only_plugins_fill() -> None:
    from kb.checks.facts import constant_value
    from kb.config.modules import Modules
    from kb.config.names import module_names

    paths, read = _tree({
        "vllm/config/spec.py": '''
            import enum
            from typing import Literal
            from vllm.registry import registered
            Inner = Literal["b", "c"]
            Method = Literal["a", Inner]
            FIXED = ("x", "y")
            GROWS = ["x"]
            class Access(enum.IntFlag):
                NONE = 0
                FD = enum.auto()
                IPC = enum.auto()
            def check(value, access):
                if value not in get_args(Method) and value not in registered() and value in FIXED:
                    raise ValueError("no")
                if value in GROWS or Access.FD in access:
                    raise ValueError("no")
            def grow(name):
                GROWS.append(name)
            ''',
        "vllm/registry.py": '''
            _BY_NAME = {}
            def register(name, cls):
                """Called by a plugin."""
                _BY_NAME[name] = cls
            def registered():
                return sorted(_BY_NAME)
            ''',
    })
    got = {(n, k): v for _, n, k, v in module_names(Modules(paths, read), paths, read)}
    assert got[("Method", "literal")] == ["a", "b", "c"]  # flattened, as typing.get_args
    assert constant_value(json.dumps(got[("FIXED", "value")])) == ("x", "y")
    assert ("GROWS", "value") not in got  # a list its module changes
    assert got[("registered", "call")] == ["list", []]  # nothing in the tree calls register()
    assert got[("Access", "enum")] == ["Access", [["NONE", 0], ["FD", 1], ["IPC", 2]]]
    paths2, read2 = _tree({**{p: read(p).decode() for p in paths}, "vllm/plugins.py": '''
        from vllm.registry import register
        register("mine", object)
        '''})
    assert ("registered", "call") not in {(n, k) for _, n, k, _ in module_names(Modules(paths2, read2), paths2, read2)}


def test_members_chains_collected_lists_and_exits_are_read_as_expressions() -> None:
    import ast
    import textwrap

    from kb.config.flow import _chains, _collectors, _exits
    from kb.config.members import summarize

    source = textwrap.dedent('''
        class C:
            @property
            def both(self):
                """Doc."""
                return self.a or self.b > 1

            def unsupported(self):
                out: list[str] = []
                parallel = self.parallel_config
                if self.lora is not None:
                    out.append("lora")
                if parallel.pp > 1:
                    out.append(f"pp {parallel.pp}")
                    logger.info("pp")
                return out

            def resolve(self):
                if self.resolved:
                    return
                self.resolved = True
                reason = None
                x = self.x
                if x is None:
                    reason = "unset"
                elif x > 3:
                    reason = "large"
                blockers = []
                tp = self.tp
                if tp <= 1:
                    blockers.append("tp")
                if reason is not None or blockers:
                    raise ValueError(reason)
        ''')
    cls = ast.parse(source).body[0]
    assert isinstance(cls, ast.ClassDef)
    fns = {f.name: f for f in cls.body if isinstance(f, ast.FunctionDef)}
    assert summarize(fns["both"]) == "self.a or self.b > 1"
    assert summarize(fns["unsupported"]) == ("(['lora'] if self.lora is not None else []) + "
                                             "(['pp ' + str(self.parallel_config.pp)] if self.parallel_config.pp > 1 else [])")
    assert _exits(fns["resolve"]) == [(19, "not self.resolved")]
    assert _chains(fns["resolve"]) == [("reason", 22, 27, "'unset' if x is None else 'large' if x > 3 else None")]
    assert _collectors(fns["resolve"]) == [("blockers", 28, 31, "['tp'] if self.tp <= 1 else []")]


def test_what_a_by_name_setter_fills_and_when_post_init_runs_each_method() -> None:
    from kb.config.byname import name_filled
    from kb.config.interp import Reader
    from kb.config.modules import Modules
    from kb.config.order import post_init_order

    paths, read = _tree({"vllm/config/vllm.py": '''
        LEVEL_0 = {"compilation_config": {"mode": 0, "pass_config": {"fuse": False}}}
        LEVEL_1 = {"compilation_config": {"mode": 3}}
        LEVELS = {0: LEVEL_0, 1: LEVEL_1}
        class VllmConfig:
            def _set_default(self, config_obj, key, value):
                if getattr(config_obj, key) is None:
                    setattr(config_obj, key, value)
            def _apply(self, defaults):
                def walk(config_obj, config_defaults):
                    for key, value in config_defaults.items():
                        current = getattr(config_obj, key)
                        if isinstance(value, dict):
                            walk(current, value)
                        else:
                            self._set_default(config_obj, key, value)
                walk(self, defaults)
            def __post_init__(self):
                self._check()
                default = LEVELS[self.level]
                self._apply(default)
            def _check(self):
                self._inner()
            def _inner(self):
                pass
        '''})
    reader = Reader(Modules(paths, read))
    assert set(name_filled(reader)) == {
        ("VllmConfig", "_set_default", "", "compilation_config"), ("VllmConfig", "_set_default", "compilation_config", "mode"),
        ("VllmConfig", "_set_default", "compilation_config", "pass_config"),
        ("VllmConfig", "_set_default", "pass_config", "fuse")}
    assert set(post_init_order(reader)) == {("VllmConfig", "_check", 19), ("VllmConfig", "_inner", 19),
                                            ("VllmConfig", "_apply", 21), ("VllmConfig", "_set_default", 21)}


def test_a_create_method_that_fills_the_attribute_it_tests_is_read_with_its_loop() -> None:
    import ast
    import textwrap

    from kb.config.exits import exits_before

    fn = ast.parse(textwrap.dedent('''
        def create_spec_config(self):
            for flag, key, value in (("--m", "method", self.m), ("--n", "n", self.n)):
                if value is None:
                    continue
                if self.spec is None:
                    self.spec = {}
                if key in self.spec:
                    raise ValueError(flag)
                self.spec[key] = value
            if self.spec is None:
                return None
            return SpecConfig(**self.spec)
        ''')).body[0]
    assert isinstance(fn, ast.FunctionDef)
    assert exits_before(fn.body, 13, own=True) == (
        "not self.m is None or not self.n is None or (not self.spec is None)",)
    assert exits_before(fn.body, 13) == ("not self.spec is None",)
