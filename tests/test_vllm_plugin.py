"""The vLLM plugin (kb/vllm_plugin/) with a small fake `vllm` package: each run is a child Python
that raises or logs an error from the fake package's code, once without the plugin (what vLLM
prints on its own) and once with it; the output with the plugin, our lines left out, must be
exactly the output without it, and our lines must come right after vLLM's own error. The real
vLLM is run by bench/oracle/plugin_run.py."""

from __future__ import annotations

import gzip
import json
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Optional

import pytest

import kb
from kb.explain.match import Matcher, explain, fill
from kb.explain.prose import fix_text
from kb.explain.shipped import nearest_release, shipped_index
from kb.explain.store import KIND, match_sections
from kb.explain.tables import match_tables
from kb.files import read_text
from kb.jobs import errors_folder
from kb.model import Wording
from kb.releases.wording import load
from kb.store import store_key, store_path, write_store
from test_explain_terminal import PASTE, TP_ID, tree_and_entries

OURS = "[vllm-error-kb] "
REPO = Path(__file__).resolve().parent.parent
# Where this process's kb is (a checkout, or site-packages under CI's `pip install .`): the fake
# vLLM's processes import the same kb, so the answer store's key (kb's code, its errors) is the same.
KB_HOME = Path(kb.__file__).resolve().parent.parent

# (file names that no vLLM release has: kb explain prefers a template raised in the file of the raise)
FAKE_VLLM = {
    "vllm/__init__.py": "import os\n__version__ = os.environ['FAKE_VLLM_VERSION']\n",
    "vllm/kbtest_checks.py": "def check(message):\n    raise ValueError(message)\n",
    # vllm.plugins.load_general_plugins, in each process vLLM starts; DRIVER_PLUGIN=1 has the plugin (else
    # the run is vLLM's own output), DRIVER_BREAK=1 makes the plugin's answer raise
    "vllm/kbtest_plugins.py": textwrap.dedent("""\
        import os


        def load_plugins():
            if os.environ.get("DRIVER_PLUGIN") == "1":
                from kb.vllm_plugin import register
                register()
                if os.environ.get("DRIVER_BREAK") == "1":
                    import kb.vllm_plugin.answer as answer

                    def broken(*args, **kwargs):
                        raise RuntimeError("a bug in the plugin")

                    answer.answer_lines = broken
        """),
    # logging configured as vLLM configures it (vllm/logger.py), again in each process it starts: one
    # handler on `vllm`, which does not propagate; the engine core's and a worker's failure at start
    "vllm/kbtest_engine.py": textwrap.dedent("""\
        import logging
        import logging.config
        import sys

        from vllm.kbtest_checks import check
        from vllm.kbtest_plugins import load_plugins

        logger = logging.getLogger(__name__)


        def configure():
            logging.config.dictConfig({
                "version": 1, "disable_existing_loggers": False,
                "formatters": {"vllm": {"format": "(EngineCore) %(levelname)s [%(filename)s] %(message)s"}},
                "handlers": {"vllm": {"class": "logging.StreamHandler", "formatter": "vllm",
                                      "stream": "ext://sys.stdout"}},
                "loggers": {"vllm": {"handlers": ["vllm"], "level": "INFO", "propagate": False}}})


        def fail_logged(message):
            try:
                check(message)
            except Exception:
                logger.exception("EngineCore failed to start.")
                raise


        def engine_core(message):  # EngineCoreProc.run_engine_core: logging again, then the failure
            configure()
            fail_logged(message)


        def worker(message):  # WorkerProc.worker_main: the failure logged, the process ends normally
            try:
                check(message)
            except Exception:
                logger.exception("WorkerProc failed to start.")


        def spawned_worker(message):  # a worker started with `spawn` loads the plugins itself
            configure()
            load_plugins()
            worker(message)
            sys.stdout.flush()
        """),
}

# The main process: `<when the plugin is loaded: early (before the engine's logger exists) or late>
# <scenario> <message>`.
DRIVER = textwrap.dedent("""\
    import multiprocessing, os, sys, threading

    if __name__ == "__main__":
        when, scenario, message = sys.argv[1:4]
        import vllm.kbtest_plugins
        if when == "early":
            vllm.kbtest_plugins.load_plugins()
        import vllm.kbtest_checks, vllm.kbtest_engine
        if when == "late":
            vllm.kbtest_plugins.load_plugins()

        def child(method, target):
            p = multiprocessing.get_context(method).Process(target=target, args=(message,), name="EngineCore")
            sys.stdout.flush(); sys.stderr.flush()
            p.start(); p.join()
            print("the parent goes on", p.exitcode, flush=True)

        if scenario == "raise":
            vllm.kbtest_checks.check(message)
        elif scenario == "thread":
            t = threading.Thread(target=vllm.kbtest_checks.check, args=(message,), name="worker")
            t.start(); t.join()
            print("the main thread goes on", flush=True)
        elif scenario == "logged":  # the main process logs the error, then it ends the process
            vllm.kbtest_engine.configure()
            vllm.kbtest_engine.fail_logged(message)
        elif scenario == "forked":  # vLLM's default: the engine core forked from the process with the plugin
            vllm.kbtest_engine.configure()
            child("fork", vllm.kbtest_engine.engine_core)
        elif scenario == "spawned":
            vllm.kbtest_engine.configure()
            child("spawn", vllm.kbtest_engine.spawned_worker)
        elif scenario == "last-resort":  # no handler of vLLM's: Python's last resort prints the record
            child("fork", vllm.kbtest_engine.worker)
        elif scenario == "not-vllm":  # the same message raised by other code
            raise ValueError(message)
    """)


@pytest.fixture(scope="module")
def fake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fake-vllm")
    for name, text in FAKE_VLLM.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (root / "driver.py").write_text(DRIVER)
    return root


@pytest.fixture(scope="module")
def shipped_error() -> tuple[str, str, str, str]:
    """(release, id, message, first fix's start) of an error of the newest shipped release with a
    curated first fix, whose filled-in message the shipped index answers with that error."""
    releases, items = load()
    release = releases[-1]
    index = shipped_index(release, errors_folder(None), (releases, items))
    matcher = Matcher(index)
    rng = random.Random(7)
    for entry in sorted((e for e in index["entries"] if e.get("solution") and len(e["parts"]) > 1),
                        key=lambda e: e["id"]):
        message = fill(entry, rng)
        found = explain(message, matcher, suggest=False).found
        if "\n" not in message and len(found) == 1 and found[0].best.kind == "exact" and not found[0].others \
                and found[0].answer is not None and found[0].answer.id == entry["id"]:
            return release, entry["id"], message, fix_text(str(entry["solution"]))[0][:30]
    raise AssertionError("no curated error of the newest release answers its own message")


def run(fake: Path, when: str, scenario: str, message: str, plugin: bool, **env: str) -> dict[str, Any]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("KB_SITE_URL", "KB_VLLM_PLUGIN"))}
    environ.update({"PYTHONPATH": os.pathsep.join([str(fake), str(KB_HOME)]), "DRIVER_PLUGIN": "1" if plugin else "0",
                    "FAKE_VLLM_VERSION": "0.1.0", **env})
    done = subprocess.run([sys.executable, str(fake / "driver.py"), when, scenario, message], env=environ,
                          capture_output=True, text=True, timeout=120, cwd=str(fake))
    return {"rc": done.returncode, "out": done.stdout, "err": done.stderr}


def without_ours(text: str) -> str:
    return "".join(line for line in text.splitlines(keepends=True) if not line.startswith(OURS))


def ours(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(OURS)]


def assert_unchanged(with_plugin: dict[str, Any], own: dict[str, Any]) -> None:
    """vLLM's own output, byte for byte, and its exit code."""
    assert with_plugin["rc"] == own["rc"]
    assert without_ours(with_plugin["out"]) == own["out"]
    assert without_ours(with_plugin["err"]) == own["err"]


def assert_after(text: str, own_text: str) -> list[str]:
    """Our lines, all of them after vLLM's own text (at the end of it)."""
    assert text.startswith(own_text) and text[len(own_text):] == "".join(line + "\n" for line in ours(text))
    return ours(text)


# --- the hook: an error ends the process, a thread, or is logged as the root cause ------------------
def test_after_vllms_error_the_title_id_page_and_first_fix_of_the_release(fake: Path, shipped_error) -> None:
    release, ident, message, fix = shipped_error
    env = {"FAKE_VLLM_VERSION": release}
    own = run(fake, "late", "raise", message, plugin=False, **env)
    assert own["rc"] == 1 and own["err"].rstrip().endswith(f"ValueError: {message}") and not ours(own["err"])
    got = run(fake, "late", "raise", message, plugin=True, **env)
    assert_unchanged(got, own)
    title, short, hint = assert_after(got["err"], own["err"])
    assert title.endswith(f" (vLLM {release})")
    assert short.startswith(f"{OURS}{ident} /{release}/errors/{ident}/ {fix}")  # the shipped curated fix
    assert "KB_SITE_URL" in hint
    # a whole link under KB_SITE_URL, and no hint then
    got = run(fake, "late", "raise", message, plugin=True, KB_SITE_URL="https://errors.example.org/", **env)
    assert ours(got["err"])[1].startswith(f"{OURS}{ident} https://errors.example.org/{release}/errors/{ident}/ ")
    assert len(ours(got["err"])) == 2


def test_the_users_own_values_from_the_answer_store_in_kbs_cache(fake: Path, tmp_path: Path) -> None:
    """A release whose answer store `kb explain` compiled: the first fix leads with the values
    of the message (the store of the fixture tree's release, 0.1.0, under a wheel of that name)."""
    cache = Path(os.environ["KB_CACHE_DIR"])
    index = _fixture_index(tmp_path)
    wheel = cache / "wheels" / "vllm-0.1.0-py3-none-any.whl"
    wheel.parent.mkdir(parents=True, exist_ok=True)
    wheel.write_bytes(b"a wheel")
    key = store_key(wheel, errors_folder(None), False)
    stem = store_path(cache, "0.1.0", key)
    write_store(stem.parent / f"{stem.name}.{KIND}", KIND, key,
                match_sections(index, match_tables(index["entries"])))
    message = PASTE.removeprefix("ValueError: ")
    own = run(fake, "late", "raise", message, plugin=False)
    got = run(fake, "late", "raise", message, plugin=True)
    assert_unchanged(got, own)
    title, short, _ = assert_after(got["err"], own["err"])
    assert title.endswith(" (vLLM 0.1.0)")
    assert short == (f"{OURS}{TP_ID} /0.1.0/errors/{TP_ID}/ With config.json num_attention_heads = 6, "
                     "--tensor-parallel-size 1, 2, 3 or 6 (you have 4) passes vLLM's check for this error; kb tried "
                     "1 to 16, the powers of two to 1024 and the divisors of your numbers.")


def test_a_thread_that_dies_of_a_vllm_error(fake: Path, shipped_error) -> None:
    release, ident, message, _ = shipped_error
    own = run(fake, "late", "thread", message, plugin=False, FAKE_VLLM_VERSION=release)
    got = run(fake, "late", "thread", message, plugin=True, FAKE_VLLM_VERSION=release)
    assert_unchanged(got, own)
    assert own["rc"] == 0 and "Exception in thread worker" in own["err"]
    assert_after(got["err"], own["err"])[1].startswith(f"{OURS}{ident} ")


def test_the_main_process_answers_the_error_that_ends_it_once(fake: Path, shipped_error) -> None:
    """Logged, then ending the process: in the main process (the API server, a user's script) the
    answer follows the traceback that ends it, not the log record, and comes once."""
    release, ident, message, _ = shipped_error
    own = run(fake, "late", "logged", message, plugin=False, FAKE_VLLM_VERSION=release)
    got = run(fake, "late", "logged", message, plugin=True, FAKE_VLLM_VERSION=release)
    assert_unchanged(got, own)
    assert own["out"].startswith("(EngineCore) ERROR [kbtest_engine.py] EngineCore failed to start.\nTraceback")
    assert got["out"] == own["out"]
    assert assert_after(got["err"], own["err"])[1].startswith(f"{OURS}{ident} ")


@pytest.mark.parametrize("when", ["early", "late"])
def test_a_forked_engine_core_logs_the_root_cause_then_our_lines(fake: Path, shipped_error, when: str) -> None:
    """vLLM forks its engine core (and it, the workers), which configures logging again (dictConfig
    empties the handler lists of `vllm` and its children) and logs the exception before it ends:
    our lines follow the record, on its stream, once (multiprocessing then prints the traceback),
    whether the plugin was loaded before the engine's logger existed or after."""
    release, ident, message, _ = shipped_error
    own = run(fake, when, "forked", message, plugin=False, FAKE_VLLM_VERSION=release)
    got = run(fake, when, "forked", message, plugin=True, FAKE_VLLM_VERSION=release)
    assert_unchanged(got, own)
    assert own["out"].endswith("the parent goes on 1\n") and "Process EngineCore:" in own["err"]
    record = own["out"].removesuffix("the parent goes on 1\n")
    assert record.startswith("(EngineCore) ERROR [kbtest_engine.py] EngineCore failed to start.")
    assert got["out"].startswith(record) and got["out"].endswith("the parent goes on 1\n")
    assert ours(got["out"][len(record):])[1].startswith(f"{OURS}{ident} ")
    assert not ours(got["err"])


def test_a_spawned_worker_loads_the_plugin_and_follows_its_record(fake: Path, shipped_error) -> None:
    release, ident, message, _ = shipped_error
    own = run(fake, "late", "spawned", message, plugin=False, FAKE_VLLM_VERSION=release)
    got = run(fake, "late", "spawned", message, plugin=True, FAKE_VLLM_VERSION=release)
    assert_unchanged(got, own)
    record = own["out"].removesuffix("the parent goes on 0\n")
    assert record.startswith("(EngineCore) ERROR [kbtest_engine.py] WorkerProc failed to start.")
    assert got["out"].startswith(record) and ours(got["out"][len(record):])[1].startswith(f"{OURS}{ident} ")


def test_no_handler_of_vllms_pythons_last_resort_still_prints_the_record(fake: Path, shipped_error) -> None:
    release, _, message, _ = shipped_error
    own = run(fake, "late", "last-resort", message, plugin=False, FAKE_VLLM_VERSION=release)
    got = run(fake, "late", "last-resort", message, plugin=True, FAKE_VLLM_VERSION=release)
    assert "WorkerProc failed to start." in own["err"] and own["out"] == "the parent goes on 0\n"
    assert got == own


def test_an_error_not_raised_by_vllms_code_gets_nothing(fake: Path, shipped_error) -> None:
    release, _, message, _ = shipped_error
    own = run(fake, "late", "not-vllm", message, plugin=False, FAKE_VLLM_VERSION=release)
    assert run(fake, "late", "not-vllm", message, plugin=True, FAKE_VLLM_VERSION=release) == own


def _raised_through(message: str, raiser: str = "vllm.kbtest_checks") -> BaseException:
    """An exception raised in module `raiser` (file /x/<its path>.py), called from vLLM's arg_utils."""
    inner: dict[str, Any] = {"__name__": raiser}
    exec(compile("def check(m):\n    raise ValueError(m)\n", f"/x/{raiser.replace('.', '/')}.py", "exec"), inner)
    outer: dict[str, Any] = {"__name__": "vllm.engine.arg_utils", "check": inner["check"]}
    exec(compile("def build(m):\n    check(m)\n", "/x/vllm/engine/arg_utils.py", "exec"), outer)
    try:
        outer["build"](message)
    except ValueError as e:
        return e
    raise AssertionError("not raised")


def test_the_paste_names_only_the_file_of_the_raise_and_the_causes_come_first() -> None:
    """kb explain prefers a template raised in a file the traceback names: a file that only passed
    the error on (arg_utils.py, where an older release raised many config errors) is not named."""
    from kb.vllm_plugin.answer import chain_of, paste_of

    exc = _raised_through("tp_size=16 must be divisible by dcp_size=3.")
    assert paste_of(chain_of(exc)) == ('  File "/x/vllm/kbtest_checks.py", line 2, in check\n'
                                       "ValueError: tp_size=16 must be divisible by dcp_size=3.\n")
    outside = _raised_through("from a library", raiser="pydantic_core.core")  # a validator's error: no vLLM frame
    try:
        raise RuntimeError("Engine core initialization failed.") from outside
    except RuntimeError as e:
        wrapped = e
    assert paste_of(chain_of(wrapped)) == ('ValueError: from a library\n'
                                           'RuntimeError: Engine core initialization failed.\n')


def test_an_exception_that_never_passed_through_vllm_is_not_answered(shipped_error) -> None:
    from kb.vllm_plugin.answer import answer_lines

    _, ident, message, _ = shipped_error
    environ = {"KB_CACHE_DIR": os.environ["KB_CACHE_DIR"]}
    assert answer_lines(ValueError(message), environ) == []
    lines = answer_lines(_raised_through(message), environ)
    assert lines[1].startswith(f"{OURS}{ident} /")


# --- failure modes: vLLM's own output unchanged ------------------------------------------------------
def test_the_off_switch(fake: Path, shipped_error) -> None:
    release, _, message, _ = shipped_error
    own = run(fake, "late", "raise", message, plugin=False, FAKE_VLLM_VERSION=release)
    for off in ("0", "false", "OFF"):
        assert run(fake, "late", "raise", message, plugin=True, FAKE_VLLM_VERSION=release, KB_VLLM_PLUGIN=off) == own


def test_an_exception_inside_the_plugin_prints_nothing(fake: Path, shipped_error) -> None:
    release, _, message, _ = shipped_error
    for scenario in ("raise", "forked"):
        own = run(fake, "late", scenario, message, plugin=False, FAKE_VLLM_VERSION=release)
        assert run(fake, "late", scenario, message, plugin=True, FAKE_VLLM_VERSION=release, DRIVER_BREAK="1") == own


def test_a_missing_or_damaged_index_falls_back_to_what_ships_with_kb(fake: Path, shipped_error, tmp_path: Path) -> None:
    """A site KB_VLLM_PLUGIN_SITE names without a match index, or with a damaged one, and a damaged
    answer store in kb's cache (removed, as `kb explain` removes it): the answer of the shipped data."""
    release, ident, message, _ = shipped_error
    own = run(fake, "late", "raise", message, plugin=False, FAKE_VLLM_VERSION=release)
    damaged = tmp_path / "damaged-site" / "api" / "match-index.json.gz"
    damaged.parent.mkdir(parents=True)
    damaged.write_bytes(gzip.compress(b'{"format": "kb-match/1", "entries": [{"id": 3}]}'))
    cache = Path(os.environ["KB_CACHE_DIR"])
    wheel = cache / "wheels" / f"vllm-{release}-py3-none-any.whl"
    wheel.parent.mkdir(parents=True, exist_ok=True)
    wheel.write_bytes(b"a wheel")
    stem = store_path(cache, release, store_key(wheel, errors_folder(None), False))
    stored = stem.parent / f"{stem.name}.{KIND}"
    stored.parent.mkdir(parents=True, exist_ok=True)
    stored.write_bytes(b"kb-answers/1 not a digest\n{}\n")
    for site in (tmp_path / "no-site", damaged.parent.parent):
        got = run(fake, "late", "raise", message, plugin=True, FAKE_VLLM_VERSION=release,
                  KB_VLLM_PLUGIN_SITE=str(site))
        assert_unchanged(got, own)
        assert assert_after(got["err"], own["err"])[1].startswith(f"{OURS}{ident} /{release}/errors/{ident}/ ")
    assert not stored.exists()


def test_an_unknown_release_is_answered_by_the_nearest_one_said_so(fake: Path, shipped_error) -> None:
    release, ident, message, _ = shipped_error
    newer = f"{release}.post99"
    own = run(fake, "late", "raise", message, plugin=False, FAKE_VLLM_VERSION=newer)
    got = run(fake, "late", "raise", message, plugin=True, FAKE_VLLM_VERSION=newer)
    assert_unchanged(got, own)
    title, short, _ = assert_after(got["err"], own["err"])
    assert title.endswith(f" (vLLM {release}, the release kb knows nearest to yours, {newer})")
    assert short.startswith(f"{OURS}{ident} /{release}/errors/{ident}/ ")


def test_a_site_named_by_the_environment_answers(fake: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "api").mkdir(parents=True)
    (site / "api" / "match-index.json.gz").write_bytes(gzip.compress(json.dumps(_fixture_index(tmp_path)).encode()))
    message = PASTE.removeprefix("ValueError: ")
    got = run(fake, "late", "raise", message, plugin=True, KB_VLLM_PLUGIN_SITE=str(site), FAKE_VLLM_VERSION="0.2.0")
    title, short, _ = ours(got["err"])
    assert title.endswith(" (vLLM 0.1.0, the release of the site KB_VLLM_PLUGIN_SITE names; yours is 0.2.0)")
    assert short.startswith(f"{OURS}{TP_ID} /0.1.0/errors/{TP_ID}/ With config.json num_attention_heads = 6")


# --- no cost at start ------------------------------------------------------------------------------
def test_loading_the_plugin_imports_nothing_heavy() -> None:
    """What vLLM's plugin loader imports and calls: kb's package, its error types and the hooks,
    nothing that reads answers (the matcher, JSON, YAML, the cache's paths). The standard
    library's modules vLLM itself has loaded by then are loaded first."""
    code = ("import __future__, collections.abc, contextlib, dataclasses, importlib, logging, os, sys, threading, "
            "types, typing\n"
            "before = set(sys.modules)\n"
            "from kb.vllm_plugin import register\n"
            "register()\n"
            "print(' '.join(sorted(set(sys.modules) - before)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    added = set(done.stdout.split())
    assert {m for m in added if m.split(".")[0] == "kb"} == {"kb", "kb.errors", "kb.vllm_plugin",
                                                              "kb.vllm_plugin.hooks"}
    heavy = {"json", "gzip", "yaml", "jsonschema", "jinja2", "markdown", "platformdirs", "pygments", "git", "lunr",
             "traceback", "multiprocessing"}
    assert not added & heavy


def test_the_package_registers_the_plugin_and_its_extra() -> None:
    """What vLLM's loader finds (`vllm.general_plugins`) and the extra `pip install 'vllm-error-kb[vllm]'`."""
    import importlib
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    (name, target), = project["entry-points"]["vllm.general_plugins"].items()
    assert name == "vllm-error-kb" and "vllm" in project["optional-dependencies"]
    module, _, attribute = target.partition(":")
    assert callable(getattr(importlib.import_module(module), attribute))


# --- the shipped data: a release's index without its wheel --------------------------------------------
def test_the_shipped_index_of_a_release_holds_its_ids_with_curated_fixes_by_history(tmp_path: Path) -> None:
    old = Wording("a" * 16, "Old wording of {x}.", "vllm/a.py", 3, "f", "ValueError", "0.1.0", "0.1.0", None,
                  "0.2.0", "b" * 16, "b" * 16)
    new = Wording("b" * 16, "New wording of {x}.", "vllm/a.py", 4, "f", "ValueError", "0.2.0", "0.3.0", "b" * 16,
                  None, "b" * 16)
    gone = Wording("c" * 16, "Gone since 0.2.0: {y}", "vllm/c.py", 9, "g", "TypeError", "0.1.0", "0.1.0", None,
                   "0.2.0", "c" * 16)
    errors = tmp_path / "errors"
    errors.mkdir()
    (errors / "new.yaml").write_text(f"id: {'b' * 16}\nfile: vllm/a.py\nmeaning: It means.\n"
                                     "solutions:\n  - Set `--x` to 2.\n")
    shipped = (("0.1.0", "0.2.0", "0.3.0"), (old, new, gone))
    first = shipped_index("0.1.0", errors, shipped)
    assert first["release"] == "0.1.0" and [e["id"] for e in first["entries"]] == ["a" * 16, "c" * 16]
    (a, c) = first["entries"]
    assert a["solution"] == "Set `--x` to 2." and a["curated"] and a["chain"] == "b" * 16  # the entry of its successor
    assert a["parts"] == ["Old wording of ", "."] and a["title"] == "Old wording of {x}."
    assert "solution" not in c and not c["curated"]
    assert [e["id"] for e in shipped_index("0.3.0", errors, shipped)["entries"]] == ["b" * 16]
    with pytest.raises(KeyError):
        shipped_index("0.4.0", errors, shipped)


@pytest.mark.parametrize(("name", "nearest"), [
    ("0.2.0", "0.2.0"), ("0.2.1", "0.2.0"), ("0.3.0.dev4+gabc", "0.2.0"), ("0.3.0.post1", "0.3.0"),
    ("9.0", "0.3.0"), ("0.0.1", "0.1.0"), ("main", "0.3.0"), (None, "0.3.0")])
def test_the_nearest_release_is_the_newest_known_one_before(name: Optional[str], nearest: str) -> None:
    assert nearest_release(name, ("0.1.0", "0.2.0", "0.3.0")) == nearest
    assert nearest_release("0.2.0", ()) is None


def _fixture_index(tmp_path: Path) -> dict[str, Any]:
    """The match index of tests/test_explain_terminal.py's tree (release 0.1.0): derived checks,
    so a paste's own values are put to them."""
    from kb.jobs import match_index_for
    from kb.scan.source import SourceSpec

    tree, errors = tree_and_entries(tmp_path / "fixture")
    index: dict[str, Any] = json.loads(read_text(match_index_for(SourceSpec(source_dir=str(tree)), errors), 10**9))
    return index
