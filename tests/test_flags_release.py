"""The flag model against vLLM itself, on real release wheels (read from the test cache through
kb's own download code): vLLM 0.33.0's and 0.34.0's `vllm serve --help=all`, recorded by
bench/oracle/help.py in tests/data/vllm-X-flags.json. Figures: `python bench/flags.py`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from kb.jobs import read_flags
from kb.scan.source import SourceSpec

pytestmark = pytest.mark.release

DATA = Path(__file__).parent / "data"
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))


@pytest.fixture(scope="module")
def flags_0_33():
    return read_flags(SourceSpec(vllm_version="0.33.0"))


# Measured (python bench/flags.py --vllm-version X --oracle tests/data/vllm-X-flags.json):
# (argparse actions, same default and choices, same help text). The two left in each release:
# CompilationConfig's own __repr__ prints a dict of the fields set; --mm-processor-device's choices
# name the platform's device at run time.
HELP_ALL = {"0.33.0": (322, 320, 294), "0.34.0": (329, 327, 300)}


@pytest.mark.parametrize("release", sorted(HELP_ALL))
def test_every_flag_of_help_all_is_found_with_its_default_and_choices(release: str) -> None:
    from flags import compare  # bench/flags.py

    _, model = read_flags(SourceSpec(vllm_version=release))
    oracle = json.loads((DATA / f"vllm-{release}-flags.json").read_text())
    total, same_both, same_help = HELP_ALL[release]
    c = compare(model, oracle)
    assert c.total == total
    assert c.found == total, c.missing  # 100%
    assert c.extra == []
    assert c.same_both >= same_both, c.differences
    assert sorted(d.split(":")[0] for d in c.differences) == ["--compilation-config", "--mm-processor-device"]
    assert c.same_help >= same_help


def test_the_flags_that_set_parallelism_and_their_config_fields(flags_0_33) -> None:
    _, model = flags_0_33
    tp = model.flag("--tensor-parallel-size")
    assert tp is not None and tp.options == ("--tensor-parallel-size", "-tp") and tp.default == 1
    assert (tp.config_class, tp.config_field, tp.group, tp.type) == ("ParallelConfig", "tensor_parallel_size",
                                                                      "ParallelConfig", "int")
    dcp = model.flag("-dcp")
    assert dcp is not None and dcp.name == "--decode-context-parallel-size" and dcp.default == 1
    assert dcp.help.startswith("Number of ranks that shard the decode KV cache.")
    backend = model.flag("--attention-backend")
    assert backend is not None and (backend.config_class, backend.config_field) == ("AttentionConfig", "backend")
    prefix = model.flag("--enable-prefix-caching")
    assert prefix is not None and prefix.visible == ("--enable-prefix-caching", "--disable-prefix-caching")
    assert "--no-enable-prefix-caching" in prefix.options and prefix.default is None


@pytest.mark.parametrize("version, parser_file, at_least", [
    ("0.10.2", "vllm/entrypoints/openai/cli_args.py", 170),
    ("0.6.6.post1", "vllm/entrypoints/openai/cli_args.py", 120),
    ("0.2.7", "vllm/engine/arg_utils.py", 25),
])
def test_older_layouts_are_read(version: str, parser_file: str, at_least: int) -> None:
    info, model = read_flags(SourceSpec(vllm_version=version))
    assert info.release == version and model.parser_file == parser_file
    assert len(model.flags) >= at_least
    tp = model.flag("--tensor-parallel-size")
    assert tp is not None and tp.default == 1 and "-tp" in tp.options
    assert all(f.default_known for f in model.flags if f.name in ("--model", "--dtype", "--seed"))
