"""The `vllm serve` flag model (kb.config) on small vLLM-shaped trees in tmp_path: config
dataclasses -> get_kwargs -> add_argument, as vLLM's own source builds the parser; `kb flags`;
the model in the scan JSON; hostile source (bounded, located, never a traceback)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from fixture_tree import write_tree
from kb.cli import main
from kb.config.read import read_config, shown_help
from kb.configmodel import ConfigModel, Flag

SCHEMA = json.loads((Path(__file__).parent.parent / "kb/schemas/scan.schema.json").read_text())

CONFIG_UTILS = '''
def config(cls=None, **kwargs):
    return cls
'''

PARALLEL = '''
from dataclasses import field
from typing import Literal

from pydantic import Field

from vllm.config.utils import config

DistributedBackend = Literal["ray", "mp", "uni"]
DEFAULT_PORT = 29500


@config
class EPLBConfig:
    window_size: int = 1000
    """Window size."""
    log_balancedness: bool = False


@config
class ParallelConfig:
    """Configuration for the distributed execution."""

    tensor_parallel_size: int = 1
    """Number of tensor parallel groups.
    A second line of the same sentence."""
    distributed_executor_backend: DistributedBackend | None = None
    """Backend to use for distributed model workers."""
    enable_expert_parallel: bool = False
    """Use expert parallelism instead of tensor parallelism for MoE layers."""
    disable_custom_all_reduce: bool = False
    """Disable the custom all-reduce kernel."""
    master_port: int = DEFAULT_PORT
    """Port of the master node."""
    sizes: list[int] = field(default_factory=lambda: [1, 2])
    """Sizes (100% of them)."""
    eplb_config: EPLBConfig = Field(default_factory=EPLBConfig)
    """Expert parallelism configuration."""
    ranks: set[int] = field(default_factory=set)
'''

MODEL = '''
from typing import Literal, Optional

from vllm.config.utils import config

ModelDType = Literal["auto", "half", "float16", "bfloat16"]


@config
class ModelConfig:
    """Configuration for the model."""

    model: str = "Qwen/Qwen3-0.6B"
    """Name or path of the Hugging Face model to use."""
    dtype: ModelDType | str = "auto"
    """Data type for model weights."""
    runner: Literal["auto", "generate", "pooling"] = "auto"
    max_model_len: Optional[int] = None
    """Model context length."""
'''

ENVS = '''
import os
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    VLLM_SERVER_DEV_MODE: bool = False

environment_variables: dict[str, Callable[[], Any]] = {
    "VLLM_SERVER_DEV_MODE": lambda: bool(int(os.getenv("VLLM_SERVER_DEV_MODE", "0"))),
    "VLLM_PORT": lambda: int(os.getenv("VLLM_PORT", "8123")),
}


def __getattr__(name: str):
    return environment_variables[name]()
'''

ARG_UTILS = '''
import argparse
import sys
from dataclasses import dataclass, fields

import vllm.envs as envs
from vllm.config import ModelConfig, ParallelConfig


def get_kwargs(cls):
    return {f.name: {} for f in fields(cls)}  # vLLM computes this at run time; kb reads the class


def optional_type(return_type):
    def _optional_type(val):
        return None if val == "None" else return_type(val)

    return _optional_type


@dataclass
class EngineArgs:
    model: str = ModelConfig.model
    tensor_parallel_size: int = ParallelConfig.tensor_parallel_size
    port: int = envs.VLLM_PORT

    @staticmethod
    def add_cli_args(parser):
        model_kwargs = get_kwargs(ModelConfig)
        model_group = parser.add_argument_group(title="ModelConfig", description=ModelConfig.__doc__)
        if not ("serve" in sys.argv[1:] and "--help" in sys.argv[1:]):
            model_group.add_argument("--model", **model_kwargs["model"])
        model_group.add_argument("--dtype", **model_kwargs["dtype"])
        model_group.add_argument("--runner", **model_kwargs["runner"])
        model_group.add_argument("--max-model-len", **model_kwargs["max_model_len"])

        parallel_kwargs = get_kwargs(ParallelConfig)
        parallel_kwargs["distributed_executor_backend"]["choices"].remove("uni")
        parallel_group = parser.add_argument_group(title="ParallelConfig", description=ParallelConfig.__doc__)
        parallel_group.add_argument("--tensor-parallel-size", "-tp", **parallel_kwargs["tensor_parallel_size"])
        parallel_group.add_argument("--distributed-executor-backend",
                                    **parallel_kwargs["distributed_executor_backend"])
        parallel_group.add_argument("--enable-expert-parallel", "-ep", **parallel_kwargs["enable_expert_parallel"])
        parallel_group.add_argument("--disable-custom-all-reduce",
                                    **{**parallel_kwargs["disable_custom_all_reduce"], "default": None})
        parallel_group.add_argument("--master-port", **parallel_kwargs["master_port"])
        parallel_group.add_argument("--sizes", **parallel_kwargs["sizes"])
        parallel_group.add_argument("--eplb-config", **parallel_kwargs["eplb_config"])
        parallel_group.add_argument("--ranks", **parallel_kwargs["ranks"])
        parallel_group.add_argument("--data-parallel-backend", "-dpb", type=str, default="mp",
                                    help='Backend for data parallel, either "mp" or "ray".')
        parser.add_argument("--disable-log-stats", action="store_true", help="Disable logging statistics.")
        parser.add_argument("--engine-port", type=int, default=EngineArgs.port, help="The engine's port.")
        return parser


@dataclass
class AsyncEngineArgs(EngineArgs):
    enable_log_requests: bool = False

    @staticmethod
    def add_cli_args(parser, async_args_only: bool = False):
        if not async_args_only:
            parser = EngineArgs.add_cli_args(parser)
        parser.add_argument("--enable-log-requests", action=argparse.BooleanOptionalAction,
                            default=AsyncEngineArgs.enable_log_requests, help="Log requests.")
        return parser
'''

CLI_ARGS = '''
import json

import vllm.envs as envs
from vllm.config.utils import config
from vllm.engine.arg_utils import AsyncEngineArgs, optional_type


@config
class BaseFrontendArgs:
    """Base arguments."""

    lora_modules: list[str] | None = None
    """LoRA modules."""
    log_error_stack: bool = envs.VLLM_SERVER_DEV_MODE
    """Log the stack trace of error responses."""

    @classmethod
    def _customize_cli_kwargs(cls, frontend_kwargs):
        frontend_kwargs["lora_modules"]["type"] = optional_type(str)
        return frontend_kwargs

    @classmethod
    def add_cli_args(cls, parser):
        from vllm.engine.arg_utils import get_kwargs

        frontend_kwargs = get_kwargs(cls)
        frontend_kwargs = cls._customize_cli_kwargs(frontend_kwargs)
        group_name = cls.__name__.replace("Args", "")
        frontend_group = parser.add_argument_group(title=group_name, description=cls.__doc__)
        for key, value in frontend_kwargs.items():
            extra_flags = value.pop("flags", [])
            frontend_group.add_argument(*extra_flags, f"--{key.replace('_', '-')}", **value)
        return parser


@config
class FrontendArgs(BaseFrontendArgs):
    """Arguments for the OpenAI-compatible frontend server."""

    port: int = 8000
    """Port number."""
    allowed_origins: list[str] = field(default_factory=list)
    """Allowed origins."""

    @classmethod
    def _customize_cli_kwargs(cls, frontend_kwargs):
        frontend_kwargs = super()._customize_cli_kwargs(frontend_kwargs)
        frontend_kwargs["allowed_origins"]["type"] = json.loads
        del frontend_kwargs["allowed_origins"]["nargs"]
        frontend_kwargs["port"]["flags"] = ["-p"]
        return frontend_kwargs


def make_arg_parser(parser):
    parser.add_argument("model_tag", type=str, nargs="?", help="The model tag to serve")
    parser = FrontendArgs.add_cli_args(parser)
    parser = AsyncEngineArgs.add_cli_args(parser)
    return parser
'''.replace("import json\n", "import json\nfrom dataclasses import field\n", 1)

ARGPARSE_UTILS = '''
from argparse import BooleanOptionalAction


class EnableDisableAction(BooleanOptionalAction):
    pass
'''


def tree_of(root: Path, extra: dict[str, str] | None = None, enable_disable: bool = True) -> Path:
    files = {
        "vllm/__init__.py": "",
        "vllm/_version.py": "__version__ = '0.1.0'\n",
        "vllm/config/__init__.py": "from vllm.config.model import ModelConfig\nfrom vllm.config.parallel import *\n",
        "vllm/config/utils.py": CONFIG_UTILS,
        "vllm/config/parallel.py": PARALLEL,
        "vllm/config/model.py": MODEL,
        "vllm/envs.py": ENVS,
        "vllm/engine/__init__.py": "",
        "vllm/engine/arg_utils.py": ARG_UTILS,
        "vllm/entrypoints/__init__.py": "",
        "vllm/entrypoints/openai/__init__.py": "",
        "vllm/entrypoints/openai/cli_args.py": CLI_ARGS,
    }
    if enable_disable:
        files["vllm/utils/__init__.py"] = ""
        files["vllm/utils/argparse_utils.py"] = ARGPARSE_UTILS
    return write_tree(root, files | (extra or {}))


def model_of(root: Path) -> ConfigModel:
    paths = sorted(p.relative_to(root).as_posix() for p in (root / "vllm").rglob("*.py"))
    return read_config(paths, lambda p: (root / p).read_bytes())


def flag(model: ConfigModel, option: str) -> Flag:
    found = model.flag(option)
    assert found is not None, f"{option} not in {[f.name for f in model.flags]}"
    return found


@pytest.fixture
def model(tmp_path: Path) -> ConfigModel:
    return model_of(tree_of(tmp_path / "tree"))


# --- config dataclasses -> flags ---------------------------------------------------------------------
def test_every_flag_added_is_found_in_help_order(model: ConfigModel) -> None:
    assert model.parser_file == "vllm/entrypoints/openai/cli_args.py"
    assert [f.name for f in model.flags] == [
        "--allowed-origins", "--data-parallel-backend", "--disable-custom-all-reduce", "--disable-log-stats",
        "--distributed-executor-backend", "--dtype", "--enable-expert-parallel", "--enable-log-requests",
        "--engine-port", "--eplb-config", "--log-error-stack", "--lora-modules", "--master-port",
        "--max-model-len", "--model", "--ranks", "--runner", "--sizes", "--tensor-parallel-size",
        "--help", "--port", "model_tag"]  # as argparse sorts option strings: -h and -p after every --x
    assert [g.title for g in model.groups] == ["Frontend", "ModelConfig", "ParallelConfig"]
    assert model.groups[2].description == "Configuration for the distributed execution."
    assert model.warnings == ()
    assert model.counts["defaults_unresolved"] == 0


def test_a_field_flag_has_its_default_help_group_and_config_field(model: ConfigModel) -> None:
    tp = flag(model, "-tp")
    assert (tp.name, tp.options, tp.dest, tp.action, tp.type) == (
        "--tensor-parallel-size", ("--tensor-parallel-size", "-tp"), "tensor_parallel_size", "store", "int")
    assert (tp.default, tp.default_exact, tp.default_known) == (1, True, True)
    assert (tp.group, tp.config_class, tp.config_field) == ("ParallelConfig", "ParallelConfig", "tensor_parallel_size")
    assert tp.help == "Number of tensor parallel groups. A second line of the same sentence."
    assert (tp.file, tp.line) == ("vllm/engine/arg_utils.py", 39)


def test_literal_choices_sorted_with_none_for_an_optional_field_and_edited_by_the_caller(model: ConfigModel) -> None:
    backend = flag(model, "--distributed-executor-backend")
    assert backend.choices == ("mp", "ray", None)  # sorted, "uni" removed by add_cli_args, None appended
    assert backend.type == "_optional_type" and backend.default is None
    runner = flag(model, "--runner")
    assert runner.choices == ("auto", "generate", "pooling") and runner.default == "auto"
    dtype = flag(model, "--dtype")  # Literal | str: a metavar, not choices (any string is accepted)
    assert dtype.choices is None and dtype.type == "str" and dtype.default == "auto"


def test_booleans_get_their_negative_forms(model: ConfigModel) -> None:
    ep = flag(model, "--enable-expert-parallel")
    assert ep.action == "boolean"
    assert ep.visible == ("--enable-expert-parallel", "-ep", "--disable-expert-parallel")
    assert ep.options == ("--enable-expert-parallel", "-ep", "--disable-expert-parallel", "--no-enable-expert-parallel")
    assert ep.default is False
    custom = flag(model, "--disable-custom-all-reduce")  # {**kwargs, "default": None} overrides the field's
    assert custom.default is None and custom.config_field == "disable_custom_all_reduce"
    stack = flag(model, "--log-error-stack")
    assert stack.visible == ("--log-error-stack", "--no-log-error-stack")
    stats = flag(model, "--disable-log-stats")
    assert (stats.action, stats.default, stats.options, stats.group) == ("store_true", False, ("--disable-log-stats",),
                                                                         "options")


def test_without_enable_disable_action_booleans_only_get_no_forms(tmp_path: Path) -> None:
    ep = flag(model_of(tree_of(tmp_path, enable_disable=False)), "--enable-expert-parallel")
    assert ep.visible == ep.options == ("--enable-expert-parallel", "-ep", "--no-enable-expert-parallel")


def test_defaults_through_references_factories_and_the_environment(model: ConfigModel) -> None:
    assert flag(model, "--master-port").default == 29500  # a module constant
    sizes = flag(model, "--sizes")
    assert (sizes.default, sizes.nargs, sizes.type) == ([1, 2], "+", "int")  # default_factory=lambda: [1, 2]
    assert sizes.help == "Sizes (100% of them)."  # escaped for argparse (%%), shown as %
    eplb = flag(model, "--eplb-config")  # Field(default_factory=EPLBConfig): the dataclass repr vLLM prints
    assert (eplb.default, eplb.default_exact, eplb.type) == (
        "EPLBConfig(window_size=1000, log_balancedness=False)", False, "parse_dataclass")
    assert eplb.help.endswith("Should either be a valid JSON string or JSON keys passed individually.")
    ranks = flag(model, "--ranks")
    assert (ranks.default, ranks.default_exact) == ("set()", False)
    assert flag(model, "--engine-port").default == 8123  # EngineArgs.port = envs.VLLM_PORT: the env var's default
    assert flag(model, "--log-error-stack").default is False  # envs.VLLM_SERVER_DEV_MODE
    assert flag(model, "--model").default == "Qwen/Qwen3-0.6B"  # under an `if` on sys.argv: both branches
    assert flag(model, "--enable-log-requests").default is False  # AsyncEngineArgs.enable_log_requests


def test_frontend_flags_from_the_loop_with_customized_kwargs(model: ConfigModel) -> None:
    port = flag(model, "--port")
    assert (port.options, port.default, port.group, port.config_class) == (("-p", "--port"), 8000, "Frontend",
                                                                           "FrontendArgs")
    origins = flag(model, "--allowed-origins")
    assert (origins.type, origins.nargs, origins.default) == ("loads", None, [])
    lora = flag(model, "--lora-modules")  # set by the base class's _customize_cli_kwargs, reached through super()
    assert lora.type == "_optional_type" and lora.nargs == "+"
    tag = flag(model, "model_tag")
    assert (tag.options, tag.group, tag.nargs, tag.help) == ((), "positional arguments", "?", "The model tag to serve")


def test_an_older_layout_with_direct_add_argument_calls(tmp_path: Path) -> None:
    """vLLM 0.6: every flag written out in EngineArgs.add_cli_args, defaults from EngineArgs."""
    arg_utils = '''
    import argparse
    from dataclasses import dataclass
    from typing import Literal, get_args

    TaskOption = Literal["auto", "generate", "embedding"]


    @dataclass
    class EngineArgs:
        model: str = "facebook/opt-125m"
        task: TaskOption = "auto"
        tensor_parallel_size: int = 1

        @staticmethod
        def add_cli_args(parser):
            parser.add_argument("--model", type=str, default=EngineArgs.model, help="Name or path of the model.")
            parser.add_argument("--task", default=EngineArgs.task, choices=get_args(TaskOption), help="The task.")
            parser.add_argument("--tensor-parallel-size", "-tp", type=int, default=EngineArgs.tensor_parallel_size,
                                help="Number of tensor parallel replicas.")
            parser.add_argument("--trust-remote-code", action="store_true", help="Trust remote code.")
            return parser
    '''
    root = write_tree(tmp_path, {"vllm/__init__.py": "", "vllm/engine/__init__.py": "",
                                 "vllm/engine/arg_utils.py": arg_utils})
    model = model_of(root)
    assert model.parser_file == "vllm/engine/arg_utils.py"
    assert [f.name for f in model.flags] == ["--model", "--task", "--tensor-parallel-size", "--trust-remote-code",
                                             "--help"]
    assert flag(model, "--task").choices == ("auto", "generate", "embedding")
    assert flag(model, "-tp").default == 1 and flag(model, "--model").default == "facebook/opt-125m"
    assert flag(model, "--trust-remote-code").default is False
    assert flag(model, "-tp").config_class is None  # not made from a config dataclass


def test_shown_help_joins_sentence_lines_and_keeps_list_items() -> None:
    assert shown_help("One sentence\n    continued.\n\n- item one\n- item two") == \
        "One sentence continued.\n- item one\n- item two"


# --- the CLI, the scan JSON ---------------------------------------------------------------------------
def test_kb_flags_prints_the_table_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tree_of(tmp_path / "tree")
    assert main(["flags", "--source", str(root)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("vLLM 0.1.0: 22 `vllm serve` flags in 3 groups, read from "
                          "vllm/entrypoints/openai/cli_args.py\n")
    assert ("  --tensor-parallel-size, -tp\n      default: 1\n      sets: ParallelConfig.tensor_parallel_size\n"
            "      Number of tensor parallel groups. A second line of the same sentence.\n") in out
    assert '      choices: "mp", "ray", null\n' in out
    assert main(["flags", "--source", str(root), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["format"] == "kb-flags/1" and doc["release"] == "0.1.0" and doc["counts"]["flags"] == 22
    tp = next(f for f in doc["flags"] if f["name"] == "--tensor-parallel-size")
    assert tp["default"] == 1 and tp["config_field"] == "tensor_parallel_size"
    config = {k: v for k, v in doc.items() if k not in ("release", "ref", "commit")} | {"format": "kb-config/1"}
    jsonschema.validate(config, SCHEMA["$defs"]["config"] | {"$defs": SCHEMA["$defs"]})


def test_kb_scan_carries_the_flag_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tree_of(tmp_path / "tree", {"vllm/config/model.py": MODEL + "\n\ndef check(x):\n"
                                                                     "    if x < 0:\n        raise ValueError('bad')\n"})
    assert main(["scan", "--source", str(root), "--no-cache", "--quiet"]) == 0
    doc = json.loads(capsys.readouterr().out)
    jsonschema.validate(doc, SCHEMA)
    assert doc["config"]["counts"]["flags"] == 22
    assert {f["name"] for f in doc["config"]["flags"]} >= {"--tensor-parallel-size", "--port", "model_tag"}


def test_kb_flags_on_a_tree_without_a_parser_is_a_located_error(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    root = write_tree(tmp_path, {"vllm/__init__.py": "", "vllm/x.py": "X = 1\n"})
    assert main(["flags", "--source", str(root)]) == 1
    err = capsys.readouterr().err
    assert err == ("Error: vllm/engine/arg_utils.py:1: no `vllm serve` parser found "
                   "(make_arg_parser, EngineArgs.add_cli_args)\n")


def test_the_output_is_deterministic(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tree_of(tmp_path / "tree")
    outs = []
    for _ in range(2):
        assert main(["flags", "--source", str(root), "--json"]) == 0
        outs.append(capsys.readouterr().out)
    assert outs[0] == outs[1]


# --- hostile source: bounded, located, never run, never a traceback ------------------------------------
def kb_flags(root: Path) -> subprocess.CompletedProcess[str]:
    """`kb flags` in a process of its own, given 60 s."""
    return subprocess.run([sys.executable, "-m", "kb", "flags", "--source", str(root)], capture_output=True,
                          text=True, timeout=60, cwd=root)


HOSTILE = {
    "recursion": '''
        def make_arg_parser(parser):
            parser.add_argument("--before", type=int, default=1)
            return make_arg_parser(parser)
        ''',
    "loops": '''
        def make_arg_parser(parser):
            items = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
            for a in items:
                for b in items:
                    for c in items:
                        for d in items:
                            for e in items:
                                for f in items:
                                    for g in items:
                                        parser.add_argument("--x", default=a)
            return parser
        ''',
    "busy loops": '''
        def make_arg_parser(parser):
            parser.add_argument("--first", default=1)
            items = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
            for a in items:
                for b in items:
                    for c in items:
                        for d in items:
                            for e in items:
                                for f in items:
                                    for g in items:
                                        total = a + b
            return parser
        ''',
    "deep values": '''
        def make_arg_parser(parser):
            a = []
            d = {}
            for i in [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]:
                for j in [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]:
                    for k in [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]:
                        a = [a]
                        d = {"k": d}
            parser.add_argument("--deep", default=a)
            parser.add_argument("--deeper", default=d, choices=[a, d])
            return parser
        ''',
    "huge values": '''
        BIG = 9 ** 9 ** 9
        TEXT = "a" * 10 ** 9
        LIST = [0] * 10 ** 9

        def make_arg_parser(parser):
            parser.add_argument("--big", type=int, default=BIG)
            parser.add_argument("--text", default=TEXT + TEXT)
            parser.add_argument("--list", default=LIST)
            parser.add_argument("--shift", default=1 << 10 ** 9)
            parser.add_argument("--name-" + TEXT, default=1)
            return parser
        ''',
    "cycles": '''
        from vllm.entrypoints.openai.cli_args import A as B
        A = B
        C = D
        D = C


        class X(Y):
            pass


        class Y(X):
            v: int = X.v


        def make_arg_parser(parser):
            parser.add_argument("--a", default=A)
            parser.add_argument("--c", default=C)
            parser.add_argument("--v", default=Y.v)
            parser.add_argument("--w", default=X().v)
            return parser
        ''',
    "code that would run": '''
        import os

        def make_arg_parser(parser):
            os.system("touch pwned")
            open("pwned", "w").write("x")
            __import__("os").remove("cli_args.py")
            parser.add_argument("--x", default=eval("1 + 1"), type=exec)
            return parser
        ''',
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_parser_source_ends_in_bounded_time_without_a_traceback(tmp_path: Path, case: str) -> None:
    root = write_tree(tmp_path, {"vllm/__init__.py": "", "vllm/entrypoints/__init__.py": "",
                                 "vllm/entrypoints/openai/__init__.py": "",
                                 "vllm/entrypoints/openai/cli_args.py": HOSTILE[case]})
    result = kb_flags(root)
    assert "Traceback" not in result.stderr
    assert result.returncode == 0, result.stderr
    assert not (root / "pwned").exists() and (root / "vllm/entrypoints/openai/cli_args.py").exists()
    assert result.stdout.startswith("vLLM ")
    if case == "recursion":
        assert "  --before\n      default: 1\n" in result.stdout
    if case == "loops":
        assert "warning: vllm/entrypoints/openai/cli_args.py:1: flags not all read: more than 5000 arguments added" \
            in result.stderr
    if case == "busy loops":
        assert "warning: vllm/entrypoints/openai/cli_args.py:1: flags not all read: more than 3000000 steps" in \
            result.stderr
        assert "  --first\n      default: 1\n" in result.stdout
    if case == "deep values":
        assert "  --deep\n      default: " in result.stdout and "  --deeper\n      default: " in result.stdout
    if case == "cycles":
        for name, text in (("a", "A"), ("c", "C"), ("v", "X.v"), ("w", "X().v")):
            assert f"  --{name}\n      default: not read ({text})\n" in result.stdout
    if case == "huge values":
        assert "  --big\n      default: not read (9 ** 9 ** 9)\n" in result.stdout
        assert "  --list\n      default: not read ([0] * 10 ** 9)\n" in result.stdout
        assert "  --shift\n      default: not read (1 << 10 ** 9)\n" in result.stdout
        assert "  --text\n      default: not read (TEXT + TEXT)\n" in result.stdout
        assert "--name-" not in result.stdout
        assert "cli_args.py:10: add_argument with names that could not be read" in result.stderr
    if case == "code that would run":
        assert "  --x\n      default: not read (eval('1 + 1'))\n" in result.stdout


def test_unparsable_and_deep_files_are_located_warnings(tmp_path: Path) -> None:
    deep = "X = " + "(" * 5000 + "1" + ")" * 5000 + "\n"
    root = tree_of(tmp_path / "tree", {"vllm/config/parallel.py": PARALLEL + "\nimport vllm.deep\n",
                                       "vllm/deep.py": deep,
                                       "vllm/config/model.py": "class ModelConfig(:\n"})
    result = kb_flags(root)
    assert "Traceback" not in result.stderr and result.returncode == 0, result.stderr
    assert "warning: vllm/config/model.py:1: does not parse: invalid syntax" in result.stderr
    assert "  --tensor-parallel-size, -tp\n      default: 1\n" in result.stdout
