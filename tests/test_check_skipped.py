"""`kb check` never says "all clear" for a launch it could not judge (issue #32): checks that could
raise but lack an input are named first, by title and by what would give the input, with an exit
code of their own (3); and the model's config.json is found on this machine when --model-config
is not given: a local model folder, or the local Hugging Face cache (kb/config/hfcache.py)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from kb.checks.modelconfig import find_config
from kb.checks.needs import CONFIG, HARDWARE, STARTUP, need_of
from kb.cli import main
from kb.config.hfcache import config_in_cache, hub_cache
from kb.errors import EXIT_FAILURE, EXIT_NOT_JUDGED, EXIT_OK, EXIT_USAGE

MODEL = "meta-llama/Llama-3.1-8B"
HEADS_ID = "f644a7c8e4fdc46c"  # Total number of attention heads (...) must be divisible by tensor parallel size (...)
HEADS_TITLE = "Total number of attention heads ({total_num_attention_heads}) must be divisible by tensor parallel…"
LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
         "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 32,
         "max_position_embeddings": 131072, "torch_dtype": "bfloat16", "vocab_size": 128256}
MAIN, OTHER = "a" * 40, "b" * 40  # snapshot commits


def hf_cache(hub: Path, model: str, snapshots: dict[str, dict[str, object]], refs: dict[str, str]) -> Path:
    """A Hugging Face cache as huggingface_hub writes it: blobs by hash, each snapshot's
    config.json a relative link to its blob, refs naming commits."""
    repo = hub / ("models--" + model.replace("/", "--"))
    for commit, config in snapshots.items():
        text = json.dumps(config)
        blob = repo / "blobs" / hashlib.sha256(text.encode()).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_text(text)
        link = repo / "snapshots" / commit / "config.json"
        link.parent.mkdir(parents=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    for ref, commit in refs.items():
        (repo / "refs" / ref).parent.mkdir(parents=True, exist_ok=True)
        (repo / "refs" / ref).write_text(commit)
    return repo


# --- the cache's layout, without kb check -------------------------------------------------------------
def test_the_cache_folder_is_huggingface_hubs() -> None:
    assert hub_cache({"HF_HUB_CACHE": "/a", "HF_HOME": "/b", "XDG_CACHE_HOME": "/c"}) == Path("/a")
    assert hub_cache({"HUGGINGFACE_HUB_CACHE": "/old", "HF_HOME": "/b"}) == Path("/old")
    assert hub_cache({"HF_HOME": "/b", "XDG_CACHE_HOME": "/c"}) == Path("/b/hub")
    assert hub_cache({"XDG_CACHE_HOME": "/c", "HOME": "/h"}) == Path("/c/huggingface/hub")
    assert hub_cache({"HOME": "/h"}) == Path("/h/.cache/huggingface/hub")
    assert hub_cache({"HF_HOME": "", "HOME": "/h"}) == Path("/h/.cache/huggingface/hub")  # empty is unset
    assert hub_cache({"HF_HOME": "$ROOT/hf", "ROOT": "/r"}) == Path("/r/hf/hub")  # expanded as huggingface_hub does


def test_a_config_json_in_the_cache_is_found_by_ref_or_commit(tmp_path: Path) -> None:
    env = {"HF_HUB_CACHE": str(tmp_path)}
    repo = hf_cache(tmp_path, MODEL, {MAIN: LLAMA, OTHER: {**LLAMA, "num_attention_heads": 48}},
                    {"main": MAIN, "v2": OTHER, "refs/pr/1": OTHER})
    found = config_in_cache(MODEL, None, env)
    assert found == repo / "snapshots" / MAIN / "config.json" and found.is_symlink()
    assert json.loads(found.read_text())["num_attention_heads"] == 32  # through the link to the blob
    assert config_in_cache(MODEL, "v2", env) == repo / "snapshots" / OTHER / "config.json"
    assert config_in_cache(MODEL, "refs/pr/1", env) == repo / "snapshots" / OTHER / "config.json"
    assert config_in_cache(MODEL, OTHER, env) == repo / "snapshots" / OTHER / "config.json"  # a commit needs no ref
    assert config_in_cache(MODEL, "v3", env) is None
    assert config_in_cache("meta-llama/Other", None, env) is None
    assert config_in_cache(MODEL, None, {"HF_HUB_CACHE": str(tmp_path / "none")}) is None  # no cache: no crash


def test_what_the_cache_holds_is_untrusted(tmp_path: Path) -> None:
    env = {"HF_HUB_CACHE": str(tmp_path / "hub")}
    outside = tmp_path / "outside" / "config.json"
    outside.parent.mkdir()
    outside.write_text("{}")
    repo = hf_cache(tmp_path / "hub", MODEL, {MAIN: LLAMA}, {"main": "../../../outside", "long": "a" * 300,
                                                              "dangling": "c" * 40})
    (repo / "snapshots" / ("c" * 40)).mkdir()
    (repo / "snapshots" / ("c" * 40) / "config.json").symlink_to(tmp_path / "gone")
    assert config_in_cache(MODEL, None, env) is None  # a ref leading out of the snapshots
    assert config_in_cache(MODEL, "long", env) is None
    assert config_in_cache(MODEL, "dangling", env) is None  # a link to a blob not (or not yet) there
    for revision in ("../../../outside", "/etc", "a//b", "."):
        assert config_in_cache(MODEL, revision, env) is None, revision
    for model in ("../x", "a/b/c", "", "a/..", "x\0y"):
        assert config_in_cache(model, None, env) is None, model


def test_a_local_model_folder_comes_before_the_cache(tmp_path: Path) -> None:
    folder = tmp_path / "llama"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(LLAMA))
    path, source = find_config(str(folder), None, {"HF_HUB_CACHE": str(tmp_path)})
    assert path == folder / "config.json" and source.how == "folder"
    path, source = find_config(str(tmp_path), None, {"HF_HUB_CACHE": str(tmp_path)})
    assert path is None and source.how == "none" and source.cache is None  # a folder without one: not the hub


def test_each_input_names_what_gives_it() -> None:
    assert need_of("num_attention_heads").options == ("--model-config",)
    assert need_of("num_attention_heads").source == CONFIG
    assert (need_of("gpu_count").source, need_of("gpu_count").options) == (HARDWARE, ("--gpu-count",))
    assert need_of("compute_capability").options == ("--compute-capability", "--gpu")
    assert need_of("max_model_len").source == CONFIG  # the model's max_position_embeddings, or --max-model-len
    assert need_of("max_num_batched_tokens").source == STARTUP


# --- kb check on the pinned release ---------------------------------------------------------------------
def kb_check(capsys: pytest.CaptureFixture[str], *words: str, options: tuple[str, ...] = ()) -> tuple[int, str]:
    code = main(["check", "--vllm-version", "0.34.0", *options, "--", "vllm", "serve", *words])
    return code, capsys.readouterr().out


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty Hugging Face cache, found through HF_HOME as huggingface_hub finds it."""
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    (tmp_path / "hf" / "hub").mkdir(parents=True)
    return tmp_path / "hf" / "hub"


@pytest.mark.release
def test_tp_3_without_the_models_config_is_not_judged(capsys: pytest.CaptureFixture[str], hub: Path) -> None:
    code, out = kb_check(capsys, MODEL, "-tp", "3", options=("--site-url", "https://kb.example.org/"))
    assert code == EXIT_NOT_JUDGED == 3 and code not in (EXIT_OK, EXIT_FAILURE, EXIT_USAGE)
    assert "No error predicted" not in out
    lines = out.splitlines()
    assert lines[0].startswith("Not judged: ") and "checks that could raise an error for this launch did not run" \
        in lines[0]
    assert lines[1] == "The other checks predict no error; that is not an all-clear."
    config_line = next(line for line in lines if "need the model's config.json" in line)
    assert config_line.endswith(": pass --model-config FILE_OR_DIR (or download the model so kb finds it in the "
                                "Hugging Face cache)")
    assert f"      (kb looked for {MODEL} in the Hugging Face cache, {hub}: not there)" in lines
    assert any(line.startswith("  ") and line.endswith("need the GPU count and the GPU's compute capability: pass "
                                                       "--gpu-count N; --compute-capability X.Y (or --gpu NAME)")
               for line in lines), out
    at = lines.index(f"  {HEADS_ID}  {HEADS_TITLE}  (needs num_attention_heads)")
    assert lines[at + 1] == f"      https://kb.example.org/0.34.0/errors/{HEADS_ID}/"  # the release checked against
    assert lines.index("Checks that need the model's config.json:") < at
    # the JSON says the same: each check with its title, what it needs and where that comes from
    code, out = kb_check(capsys, MODEL, "-tp", "3", options=("--json",))
    data = json.loads(out)
    assert code == EXIT_NOT_JUDGED and data["judged"] is False and data["predicted"] == []
    heads = next(s for s in data["skipped"] if s["id"] == HEADS_ID)
    assert heads == {"id": HEADS_ID, "title": HEADS_TITLE, "url": f"/0.34.0/errors/{HEADS_ID}/",
                     "missing": ["num_attention_heads"], "sources": ["config.json"],
                     "needs": [{"input": "num_attention_heads", "source": "config.json", "options": ["--model-config"]}]}
    assert data["configJson"] == {"source": "none", "path": None, "model": MODEL, "revision": None,
                                  "hfCache": str(hub)}


@pytest.mark.release
def test_the_models_config_in_the_hugging_face_cache_is_read(capsys: pytest.CaptureFixture[str], hub: Path) -> None:
    repo = hf_cache(hub, MODEL, {MAIN: LLAMA, OTHER: {**LLAMA, "num_attention_heads": 48}},
                    {"main": MAIN, "v2": OTHER})
    code, out = kb_check(capsys, MODEL, "-tp", "3")
    assert code == EXIT_FAILURE
    assert out.startswith("1 error predicted for this launch:")
    assert "    Total number of attention heads (32) must be divisible by tensor parallel size (3)." in out
    assert out.splitlines()[-1] == f"config.json: from the Hugging Face cache, {repo / 'snapshots' / MAIN / 'config.json'}"
    # --revision picks another snapshot: 48 heads divide by 3; the GPU given, every check is judged
    code, out = kb_check(capsys, MODEL, "-tp", "3", "--revision", "v2",
                         options=("--gpu", "h100", "--gpu-count", "8", "--json"))
    data = json.loads(out)
    assert code == EXIT_OK and data["judged"] is True and data["predicted"] == [] and data["skipped"] == []
    assert data["configJson"] == {"source": "hf-cache", "path": str(repo / "snapshots" / OTHER / "config.json"),
                                  "model": MODEL, "revision": "v2", "hfCache": str(hub)}
    code, out = kb_check(capsys, MODEL, "-tp", "3", "--revision", "v2", options=("--gpu", "h100", "--gpu-count", "8"))
    assert code == EXIT_OK and out.startswith("No error predicted by the checks whose inputs are known.")
    # --model-config wins over the cache
    given = hub.parent / "given.json"
    given.write_text(json.dumps({**LLAMA, "num_attention_heads": 48}))
    code, out = kb_check(capsys, MODEL, "-tp", "3", options=("--model-config", str(given)))
    assert code == EXIT_NOT_JUDGED and f"config.json: {given} (--model-config)" in out.splitlines()


@pytest.mark.release
def test_a_local_model_folder_is_read(capsys: pytest.CaptureFixture[str], hub: Path, tmp_path: Path) -> None:
    folder = tmp_path / "Llama-3.1-8B"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(LLAMA))
    code, out = kb_check(capsys, str(folder), "-tp", "3")
    assert code == EXIT_FAILURE and f"config.json: from the model's folder, {folder / 'config.json'}" in out
    assert "Total number of attention heads (32) must be divisible by tensor parallel size (3)." in out
    # vLLM reads the config of --hf-config-path when it is given
    code, out = kb_check(capsys, "some/model", "--hf-config-path", str(folder), "-tp", "3")
    assert code == EXIT_FAILURE and f"config.json: from the model's folder, {folder / 'config.json'}" in out
    # a folder without config.json is not looked up in the cache
    code, out = kb_check(capsys, str(tmp_path), "-tp", "3")
    assert code == EXIT_NOT_JUDGED and f"      ({tmp_path} is a local path without config.json)" in out.splitlines()


@pytest.mark.release
def test_a_broken_cache_is_no_crash(capsys: pytest.CaptureFixture[str], hub: Path, tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "no" / "such"))
    code, out = kb_check(capsys, MODEL, "-tp", "3")
    assert code == EXIT_NOT_JUDGED and out.startswith("Not judged: ")
    # a config.json in the cache that is not one is the same located error as a bad --model-config
    monkeypatch.setenv("HF_HOME", str(hub.parent))
    repo = hf_cache(hub, MODEL, {MAIN: LLAMA}, {"main": MAIN})
    blob = (repo / "snapshots" / MAIN / "config.json").resolve()
    blob.write_text("[1, 2]")
    code = main(["check", "--vllm-version", "0.34.0", "--", "vllm", "serve", MODEL, "-tp", "3"])
    err = capsys.readouterr().err
    assert code == EXIT_USAGE and err.splitlines()[-1] == (
        f"Error: {repo / 'snapshots' / MAIN / 'config.json'}: config.json must hold a JSON object")
