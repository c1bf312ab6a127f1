"""Parameters followed to their callers (kb.scan.calls and kb.config.resolve): a guard that reads a
function's parameter names the flag, config.json key or variable that a call of that function in
the same file passes for it; locals assigned in the other branch of an `if` are not taken for the
value at the raise; walrus names, tuple loop targets, `getattr(x, "name")`, model validators and
the classes JSON-valued flags parse into are resolved. Small trees in tmp_path."""

from __future__ import annotations

from pathlib import Path

import pytest

from kb.jobs import scan_release
from kb.model import Record, ScanResult
from kb.scan.extract import extract
from kb.scan.source import SourceSpec
from kb.setby import CONFIG_JSON, ENV, FLAG, INTERNAL, UNRESOLVED, Input
from test_flags import tree_of
from test_sets import ARG_UTILS_DCP, MODEL_DCP, PARALLEL_DCP, by_key, record_of


def raises_of(src: str) -> dict[str, object]:
    return {r.template: r for r in extract(src.encode()).raises}


# --- the scan: calls of the function, what they pass -------------------------------------------
CALLS = '''
class Spec:
    def __post_init__(self):
        m = self.max_model_len
        Spec._override(self.draft_len, m, target=self.target)
        self.check(3)
        self.check(n=self.count)

    @staticmethod
    def _override(spec, draft, target=None, extra=None):
        if spec > draft or target is None:
            raise ValueError("too long")

    def check(self, n):
        if n < 0:
            raise ValueError("negative")


class Other:
    def run(self):
        self.check(99)  # another class's `check`: not a call of Spec.check

    def spread(self, **kw):
        _helper(**kw)
        _helper(1)


def _helper(a, b=2):
    if a > b:
        raise ValueError("helper")


def _inner(dtype, config):
    model_type = config.model_type
    if model_type == "gemma" and dtype == "half":
        raise ValueError("gemma in half")


def _outer(config, dtype="auto"):
    _inner(dtype, config)


def _outermost(x):
    _outer(x)


def _loop(n):
    if n > 0:
        _loop(n - 1)
    if n < -1:
        raise ValueError("loop")
'''


def test_the_scan_records_what_each_call_in_the_file_passes_for_the_parameters_the_guard_reads() -> None:
    r = raises_of(CALLS)
    over = r["too long"].callers  # type: ignore[attr-defined]
    assert [(c.qualname, c.line) for c in over] == [("Spec.__post_init__", 5)]
    args = {a.param: (a.source, a.passed) for a in over[0].args}
    # a staticmethod called through its class: no implicit first parameter; `extra` is not read
    assert args == {"spec": ("self.draft_len", True), "draft": ("m", True), "target": ("self.target", True)}
    assert [(d.name, d.source) for d in over[0].locals] == [("m", "self.max_model_len")]
    # a method through self, by position and by keyword; another class's method of the same name is not it
    check = r["negative"].callers  # type: ignore[attr-defined]
    assert [(c.qualname, [(a.param, a.source) for a in c.args]) for c in check] == [
        ("Spec.__post_init__", [("n", "3")]), ("Spec.__post_init__", [("n", "self.count")])]


def test_defaults_stand_in_for_left_out_arguments_and_spread_calls_say_nothing() -> None:
    helper = raises_of(CALLS)["helper"].callers  # type: ignore[attr-defined]
    assert [[(a.param, a.source, a.passed) for a in c.args] for c in helper] == [
        [],  # `_helper(**kw)`: kb cannot tell what the call passes
        [("a", "1", True), ("b", "2", False)],
    ]


def test_callers_are_followed_one_hop_further_and_no_more_and_recursion_ends() -> None:
    r = raises_of(CALLS)
    inner = r["gemma in half"].callers  # type: ignore[attr-defined]
    assert [c.qualname for c in inner] == ["_outer"]
    assert {a.param: a.source for a in inner[0].args} == {"dtype": "dtype", "config": "config"}
    hop = inner[0].callers
    assert [(c.qualname, {a.param: (a.source, a.passed) for a in c.args}) for c in hop] == [
        ("_outermost", {"config": ("x", True), "dtype": ("'auto'", False)})]
    assert hop[0].callers == ()  # the third hop is not followed
    loop = r["loop"].callers  # type: ignore[attr-defined]
    assert [(c.qualname, [(a.param, a.source) for a in c.args]) for c in loop] == [("_loop", [("n", "n - 1")])]
    assert [c.qualname for c in loop[0].callers] == ["_loop"] and loop[0].callers[0].callers == ()


def test_a_local_assigned_in_the_other_branch_is_not_its_value_at_the_raise() -> None:
    src = '''
def verify(max_len, derived):
    if max_len is None:
        max_len = derived
    elif max_len > 10:
        raise ValueError("too long")
    x = 1
    if derived:
        x = derived
    if x > 3:
        raise ValueError("x")
'''
    r = raises_of(src)
    assert r["too long"].locals == ()  # type: ignore[attr-defined]
    assert [(d.name, d.source) for d in r["x"].locals] == [("x", "derived")]  # type: ignore[attr-defined]


def test_a_local_defined_through_itself_reads_what_it_held_before() -> None:
    src = '''
def head(config):
    head_dtype = getattr(config, "head_dtype", None)
    head_dtype = head_dtype.lower()
    if head_dtype not in OK:
        raise ValueError("bad head")
'''
    r = raises_of(src)
    assert [(d.name, d.source) for d in r["bad head"].locals] == [  # type: ignore[attr-defined]
        ("head_dtype", "getattr(config, 'head_dtype', None).lower()")]


# --- resolution on a vLLM-shaped tree -------------------------------------------------------------
MODEL_CALLS = MODEL_DCP + '''
    def check_dtype(self):
        _outer(self.hf_config, self.dtype)
        _verify_len(self.max_model_len, derived=self.derived_len)
        if (head := getattr(self.hf_config, "head_dtype", None)) and head not in _OK:
            raise ValueError("bad head dtype")


_OK = ("auto", "half")


def _inner(model_type, dtype):
    if model_type == "gemma" and dtype == "half":
        raise ValueError("gemma in half")


def _outer(config, dtype):
    _inner(config.model_type, dtype)


def _verify_len(max_model_len, derived):
    if max_model_len is None:
        max_model_len = derived
    elif max_model_len > derived:
        raise ValueError("longer than the model")


def _never_called(limit):
    if limit > 3:
        raise ValueError("never called")
'''

PARALLEL_CALLS = PARALLEL_DCP.replace('''from pydantic import Field
''', '''from pydantic import Field, field_validator, model_validator
''').replace('''@config
class ParallelConfig:''', '''@config
class BalanceArgs:
    weights: dict[str, int] = field(default_factory=dict)
    """Weights per group."""

    @field_validator("weights")
    @classmethod
    def _check_weights(cls, value):
        for group, weight in value.items():
            if weight < 0:
                raise ValueError("a negative weight")
        return value

    @model_validator(mode="before")
    @classmethod
    def _reject_removed(cls, data):
        if "old_weights" in data:
            raise ValueError("old_weights was removed")
        return data


@config
class ParallelConfig:''').replace('''    ranks: set[int] = field(default_factory=set)
''', '''    ranks: set[int] = field(default_factory=set)
    balance_config: BalanceArgs = Field(default_factory=BalanceArgs)
    """How to balance."""
''')

ARG_UTILS_CALLS = ARG_UTILS_DCP.replace('''        parallel_group.add_argument("--ranks", **parallel_kwargs["ranks"])''', '''        parallel_group.add_argument("--ranks", **parallel_kwargs["ranks"])
        parallel_group.add_argument("--balance-config", **parallel_kwargs["balance_config"])''').replace("import vllm.envs as envs\n", "import vllm.envs as envs\nfrom vllm.platforms import current_platform\n", 1).replace('''    port: int = envs.VLLM_PORT
''', '''    port: int = envs.VLLM_PORT

    def create_balance_config(self):
        return None

    def check_devices(self):
        visible = getattr(envs, current_platform.device_control_env_var)
        balance = self.create_balance_config()
        if visible and balance:
            raise ValueError("devices and balance")
''')


@pytest.fixture
def calls_scan(tmp_path: Path) -> ScanResult:
    root = tree_of(tmp_path / "tree", {"vllm/config/parallel.py": PARALLEL_CALLS,
                                       "vllm/engine/arg_utils.py": ARG_UTILS_CALLS,
                                       "vllm/config/model.py": MODEL_CALLS,
                                       "vllm/platforms/__init__.py": "current_platform = None\n"})
    return scan_release(SourceSpec(source_dir=str(root)), use_cache=False)


def setby_of(scan: ScanResult, template: str) -> tuple[dict[str, Input], Record]:
    r = record_of(scan, template)
    assert r.setby is not None
    return by_key(r.setby.inputs), r


def test_a_parameter_is_read_as_what_the_callers_pass_two_hops_back(calls_scan: ScanResult) -> None:
    inputs, r = setby_of(calls_scan, "gemma in half")
    assert r.setby is not None
    assert {(i.kind, k) for k, i in inputs.items()} == {(CONFIG_JSON, "model_type"), (FLAG, "--dtype")}
    assert inputs["--dtype"].via == ("_outer (line 65) passes dtype=dtype; ModelConfig.check_dtype (line 50) passes "
                                     "dtype=self.dtype; the field ModelConfig.dtype, which --dtype sets")
    assert inputs["--dtype"].default == '"auto"' and inputs["--dtype"].flag_page == "flags/dtype/"
    assert r.setby.resolved and r.setby.reachability == "launch configuration"
    assert r.setby.trigger == "model_type == 'gemma' and --dtype == 'half'"


def test_the_value_at_the_raise_comes_from_its_own_branch(calls_scan: ScanResult) -> None:
    inputs, r = setby_of(calls_scan, "longer than the model")
    assert r.setby is not None
    assert inputs["--max-model-len"].kind == FLAG
    assert inputs["ModelConfig.derived_len"].kind == INTERNAL
    assert r.setby.trigger == "not --max-model-len is None and --max-model-len > derived"


def test_a_function_no_call_in_its_file_reaches_stays_unresolved(calls_scan: ScanResult) -> None:
    inputs, r = setby_of(calls_scan, "never called")
    assert [(i.kind, k) for k, i in inputs.items()] == [(UNRESOLVED, "limit")]
    assert r.setby is not None and not r.setby.resolved


def test_walrus_names_and_getattr_with_a_name_read_config_json_keys(calls_scan: ScanResult) -> None:
    inputs, r = setby_of(calls_scan, "bad head dtype")
    assert {(i.kind, k) for k, i in inputs.items()} == {(CONFIG_JSON, "head_dtype"), (INTERNAL, "_OK")}
    assert r.setby is not None and r.setby.resolved


def test_validators_of_the_class_a_json_flag_parses_into(calls_scan: ScanResult) -> None:
    balance = next(f for f in calls_scan.config.flags if f.name == "--balance-config")  # type: ignore[union-attr]
    assert balance.parses_into == "BalanceArgs"
    # a field validator's loop over its value: both tuple targets read the field
    inputs, _ = setby_of(calls_scan, "a negative weight")
    assert [(i.kind, k) for k, i in inputs.items()] == [(FLAG, "--balance-config.weights")]
    # a model validator's input is every key given to the flag
    inputs, _ = setby_of(calls_scan, "old_weights was removed")
    assert [(i.kind, k) for k, i in inputs.items()] == [(FLAG, "--balance-config")]
    assert "the keys given to --balance-config" in inputs["--balance-config"].via


def test_engine_args_config_builders_and_variables_named_at_run_time(calls_scan: ScanResult) -> None:
    inputs, r = setby_of(calls_scan, "devices and balance")
    built = inputs["--balance-config"]
    assert built.kind == FLAG and "builds the config from --balance-config" in built.via
    assert inputs["the environment"].kind == ENV
    assert r.setby is not None and r.setby.resolved


def test_worker_processes_resolve_every_record_as_one_process_does(calls_scan: ScanResult) -> None:
    from kb.records.merge import attach_set_by, build_records

    records = build_records(calls_scan)
    one = attach_set_by(records, calls_scan.config)
    two = attach_set_by(records, calls_scan.config, jobs=2, min_parallel=1)
    assert [r.id for r in two] == [r.id for r in one]
    assert [r.setby for r in two] == [r.setby for r in one] and all(r.setby is not None for r in one)


# --- request fields ---------------------------------------------------------------------------------
def test_request_fields_where_requests_are_served_and_in_sampling_params(tmp_path: Path) -> None:
    from kb.setby import REQUEST_FIELD
    from test_inputs import SAMPLING, inputs_tree

    sampling = SAMPLING + '''
    def _verify_args(self) -> None:
        if self.n < 1:
            raise ValueError(f"n must be at least 1, got {self.n}.")
'''
    serving = '''
def check_request(request, sampling_params):
    if request.n > 5 and sampling_params.temperature == 0:
        raise ValueError("n too large for greedy sampling")
'''
    engine = '''
def schedule(request):
    if request.n > 5:
        raise ValueError("the engine's own request")
'''
    root = inputs_tree(tmp_path / "tree", {"vllm/sampling_params.py": sampling,
                                           "vllm/entrypoints/openai/serving.py": serving,
                                           "vllm/v1/core/scheduler.py": engine})
    scan = scan_release(SourceSpec(source_dir=str(root)), use_cache=False)
    inputs, r = setby_of(scan, "n must be at least 1, got {self.n}.")
    assert [(i.kind, k, i.default) for k, i in inputs.items()] == [(REQUEST_FIELD, "n", "1")]
    assert inputs["n"].help == "Number of outputs to return for the given prompt request."
    assert r.setby is not None and r.setby.reachability == "request" and r.setby.resolved
    inputs, r = setby_of(scan, "n too large for greedy sampling")
    assert {(i.kind, k) for k, i in inputs.items()} == {(REQUEST_FIELD, "n"), (REQUEST_FIELD, "temperature")}
    assert "of ChatCompletionRequest" in inputs["n"].via
    # outside the serving code a `request` is the engine's own object, not the user's request
    inputs, r = setby_of(scan, "the engine's own request")
    assert [(i.kind, k) for k, i in inputs.items()] == [(UNRESOLVED, "request.n")]


def test_early_exits_and_the_conditions_of_each_call_are_recorded() -> None:
    facts = extract(b'''
class C:
    def __post_init__(self):
        if self.x is None:
            return
        if self.y > 3:
            raise ValueError("y")  # an earlier raise: not an exit
        for item in self.items:
            if not item:
                continue
        if self.z:
            self.check(self.z)
        else:
            try:
                self.check(0)
            except KeyError:
                pass

    def check(self, v):
        if v < 0:
            raise ValueError("negative")
''')
    by = {r.template: r for r in facts.raises}
    assert by["y"].exits == ("not self.x is None",)
    assert by["negative"].exits == ()
    callers = by["negative"].callers
    assert [(c.line, c.guard) for c in callers] == [
        (12, ("not self.x is None", "self.z")),
        (15, ("not self.x is None", "not self.z", "?")),  # inside a `try`: its condition is not all known
    ]


def test_exits_kb_cannot_write_and_breaks_leave_the_condition_unknown() -> None:
    facts = extract(b'''
def f(x, sizes):
    if x > 1:
        pass
    elif x < 0:
        return
    if x == 7:
        raise ValueError("after an elif return")
    for s in sizes:
        if s > 100:
            break
        if s == 7:
            raise ValueError("after a break")
    try:
        n = 1
    except KeyError:
        n = 100
    else:
        if n > 5:
            raise ValueError("in else")
''')
    by = {r.template: r for r in facts.raises}
    assert "?" in by["after an elif return"].exits  # the elif's return is not written as a condition
    assert "?" in by["after a break"].exits  # a break ends the loop for the items after it
    assert all(d.conditional for d in by["in else"].locals if d.name == "n")  # the except's n may be the one
