"""Property tests of what users and scanned source hand kb (issue 35 item 4, "keep the probe"):
config.json values, `vllm serve` flag values, hardware options and `--request` bodies for `kb check`
and `kb fit`, in process through the library functions the CLI calls (read_config, check_one,
fit_one, read_request, hardware_facts, the reports); and vLLM-shaped source that is hostile for the
derived example fixes (kb/derived/) and for `kb release` (kb/releases/bump.py). Each ends in a
normal outcome or one of kb's own typed errors (kb.errors.KBError) whose message names the input;
never any other exception. The MCP tools have theirs in tests/test_mcp.py."""

from __future__ import annotations

import json
import math
import os
import re
import signal
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Optional

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kb.checks.launch import read_config
from kb.checks.launch_check import check_one, derived_index
from kb.checks.report import outcome_json, outcome_text
from kb.checks.request import read_request
from kb.configmodel import ConfigModel
from kb.errors import KBError
from kb.fit.launch import fit_one
from kb.fit.report import fit_json, fit_text
from kb.hardware import hardware_facts
from kb.jobs import scan_release
from kb.model import Record, ScanResult
from kb.records.merge import build_records
from kb.scan.source import SourceSpec
from test_derive import PARALLEL_DERIVE
from test_request_check import request_tree

SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SCANNED = settings(max_examples=20, deadline=None,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
BASE = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
        "num_key_value_heads": 8, "num_hidden_layers": 32, "intermediate_size": 14336, "vocab_size": 128256,
        "max_position_embeddings": 8192, "torch_dtype": "bfloat16"}
SHAPE_KEYS = ("num_attention_heads", "num_key_value_heads", "hidden_size", "max_position_embeddings", "vocab_size",
              "num_hidden_layers", "intermediate_size", "torch_dtype", "quantization_config", "head_dim",
              "model_type", "architectures", "text_config", "rope_scaling", "rope_theta", "sliding_window",
              "kv_lora_rank", "num_experts", "n_routed_experts", "num_local_experts", "model_max_length",
              "max_seq_len", "seq_length", "dtype", "tie_word_embeddings", "vision_config", "is_encoder_decoder",
              "original_max_position_embeddings", "compression_config", "n_head_kv", "multi_query_group_num")

# --- values -------------------------------------------------------------------------------------------
HUGE = st.sampled_from([10**400, -(10**400), 2**63, 2**63 - 1, -(2**63), 2**31, 2**31 - 1, 10**18, 0, -1, 1, 7])
FLOATS = st.sampled_from([math.inf, -math.inf, math.nan, 1e308, -1e308, 5e-324, -0.0, 0.5, 1.5, 1e-9]) | st.floats()
SCALAR = st.none() | st.booleans() | st.integers() | HUGE | FLOATS | st.text(max_size=12)
JSON = st.recursive(SCALAR, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
    st.sampled_from(SHAPE_KEYS) | st.text(max_size=8), inner, max_size=3), max_leaves=8)
CONFIGS = st.builds(lambda base, changed, nested: {**base, **changed, **({"text_config": nested} if nested else {})},
                    st.sampled_from([BASE, {}, {"model_type": "llama"}]),
                    st.dictionaries(st.sampled_from(SHAPE_KEYS), JSON, max_size=5),
                    st.none() | st.dictionaries(st.sampled_from(SHAPE_KEYS), JSON, max_size=3))

# flags of the fixture tree's parser and of vLLM's; each given a hostile value
FLAGS = ("-tp", "--tensor-parallel-size", "-pp", "--pipeline-parallel-size", "-dcp", "--decode-context-parallel-size",
         "--max-model-len", "--gpu-memory-utilization", "--max-num-seqs", "--max-num-batched-tokens", "--dtype",
         "--max-loras", "--enable-lora", "--enable-expert-parallel", "-ep", "--quantization", "--kv-cache-dtype",
         "--block-size", "--cpu-offload-gb", "--kv-cache-memory-bytes", "--num-gpu-blocks-override",
         "--speculative-config", "--eplb-config", "--distributed-executor-backend", "--data-parallel-size",
         "--sizes", "--master-port", "--no-enable-lora", "--model", "--max-cpu-loras", "-q", "--enforce-eager")
FLAG_TEXT = st.one_of(
    st.text(max_size=16),
    st.sampled_from(["inf", "-inf", "nan", "NaN", "Infinity", "1e308", "1e400", "-0", "0", "-1", "0x10", "1_000",
                     "32k", "1.5K", "auto", "-1", "true", "", " ", "٣", "１２", "²", "1" * 30, "9" * 400, "{}",
                     '{"num_speculative_tokens": 1e400}', '{"method": null}', "[" * 300, '{"a": ' * 50,
                     '{"num_redundant_experts": -1}', '{"num_redundant_experts": true}']),
    st.integers().map(str), HUGE.map(str), FLOATS.map(repr),
    JSON.map(lambda v: json.dumps(v)))
ARGV = st.lists(st.tuples(st.sampled_from(FLAGS), FLAG_TEXT, st.booleans()), max_size=4).map(
    lambda items: ["vllm", "serve", "m", *[w for flag, value, eq in items
                                           for w in ([f"{flag}={value}"] if eq else [flag, value])]])
GPU_NAMES = st.none() | st.sampled_from(["h100", "a100", "rtx-4090", "t4"]) | st.text(max_size=12)
NUMBER = st.none() | st.integers() | HUGE | FLOATS
HARDWARE = st.fixed_dictionaries({"name": GPU_NAMES, "count": st.none() | st.integers() | HUGE,
                                  "capability": NUMBER, "memory": NUMBER, "used": st.none() | NUMBER})


def located(message: str, *names: str) -> bool:
    """A message names what it is about: a path, a flag, a config.json key, `--request`, or
    `name: ...` for one of the inputs `names`."""
    return bool(re.search(r"(^|\s|`)(--?[a-z]|config\.json|[\w./-]+\.json(:\d+)?:)", message)) or \
        any(n in message for n in names)


def hardware_of(h: dict[str, Any]) -> Optional[dict[str, Any]]:
    """The hardware as the CLI builds it (kb/cli.py hardware_of), or None when kb refuses it; the
    refusal is asserted located."""
    try:
        facts = hardware_facts(h["name"], h["count"], h["capability"], h["memory"])
    except KBError as e:
        assert located(str(e)), str(e)
        return None
    if h["used"] is not None:
        facts["gpu_memory_used_gib"] = h["used"]
    return facts


# --- the fixture tree: flags, configs, derived checks, SamplingParams ----------------------------------
@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return request_tree(tmp_path_factory.mktemp("property") / "tree")


@pytest.fixture(scope="module")
def scanned(tree: Path) -> tuple[list[Record], ConfigModel]:
    scan = scan_release(SourceSpec(source_dir=str(tree)), use_cache=False)
    assert scan.config is not None
    records = build_records(scan)
    derived_index(records, scan.config)  # held once for every example
    return records, scan.config


@pytest.fixture(scope="module")
def config_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("configs") / "config.json"


@pytest.fixture(scope="module")
def release_model() -> Iterator[ConfigModel]:
    """vLLM 0.34.0's flag model: every flag of `vllm serve`, read from the test cache of release wheels."""
    from conftest import RELEASE_CACHE
    from kb.jobs import read_flags

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KB_CACHE_DIR", str(RELEASE_CACHE))
        yield read_flags(SourceSpec(vllm_version="0.34.0"))[1]


def written(path: Path, config: dict[str, Any]) -> Optional[Any]:
    """config.json as a user's file holds it, read as `kb check --model-config` reads it; None
    when kb refuses it (asserted located)."""
    path.write_text(json.dumps(config), encoding="utf-8")  # Infinity, NaN, 400-digit integers as written
    try:
        return read_config(path)
    except KBError as e:
        assert str(e).startswith(str(path)), str(e)
        return None


def checked(records: Sequence[Record], model: ConfigModel, argv: list[str], config: Any,
            hardware: Optional[dict[str, Any]], request: Optional[dict[str, Any]] = None) -> None:
    """`kb check` in process: the outcome and both of its reports, or a located KBError."""
    try:
        outcome = check_one(records, model, argv, config, hardware, request=request)
    except KBError as e:
        assert located(str(e)), str(e)
        return
    outcome_text(outcome)
    json.loads(outcome_json(outcome))
    for problem in outcome.launch.problems:
        assert located(problem, *SHAPE_KEYS), problem


def fitted(records: Sequence[Record], model: ConfigModel, argv: list[str], config: Any,
           hardware: dict[str, Any]) -> None:
    """`kb fit` in process: the report in both forms, or a located KBError."""
    try:
        report = fit_one(records, model, argv, config, hardware)
    except KBError as e:
        assert located(str(e), *SHAPE_KEYS), str(e)
        return
    fit_text(report)
    json.loads(fit_json(report))


# --- kb check and kb fit ------------------------------------------------------------------------------
@SETTINGS
@given(config=CONFIGS, argv=ARGV, hardware=HARDWARE)
def test_kb_check_takes_any_config_flags_and_hardware_or_says_which_is_wrong(
        scanned: tuple[list[Record], ConfigModel], config_file: Path, config: dict[str, Any], argv: list[str],
        hardware: dict[str, Any]) -> None:
    records, model = scanned
    read = written(config_file, config)
    checked(records, model, argv, read, hardware_of(hardware))


@SETTINGS
@given(config=CONFIGS, argv=ARGV, hardware=HARDWARE)
def test_kb_fit_takes_any_config_flags_and_hardware_or_says_which_is_wrong(
        scanned: tuple[list[Record], ConfigModel], config_file: Path, config: dict[str, Any], argv: list[str],
        hardware: dict[str, Any]) -> None:
    records, model = scanned
    read = written(config_file, config)
    facts = hardware_of(hardware)
    if read is not None and facts is not None:
        fitted(records, model, argv, read, facts)


@pytest.mark.release
@SETTINGS
@given(config=CONFIGS, argv=ARGV, hardware=HARDWARE)
def test_every_flag_of_a_real_release_with_any_value_is_read_or_refused_located(
        release_model: ConfigModel, config_file: Path, config: dict[str, Any], argv: list[str],
        hardware: dict[str, Any]) -> None:
    """vLLM 0.34.0's parser, computed defaults and memory arithmetic: `kb check` and `kb fit`."""
    read = written(config_file, config)
    facts = hardware_of(hardware)
    checked((), release_model, argv, read, facts)
    if read is not None and facts is not None:
        fitted((), release_model, argv, read, facts)


# --- kb check --request ------------------------------------------------------------------------------
REQUEST_KEYS = st.sampled_from(["n", "temperature", "top_k", "stop", "top_p", "_private", "seed"]) | st.text(max_size=6)
REQUESTS = st.one_of(
    st.dictionaries(REQUEST_KEYS, JSON, max_size=4).map(lambda d: json.dumps(d)),
    JSON.map(lambda v: json.dumps(v)),
    st.sampled_from(["{", "[", "{}", "[]", '{"n": ' + "[" * 5000, '{"n": ' + "9" * 5000 + "}",
                     '{"temperature": Infinity}', '{"temperature": NaN}', '{"n": -Infinity}', "\ufeff{}",
                     '{"stop": ["' + "x" * 2000 + '"]}', '{"n": 1, "n": 2}']),
    st.text(max_size=30).map(lambda t: "{" + t))


@SETTINGS
@given(text=REQUESTS, argv=ARGV)
def test_kb_check_request_takes_any_body_or_says_what_is_wrong_with_it(
        scanned: tuple[list[Record], ConfigModel], text: str, argv: list[str]) -> None:
    records, model = scanned
    try:
        request = read_request(text, model)
    except KBError as e:
        assert str(e).startswith(("--request", text)), str(e)  # the body, or the file it names
        return
    checked(records, model, argv, None, None, request)


# --- hostile scanned source: the derived example fixes and `kb release` --------------------------------
ATTRS = ("self.tensor_parallel_size", "self.decode_context_parallel_size", "self.master_port", "self.sizes",
         "self.distributed_executor_backend", "self.enable_expert_parallel", "self.disable_custom_all_reduce")
HOSTILE = ("10 ** 400", "9" * 400, "2 ** 2 ** 2 ** 2 ** 2", "10 ** 10 ** 10", "1 << 10 ** 9", "'a' * 10 ** 9",
           "[0] * 10 ** 9", "(1,) * 10 ** 12", "float('inf')", "float('nan')", "-1e308 * 10", "1j", "None", "...",
           "b'x'", "{}", "[1, [2, [3]]]", "(lambda: 1)()", "_HUGE", "_TEXT", "_DEEP", "len('x' * 10 ** 12)",
           "sum(range(10 ** 12))", "'%s' % ('x' * 10 ** 9)", "'{:>1000000000}'.format(1)", "f'{1:>{10 ** 9}}'",
           "max(range(10 ** 18))", "int('9' * 5000)", "self", "type(self)", "-(-(-(-(-1))))", "not not not 0")
OPS = (">", "<", "==", "!=", ">=", "in", "not in", "is", "is not", "%", "//", "**", "*", "+", "<<", ">>", "&")


@st.composite
def guards(draw: st.DrawFn) -> str:
    """A guard over a flag's field and a hostile constant, maybe nested deep or chained long."""
    lhs = draw(st.sampled_from(ATTRS + HOSTILE))
    rhs = draw(st.sampled_from(HOSTILE + ATTRS))
    text = f"{lhs} {draw(st.sampled_from(OPS))} {rhs}"
    shape = draw(st.sampled_from(["plain", "parens", "not", "and", "or", "ternary", "walrus"]))
    if shape == "parens":
        text = "(" * 150 + text + ")" * 150
    elif shape == "not":
        text = "not " * 60 + f"({text})"
    elif shape in ("and", "or"):
        text = f" {shape} ".join([f"({text})"] * draw(st.integers(2, 60)))
    elif shape == "ternary":
        text = f"({text}) if {lhs} else ({rhs})"
    elif shape == "walrus":
        text = f"(x := {lhs}) and x {draw(st.sampled_from(OPS))} {rhs}"
    return text


@st.composite
def hostile_post_init(draw: st.DrawFn) -> str:
    """Statements for ParallelConfig.__post_init__: hostile guards raising, some nested many ifs deep,
    some behind locals that double at each step."""
    lines: list[str] = []
    for n, guard in enumerate(draw(st.lists(guards(), min_size=1, max_size=3))):
        shown = draw(st.sampled_from(HOSTILE + ATTRS))
        depth = draw(st.sampled_from([0, 0, 1, 30]))
        pad = "        "
        for d in range(depth):
            lines.append(f"{pad}{'    ' * d}if self.tensor_parallel_size > {d}:")
        pad += "    " * depth
        message = draw(st.sampled_from([f'f"hostile guard {n} with tp {{self.tensor_parallel_size}}"',
                                        f'"hostile guard {n}: " + "x" * 10 ** 9',
                                        f'"hostile guard {n} %s" % (self.sizes,)',
                                        f'"hostile guard {n} {{}}".format({shown})',
                                        f'f"hostile guard {n} {{self.master_port:>{{10 ** 9}}}}"']))
        lines += [f"{pad}if {guard}:", f"{pad}    raise ValueError({message})"]
    if draw(st.booleans()):
        lines += ["        y0 = self.tensor_parallel_size",
                  *[f"        y{i} = y{i - 1} * y{i - 1} + _HUGE" for i in range(1, 30)],
                  "        if y29 > self.master_port:", '            raise ValueError("squared thirty times")']
    return "\n".join(lines) + "\n"


HOSTILE_MODULE = "_HUGE = 10 ** 400\n_TEXT = 'a' * 10 ** 9\n_DEEP = " + "[" * 200 + "]" * 200 + "\n"


def hostile_parallel(body: str) -> str:
    return PARALLEL_DERIVE.replace("from vllm.config.utils import config\n",
                                   "from vllm.config.utils import config\n" + HOSTILE_MODULE, 1) \
        .replace("    def __post_init__(self):\n", "    def __post_init__(self):\n" + body, 1)


@pytest.fixture
def alarm() -> Iterator[None]:
    """A hang is a failure (120 s per example, far beyond the few seconds one takes)."""
    def stop(*_: object) -> None:
        raise TimeoutError("no answer within 120 s")

    old = signal.signal(signal.SIGALRM, stop)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def scan_of(root: Path, release: str = "") -> ScanResult:
    from dataclasses import replace

    signal.alarm(120)
    result = scan_release(SourceSpec(source_dir=str(root)), use_cache=True)  # unchanged files: from the cache
    return replace(result, tree=replace(result.tree, release=release)) if release else result


@SCANNED
@given(body=hostile_post_init())
def test_the_derived_fix_search_over_hostile_guards_ends_with_a_fix_or_a_reason(
        tree: Path, tmp_path_factory: pytest.TempPathFactory, alarm: None, body: str) -> None:
    """Huge constants, string multiplication, deep nesting, odd types in vLLM's guards: every error
    with a derived check gets a proved fix or a reason, in bounded time; the guidance survives the cache."""
    from kb.derived.attach import attach_derived, derive_guidance

    root = tmp_path_factory.mktemp("hostile") / "tree"
    from shutil import copytree

    copytree(tree, root)
    (root / "vllm/config/parallel.py").write_text(hostile_parallel(body))
    try:
        scan = scan_of(root)
        assert scan.config is not None
        records = build_records(scan)
        checked_ids = {c.record_id for c in derived_index(records, scan.config).checks}
        found = derive_guidance(records, scan.config)
        cache = tmp_path_factory.mktemp("derived-cache")
        first = attach_derived(records, scan.config, 1, cache)
        again = attach_derived(records, scan.config, 1, cache)  # read back from the cache
    except KBError as e:
        assert located(str(e)) or "vllm/" in str(e), str(e)
        return
    finally:
        signal.alarm(0)
    for ident in checked_ids:
        g = found.get(ident)
        assert g is not None and (g.fix is not None or g.no_fix), ident
    assert [r.derived for r in first] == [r.derived for r in again]


HOSTILE_FILES = {
    "vllm/hostile_guards.py": "class Hostile:\n    def __post_init__(self):\n{body}",
    "vllm/binary.py": b"\xff\xfe\x00raise ValueError('not utf-8')\n\x00",
    "vllm/syntax.py": "def broken(:\n    raise ValueError('a syntax error before this')\n",
    "vllm/deep.py": "def deep(x):\n    return " + "(" * 5000 + "x" + ")" * 5000 + "\n",
    "vllm/long_message.py": "def long(x):\n    if x:\n        raise ValueError('" + "w" * 200_000 + "')\n",
    "vllm/placeholders.py": "def only(a, b):\n    raise ValueError(f'{a}{b}{a!r}{b:>{a}}')\n",
    "vllm/unicode.py": "def uni(x):\n    raise ValueError('\u202eevil\u202c \u0000 \ud7ff \U0001f600 <script>alert(1)</script> {{x}}')\n",
    "vllm/copies.py": "".join(f"def c{i}():\n    raise ValueError('one message raised in many places, again and again')\n"
                              for i in range(300)),
    "vllm/config/model.py": None,  # the DCP error removed
    "vllm/moved.py": "def moved(self, parallel_config):\n    raise ValueError(\"The model's number of query heads per KV head "
                     "({num_q_per_kv}) must be divisible by `--decode-context-parallel-size` "
                     "({decode_context_parallel_size}) in a new file.\")\n",
}


@SCANNED
@given(files=st.sets(st.sampled_from(sorted(HOSTILE_FILES)), min_size=1), body=hostile_post_init())
def test_kb_release_onto_a_hostile_release_ends_with_a_worklist_or_a_located_error(
        tree: Path, tmp_path_factory: pytest.TempPathFactory, alarm: None, files: set[str], body: str) -> None:
    """`kb release 0.2.0` (kb.jobs.bump_release) from the fixture tree as 0.1.0 to a tree with
    hostile files added (undecodable, syntax errors, nesting, huge and hostile messages, copies)
    and errors removed or moved: the worklist in every form, the wordings and releases.toml
    written; or a located error. Never a traceback or a hang."""
    from shutil import copytree

    import kb.jobs
    from kb.releases.bump import worklist_text
    from kb.releases.history import build_history
    from kb.releases.wording import dumps, load, wordings

    work = tmp_path_factory.mktemp("bump")
    copytree(tree, work / "new")
    for rel in files:
        text = HOSTILE_FILES[rel]
        target = work / "new" / rel
        if text is None:
            target.unlink()
        elif isinstance(text, bytes):
            target.write_bytes(text)
        else:
            target.write_text(text.replace("{body}", body), encoding="utf-8")
    old = ("0.1.0", scan_of(tree, "0.1.0"))
    try:
        new = ("0.2.0", scan_of(work / "new", "0.2.0"))
    finally:
        signal.alarm(0)
    (work / "wordings.json.gz").write_bytes(dumps(wordings([old], build_history([old])), ("0.1.0",)))
    (work / "releases.toml").write_text('pinned = "0.1.0"\npublished = ["0.1.0"]\n')
    (work / "errors").mkdir()
    load.cache_clear()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(kb.jobs, "scan_releases", lambda specs, *a, **k: [old, new])
        signal.alarm(120)
        try:
            done = kb.jobs.bump_release("0.2.0", work / "errors", write=True, use_cache=False,
                                        wordings_file=work / "wordings.json.gz", releases_file=work / "releases.toml")
        except KBError as e:
            assert located(str(e)) or str(work) in str(e), str(e)
            return
        finally:
            signal.alarm(0)
            load.cache_clear()
    worklist_text(done)
    worklist_text(done, "markdown")
    json.dumps(done.to_json())
    assert load(work / "wordings.json.gz")[0] == ("0.1.0", "0.2.0")
    assert 'pinned = "0.2.0"' in (work / "releases.toml").read_text()
    assert os.path.getsize(work / "wordings.json.gz") > 0


# --- what the probe found, each pinned -----------------------------------------------------------------
def test_found_a_huge_integer_for_a_number_input_is_refused_located_not_an_overflow(
        scanned: tuple[list[Record], ConfigModel]) -> None:
    """A 400-digit integer where kb wants a finite number (config.json, or an MCP hardware argument
    given as a JSON integer) ended in `OverflowError: int too large to convert to float`."""
    from kb.checks.launch import ConfigFile, parse_launch

    launch = parse_launch(["vllm", "serve", "m"], ConfigFile("c.json", {**BASE, "derived_max_model_len": 10**400}),
                          {"gpu_memory_gib": 10**400})
    assert launch.bad["derived_max_model_len"] == \
        "c.json: derived_max_model_len: out of range (more than 2**63), got an integer of 401 digits"
    assert launch.bad["gpu_memory_gib"].startswith("--gpu-memory-gib: out of range")
    records, model = scanned
    outcome = check_one(records, model, ["vllm", "serve", "m"], None, {"gpu_memory_gib": 10**400, "gpu_name": None})
    assert outcome.launch.problems == ("--gpu-memory-gib: out of range (more than 2**63), got an integer of 401 digits",)


def test_found_a_huge_gpu_memory_used_is_refused_located(scanned: tuple[list[Record], ConfigModel],
                                                         config_file: Path) -> None:
    records, model = scanned
    config = written(config_file, BASE)
    with pytest.raises(KBError, match=r"^--gpu-memory-used-gib: expected a number from 0 to 1e\+06, got an integer"):
        fit_one(records, model, ["vllm", "serve", "m"], config,
                {"gpu_memory_gib": 80.0, "gpu_memory_used_gib": 10**400})


@pytest.mark.release
@pytest.mark.parametrize("length", ["abc", [1], 10**400, math.inf], ids=["text", "list", "huge", "inf"])
def test_found_a_model_max_length_that_is_no_number_leaves_max_model_len_unknown(release_model: ConfigModel,
                                                                                  length: Any) -> None:
    """config.json's model_max_length "abc" with a RoPE factor ended `kb check` in `TypeError: can't
    multiply sequence by non-int of type 'float'` (kb/checks/computed.py); Infinity in OverflowError."""
    from kb.checks.launch import ConfigFile

    config = {**BASE, "model_max_length": length, "rope_scaling": {"rope_type": "linear", "factor": 2.0}}
    outcome = check_one((), release_model, ["vllm", "serve", "m"], ConfigFile("config.json", config), None)
    assert outcome.launch.sources.get("max_model_len") != "vLLM's default, as it computes it"


def test_found_a_file_deeply_nested_after_an_unclosed_paren_is_a_parse_warning_not_a_memory_error() -> None:
    """CPython's parser answers 200 `[` after an unclosed `(` with MemoryError, which ended `kb scan`."""
    from kb.scan.extract import extract

    facts = extract(b"x = (\ny = " + b"[" * 200 + b"]" * 200 + b"\nraise ValueError('after')\n")
    assert facts.error == (1, "cannot parse: too deeply nested")


def test_found_an_infinite_constant_in_a_guard_is_no_value_to_try() -> None:
    """A guard comparing with `-1e308 * 10` put -inf among the values the fix search tries:
    `int(-inf)` ended derive_guidance in OverflowError."""
    from kb.derived.domains import _numbers

    tried = _numbers([math.inf, -math.inf, math.nan, 4], True)
    assert tried[:3] == [4, 5, 3] and all(isinstance(x, int) for x in tried)
    assert all(math.isfinite(x) for x in _numbers([1e308, -math.inf], False))
