#!/usr/bin/env python3
"""Run one case through real vLLM's `vllm serve` argument parsing and config building (no engine).

    echo '{"argv": [...], "config": {...}, "hardware": {...}}' | python3 bench/oracle/run_case.py
    python3 bench/oracle/run_case.py case.json          # a case, or a JSON list of cases (--batch)

A case:
  argv      what follows `vllm serve` (required). "$MODEL" anywhere is replaced by the generated
            model folder; else, when "config" is given, the value of --model (or --model=...) is;
            else the folder is put first, as the positional model.
  config    a config.json dict: written to a fresh model folder with a tiny word-level
            tokenizer (tokenizer.json, tokenizer_config.json) unless "tokenizer": false.
  files     optional {name: text or JSON value}: more files for the model folder
            (e.g. generation_config.json).
  hardware  {"count", "capability", "memory_gib", "name", optional "sms", "nvlink"} of the fake
            GPUs (defaults: 8 x NVIDIA H100 80GB HBM3, 9.0, 80 GiB).
  env       optional extra environment variables (e.g. VLLM_USE_V2_MODEL_RUNNER).
  timeout   optional, seconds (default --timeout, 120).

Wherever vLLM's output names the temporary model folder, the case's own name for it (the --model
value it replaced, else "$MODEL") is put back, unless --keep.

Prints the result as JSON: {"outcome": "ok", "summary": {...}} or {"outcome": "error",
"stage": "argparse"|"validate"|"config"|"import", "exception": ..., "message": ...}, "timeout",
or "crash" (the child died without a result); always with "elapsed_s" (wall time of the child).
Runs on any python3; vLLM runs only in the oracle venv's own process (bench/oracle/inner/case.py),
offline (HF_HUB_OFFLINE=1, TRANSFORMERS_OFFLINE=1).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DEFAULT_VERSION, HERE, cache_root, oracle_env, venv_dir, venv_python  # noqa: E402

MODEL_TOKEN = "$MODEL"


def tiny_tokenizer(vocab_size: int | None) -> tuple[dict, dict]:
    """A word-level tokenizer (tokenizers' JSON format) and its tokenizer_config.json."""
    n = max(16, min(int(vocab_size or 32000), 32000))
    specials = ["<unk>", "<s>", "</s>", "<pad>"]
    vocab = {tok: i for i, tok in enumerate(specials)}
    for i in range(len(specials), n):
        vocab[f"w{i}"] = i
    tokenizer = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for i, t in enumerate(specials)],
        "normalizer": None,
        "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": None,
        "decoder": None,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "<unk>"},
    }
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>",
        "model_max_length": 1000000000000000019884624838656,
        "clean_up_tokenization_spaces": False,
    }
    return tokenizer, config


def write_model(folder: Path, case: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    config = case["config"]
    (folder / "config.json").write_text(json.dumps(config, indent=1))
    if case.get("tokenizer", True):
        tok, tok_cfg = tiny_tokenizer(config.get("vocab_size") if isinstance(config, dict) else None)
        (folder / "tokenizer.json").write_text(json.dumps(tok))
        (folder / "tokenizer_config.json").write_text(json.dumps(tok_cfg, indent=1))
    for name, content in (case.get("files") or {}).items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content if isinstance(content, str) else json.dumps(content, indent=1))


def place_model(argv: list[str], folder: str | None) -> tuple[list[str], str]:
    """(argv with the model folder in place, the name the case used for it)."""
    if folder is None:
        return list(argv), ""
    if any(MODEL_TOKEN in a for a in argv):
        return [a.replace(MODEL_TOKEN, folder) for a in argv], MODEL_TOKEN
    out = list(argv)
    for i, a in enumerate(out):
        if a == "--model" and i + 1 < len(out):
            name, out[i + 1] = out[i + 1], folder
            return out, name
        if a.startswith("--model="):
            name, out[i] = a.removeprefix("--model="), f"--model={folder}"
            return out, name
    return [folder, *out], MODEL_TOKEN


def unplace(value, folder: str, name: str):
    """Put the case's own name for the model back wherever vLLM echoed the temporary folder."""
    if isinstance(value, str):
        return value.replace(folder, name)
    if isinstance(value, list):
        return [unplace(v, folder, name) for v in value]
    if isinstance(value, dict):
        return {k: unplace(v, folder, name) for k, v in value.items()}
    return value


def run_case(case: dict, version: str = DEFAULT_VERSION, timeout: float = 120, keep: bool = False) -> dict:
    if not venv_python(version).exists():
        raise SystemExit(f"no oracle venv at {venv_dir(version)}: run python3 {HERE / 'setup.py'} first")
    work = Path(tempfile.mkdtemp(prefix="case-", dir=_cases_dir()))
    try:
        folder = None
        if case.get("config") is not None:
            folder = work / "model"
            write_model(folder, case)
            folder = str(folder)
        argv, model_name = place_model([str(a) for a in case.get("argv", [])], folder)
        env = oracle_env(case.get("hardware"), version)
        hw = case.get("hardware") or {}
        if "sms" in hw:
            env["FAKEGPU_SMS"] = str(hw["sms"])
        if "nvlink" in hw:
            env["FAKEGPU_NVLINK"] = "1" if hw["nvlink"] else "0"
        env.update({str(k): str(v) for k, v in (case.get("env") or {}).items()})
        result_file = work / "result.json"
        cmd = [str(venv_python(version)), str(HERE / "inner" / "case.py"), str(result_file), "--", *argv]
        t = time.monotonic()
        try:
            proc = subprocess.run(cmd, env=env, cwd=str(work), capture_output=True, text=True,
                                  timeout=float(case.get("timeout", timeout)), stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as e:
            err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
            return {"outcome": "timeout", "timeout_s": float(case.get("timeout", timeout)),
                    "elapsed_s": round(time.monotonic() - t, 2), "stderr_tail": err[-3000:]}
        elapsed = round(time.monotonic() - t, 2)
        if not result_file.exists():
            return {"outcome": "crash", "returncode": proc.returncode, "elapsed_s": elapsed,
                    "stderr_tail": proc.stderr[-3000:]}
        result = json.loads(result_file.read_text())
        result["elapsed_s"] = elapsed
        result["argv"] = argv
        if folder:
            if keep:
                result["model_dir"] = folder
            else:
                result = unplace(result, folder, model_name)
        return result
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


def _cases_dir() -> Path:
    d = cache_root() / "cases"
    d.mkdir(parents=True, exist_ok=True)
    return d


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("case", nargs="?", help="a case JSON file (default: stdin)")
    ap.add_argument("--version", default=DEFAULT_VERSION)
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--batch", action="store_true", help="the input is a JSON list of cases; print a list")
    ap.add_argument("--keep", action="store_true", help="keep the generated model folder")
    args = ap.parse_args(argv)
    text = Path(args.case).read_text() if args.case else sys.stdin.read()
    data = json.loads(text)
    if args.batch or isinstance(data, list):
        out = [run_case(c, args.version, args.timeout, args.keep) for c in data]
    else:
        out = run_case(data, args.version, args.timeout, args.keep)
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
