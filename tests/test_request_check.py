"""Request errors kb reasons about: the checks of a request's sampling parameters, derived from
vLLM's `SamplingParams` (vllm/sampling_params.py) as launch checks are from its configs, run by
`kb check --request`, and the derived example fix kb finds and proves for them (a request that
raises the error first and the smallest change after which nothing is predicted). On a small
vLLM-shaped tree; the last tests on the pinned release against what the real vLLM raised
(tests/data/oracle-request-<version>.json, recorded by bench/oracle/request_cases.py)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from kb.checks.facts import reads_request
from kb.checks.launch import ConfigFile
from kb.checks.launch_check import check_one, derived_index
from kb.checks.predict import Prediction
from kb.checks.verify import fix_problems
from kb.derived.fix import find_fix
from kb.derived.guidance import guidance
from kb.jobs import scan_release
from kb.model import ExampleFix, Record, ScanResult
from kb.records.merge import build_records
from kb.scan.source import SourceSpec
from test_derive import ARG_UTILS_DERIVE, PARALLEL_DERIVE
from test_sets import dcp_tree

SAMPLING = '''
import math

import msgspec

_SAMPLING_EPS = 1e-5
_MAX_TEMP = 1e-2


def _verify_num_sequences(value, name):
    if value < 1:
        raise ValueError(f"{name} must be at least 1, got {value}.")


class SamplingParams(msgspec.Struct):
    n: int = 1
    temperature: float = 1.0
    top_k: int = 0
    stop: list[str] | None = None

    def __post_init__(self) -> None:
        if 0 < self.temperature < _MAX_TEMP:
            self.temperature = max(self.temperature, _MAX_TEMP)
        if self.stop is None:
            self.stop = []
        self._verify_args()
        if self.temperature < _SAMPLING_EPS:
            self._verify_greedy_sampling()

    def _verify_args(self) -> None:
        _verify_num_sequences(self.n, "n")
        if not math.isfinite(self.temperature):
            raise ValueError(f"temperature must be a finite number, got {self.temperature}.")
        if self.temperature < 0.0:
            raise ValueError(f"temperature must be non-negative, got {self.temperature}.")
        if self.top_k < -1:
            raise ValueError(f"top_k must be 0 (disable), or at least 1, got {self.top_k}.")
        if any(not s for s in self.stop):
            raise ValueError("stop cannot contain an empty string.")

    def _verify_greedy_sampling(self) -> None:
        if self.n > 1:
            raise ValueError(f"n must be 1 when using greedy sampling, got {self.n}.")
'''
NEGATIVE = "temperature must be non-negative, got {self.temperature}."
FINITE = "temperature must be a finite number, got {self.temperature}."
GREEDY = "n must be 1 when using greedy sampling, got {self.n}."
AT_LEAST = "{name} must be at least 1, got {value}."
TOP_K = "top_k must be 0 (disable), or at least 1, got {self.top_k}."
EP = "expert parallel caps tp at 4, got {self.tensor_parallel_size}"


def request_tree(root: Path) -> Path:
    """The DCP tree with derived launch checks and a SamplingParams: launches and requests."""
    root = dcp_tree(root)
    (root / "vllm/config/parallel.py").write_text(PARALLEL_DERIVE)
    (root / "vllm/engine/arg_utils.py").write_text(ARG_UTILS_DERIVE)
    (root / "vllm/sampling_params.py").write_text(SAMPLING)
    return root


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return request_tree(tmp_path_factory.mktemp("request") / "tree")


@pytest.fixture(scope="module")
def scan(tree: Path) -> ScanResult:
    return scan_release(SourceSpec(source_dir=str(tree)), use_cache=False)


@pytest.fixture(scope="module")
def records(scan: ScanResult) -> list[Record]:
    return build_records(scan)


def first(records: list[Record], scan: ScanResult, request: dict | None, *flags: str,  # type: ignore[type-arg]
          config: dict | None = None) -> str | None:  # type: ignore[type-arg]
    assert scan.config is not None
    out = check_one(records, scan.config, ["vllm", "serve", "m", *flags],
                    ConfigFile("config.json", config) if config else None, None, with_valid=False, request=request)
    events = out.in_order()
    return events[0].record.template if events and isinstance(events[0], Prediction) else None


def test_the_request_checks_are_derived_from_the_request_model(records: list[Record], scan: ScanResult) -> None:
    assert scan.config is not None
    index = derived_index(records, scan.config)
    by_id = {r.id: r.template for r in records}
    request = {by_id[c.record_id] for c in index.checks if reads_request(c)}
    assert {NEGATIVE, FINITE, GREEDY, AT_LEAST, TOP_K} <= request
    greedy = next(c for c in index.checks if by_id[c.record_id] == GREEDY)
    assert {r.key for r in greedy.refs if r.kind == "request"} == {"n", "temperature"}  # called only when greedy


def test_kb_check_runs_them_only_on_a_request_in_vllm_order(records: list[Record], scan: ScanResult) -> None:
    assert first(records, scan, None) is None  # no request: no request check runs (nor is listed as unknown)
    assert first(records, scan, {"temperature": -1}) == NEGATIVE
    assert first(records, scan, {"temperature": math.inf}) == FINITE  # the finite check comes first in vLLM
    assert first(records, scan, {"temperature": 0.005}) is None  # vLLM raises it to 0.01 first: not negative
    assert first(records, scan, {"n": 2}) is None  # sampling at temperature 1.0: not greedy
    assert first(records, scan, {"n": 2, "temperature": 0}) == GREEDY
    assert first(records, scan, {"n": 0}) == AT_LEAST  # through the module function _verify_args calls
    assert first(records, scan, {"top_k": -1}) is None and first(records, scan, {"top_k": -2}) == TOP_K
    # the launch fails first: vLLM never takes the request
    assert first(records, scan, {"temperature": -1}, "-ep", "-tp", "8") == EP


def test_a_derived_request_fix_is_found_and_proved(records: list[Record], scan: ScanResult) -> None:
    assert scan.config is not None
    index = derived_index(records, scan.config)
    for template, field in ((NEGATIVE, "temperature"), (GREEDY, "n"), (TOP_K, "top_k")):
        record = next(r for r in records if r.template == template)
        found = find_fix(record, records, scan.config, index)
        fix = found.fix
        assert fix is not None and fix.request_before is not None and fix.request_after is not None, found.reason
        assert fix.before == fix.after == "vllm serve MODEL"  # the launch stays as it is
        assert first(records, scan, fix.request_before) == template
        assert first(records, scan, fix.request_after) is None
        assert field in fix.request_before and f"`{field}`" in found.change
        assert fix_problems(record, fix, records, scan.config) == []
        # without its request, the same fix proves nothing
        bare = ExampleFix("shell", fix.before, fix.after)
        assert any("does not predict" in p for p in fix_problems(record, bare, records, scan.config))


def test_the_page_shows_a_request_fix_as_python_and_kb_check(records: list[Record], scan: ScanResult,
                                                            tmp_path: Path) -> None:
    from kb.derived.attach import attach_derived

    assert scan.config is not None
    done = attach_derived(records, scan.config, 1, tmp_path)
    record = next(r for r in done if r.template == NEGATIVE)
    g = guidance(record)
    assert g.fix is not None and g.fix.language == "python" and g.fix.origin == "derived"
    assert "SamplingParams(temperature=-1.0)" in g.fix.before
    assert "kb check --request '{\"temperature\": -1.0}' -- vllm serve MODEL" in g.fix.before
    assert "SamplingParams(temperature=0.0)" in g.fix.after
    assert g.solutions[0].startswith("Set `temperature` to `0.0` in the request")


def run_check(tree: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kb", "check", "--source", str(tree), "--no-cache", *args],
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("request_text, exit_code, said", [
    ('{"temperature": -1}', 1, "temperature must be non-negative, got -1"),
    # the request passes; the launch gives no config.json, so the heads check is not judged (exit 3)
    ('{"temperature": 0.7}', 3, "The other checks predict no error; that is not an all-clear."),
    ('{"temprature": 0.7}', 2, '--request: "temprature" is not a field of SamplingParams'),
    ("[1, 2]", 2, "--request: must be a JSON object of sampling parameters"),
    ('{"temperature": ', 2, "--request: not JSON"),
    ("/no/such/request.json", 2, "/no/such/request.json: no such file"),
    ('{"stop": ' + "[" * 60 + "]" * 60 + "}", 2, "nested more than 20 deep"),
])
def test_kb_check_request_on_the_command_line(tree: Path, request_text: str, exit_code: int, said: str) -> None:
    done = run_check(tree, "--request", request_text, "--", "vllm", "serve", "m")
    assert done.returncode == exit_code, done.stdout + done.stderr
    assert said in done.stdout + done.stderr
    assert "Traceback" not in done.stderr


# --- the pinned release against the real vLLM -----------------------------------------------------------
ORACLE = Path(__file__).parent / "data/oracle-request-0.34.0.json"


@pytest.mark.release
def test_the_derived_request_fixes_of_the_pinned_release_are_what_vllm_does() -> None:
    """Every request fix the real vLLM 0.34.0 was run on: vLLM raised the error for `before`
    (its message) and nothing for `after`, and kb still predicts exactly that."""
    from kb.jobs import _check_inputs

    doc = json.loads(ORACLE.read_text())
    cases = doc["cases"]
    assert len(cases) >= 20 and all(c["agrees"] for c in cases), [c["id"] for c in cases if not c["agrees"]]
    records, model, derived = _check_inputs(SourceSpec(vllm_version=doc["vllm"]), None, True)
    assert model is not None
    for c in cases:
        config = ConfigFile("config.json", c["model_config"])
        launch = c["launch"].split()
        before = check_one(records, model, launch, config, None, with_valid=False, derived=derived,
                           request=c["before"]).in_order()
        assert before and isinstance(before[0], Prediction) and before[0].record.id == c["id"], c
        after = check_one(records, model, launch, config, None, with_valid=False, derived=derived, request=c["after"])
        assert not after.predicted, c
