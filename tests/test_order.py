"""vLLM's order (kb/checks/order.py) and valid values (kb/checks/valid.py): the configs
create_engine_config builds, in order, read from the source; pydantic's field constraints of the
given flags, reported as pydantic reports them, config by config; which predicted error comes
first. On a small tree in tmp_path, and against real vLLM 0.33.0 outcomes recorded by
bench/oracle/order_cases.py (tests/data/oracle-order-0.33.0.json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kb.checks.cli_parse import parse_command
from kb.checks.order import position, validation_failures
from kb.jobs import scan_release
from kb.model import ScanResult
from kb.records.merge import build_records
from kb.scan.source import SourceSpec
from test_sets import ARG_UTILS_DCP, MODEL_DCP, PARALLEL_DCP, dcp_tree

DATA = Path(__file__).parent / "data"

PARALLEL_LIMITS = PARALLEL_DCP.replace('''    tensor_parallel_size: int = 1''', '''    tensor_parallel_size: int = Field(default=1, ge=1)''').replace(
    '''    decode_context_parallel_size: int = 1''', '''    decode_context_parallel_size: Annotated[int, Field(ge=1, le=64)] = 1''').replace(
    "from typing import Literal", "from typing import Annotated, Literal") + '''

    def __post_init__(self):
        if self.tensor_parallel_size % self.decode_context_parallel_size != 0:
            raise ValueError("tp must be divisible by dcp")
'''
MODEL_ORDER = MODEL_DCP.replace('''    max_model_len: Optional[int] = None''', '''    max_model_len: Optional[int] = Field(default=None, ge=-1)''').replace(
    "from vllm.config.utils import config\n", "from pydantic import Field\n\nfrom vllm.config.utils import config\n", 1)
ARG_UTILS_ORDER = ARG_UTILS_DCP.replace('''    @staticmethod
    def add_cli_args(parser):''', '''    def create_model_config(self) -> ModelConfig:
        return ModelConfig(model=self.model)

    def create_engine_config(self):
        model_config = self.create_model_config()
        parallel_config = ParallelConfig(tensor_parallel_size=self.tensor_parallel_size)
        if parallel_config.tensor_parallel_size > 64:
            raise ValueError("too many GPUs")
        return VllmConfig(model_config=model_config, parallel_config=parallel_config)

    @staticmethod
    def add_cli_args(parser):''', 1)


@pytest.fixture
def order_scan(tmp_path: Path) -> ScanResult:
    root = dcp_tree(tmp_path / "tree")
    (root / "vllm/config/parallel.py").write_text(PARALLEL_LIMITS)
    (root / "vllm/config/model.py").write_text(MODEL_ORDER)
    (root / "vllm/engine/arg_utils.py").write_text(ARG_UTILS_ORDER)
    return scan_release(SourceSpec(source_dir=str(root)), use_cache=False)


def test_the_build_order_and_the_constraints_come_from_the_source(order_scan: ScanResult) -> None:
    model = order_scan.config
    assert model is not None
    assert [c for c, _ in model.build_order] == ["ModelConfig", "ParallelConfig", "VllmConfig"]
    flags = {f.name: f for f in model.flags}
    assert flags["--tensor-parallel-size"].constraints == (("ge", 1),)
    assert flags["--decode-context-parallel-size"].constraints == (("ge", 1), ("le", 64))
    assert flags["--max-model-len"].constraints == (("ge", -1),)


def test_field_constraints_are_reported_as_pydantic_reports_them(order_scan: ScanResult) -> None:
    model = order_scan.config
    assert model is not None
    parsed = parse_command(model, ["m", "-dcp", "65", "-tp", "0", "--max-model-len", "-2"])
    assert parsed.error is None
    failures = validation_failures(model, parsed.values, parsed.given)
    assert [f.config_class for f in failures] == ["ModelConfig", "ParallelConfig"]  # the order they are built in
    assert failures[1].printed == (
        "2 validation errors for ParallelConfig\n"
        "tensor_parallel_size\n"
        "  Input should be greater than or equal to 1 [type=greater_than_equal, input_value=0, input_type=int]\n"
        "decode_context_parallel_size\n"
        "  Input should be less than or equal to 64 [type=less_than_equal, input_value=65, input_type=int]")
    assert validation_failures(model, {"tensor_parallel_size": 2}, ("tensor_parallel_size",)) == []


def test_checks_come_in_the_order_vllm_runs_them(order_scan: ScanResult) -> None:
    model = order_scan.config
    assert model is not None
    order = dict(model.build_order)
    by_template = {r.template: r for r in build_records(order_scan)}
    post_init = position(by_template["tp must be divisible by dcp"], order)
    engine = position(by_template["too many GPUs"], order)
    later = position(by_template["Decode context parallelism needs a larger --tensor-parallel-size."], order)
    assert post_init[0] == order["ParallelConfig"]  # run while ParallelConfig is built
    assert order["ParallelConfig"] < engine[0] < order["VllmConfig"]  # at its own line of create_engine_config
    assert later[0] > order["VllmConfig"]  # a ModelConfig method vLLM calls once every config is built
    assert sorted([later, engine, post_init]) == [post_init, engine, later]


# --- against the real vLLM ------------------------------------------------------------------------------
@pytest.mark.release
def test_the_first_error_and_the_valid_values_agree_with_real_vllm(tmp_path: Path) -> None:
    from kb.checks.report import outcome_json
    from kb.jobs import check_launch

    doc = json.loads((DATA / "oracle-order-0.33.0.json").read_text())
    spec = SourceSpec(vllm_version="0.33.0")
    wrong = []
    for n, case in enumerate(doc["cases"]):
        config = tmp_path / f"config-{n}.json"
        config.write_text(json.dumps(case["config"]))
        words = ["vllm", "serve", *("org/m" if w == "$MODEL" else w for w in case["argv"])]
        out = json.loads(outcome_json(check_launch(spec, words, config, {"gpu_count": case["hardware"]["count"]})))
        first = out["first"]
        if case["outcome"] == "ok":
            if first is not None:
                wrong.append(("false alarm", case["argv"], first))
            continue
        said = None if first is None else first["message"]
        real = case["message"]
        if said is None or (said != real and not said.endswith(real) and f"  {real} [" not in said):
            wrong.append(("first", case["argv"], real, said))
    assert not wrong, wrong
    dcp3 = next(c for c in doc["cases"] if c["argv"][-1] == "3" and "-dcp" in c["argv"] and len(c["argv"]) == 5)
    config = tmp_path / "reference.json"
    config.write_text(json.dumps(dcp3["config"]))
    out = json.loads(outcome_json(check_launch(spec, ["vllm", "serve", "org/m", "-tp", "16", "-dcp", "3"], config,
                                               {"gpu_count": 16})))
    assert out["predicted"][0]["validValues"] == {"--decode-context-parallel-size": [1, 2]}
    accepted = {c["argv"][-1] for c in doc["cases"] if "-dcp" in c["argv"] and len(c["argv"]) == 5
                and c["outcome"] == "ok"}
    assert accepted == {"1", "2"}  # what real vLLM accepts for this model on 16 GPUs


def test_a_value_vllm_itself_refuses_is_its_predicted_error_exit_1(tmp_path: Path, capsys) -> None:
    """README (`kb check`): `-tp 0` is bad input to kb, but vLLM stops on it first (pydantic's
    constraint of ParallelConfig): that error is the answer, exit 1; without the constraint, 2."""
    from kb.cli import main

    root = dcp_tree(tmp_path / "tree")
    argv = ["check", "--source", str(root), "--no-cache", "--", "vllm", "serve", "m", "-tp", "0"]
    assert main(argv) == 2  # no constraint: the checks that need -tp did not run
    assert capsys.readouterr().err.splitlines()[-1] == "Error: -tp: must be at least 1, got 0"
    (root / "vllm/config/parallel.py").write_text(PARALLEL_LIMITS)
    (root / "vllm/config/model.py").write_text(MODEL_ORDER)
    (root / "vllm/engine/arg_utils.py").write_text(ARG_UTILS_ORDER)
    assert main(argv) == 1
    out, err = capsys.readouterr()
    assert "1 validation error for ParallelConfig\n" in out and "input_value=0" in out
    assert err.splitlines()[-1] == "Error: -tp: must be at least 1, got 0"
