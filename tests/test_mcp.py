"""`kb mcp` started as a subprocess and driven by the MCP SDK's own client over stdio: its tools
listed, each called, the answers compared with what the CLI prints for the same input."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fixture_tree import tree_files, write_tree

mcp_client = pytest.importorskip("mcp.client.client")
mcp_stdio = pytest.importorskip("mcp.client.stdio")
DCP = "d97d5d8528e2b364"
FILLED = ("The model's number of query heads per KV head (6) must be divisible by "
          "`--decode-context-parallel-size` (4) for GQA/MQA.")


def cli_json(*args: str) -> Any:
    words = list(args)
    at = words.index("--") if "--" in words else len(words)
    done = subprocess.run([sys.executable, "-m", "kb", *words[:at], "--json", *words[at:]], capture_output=True,
                          text=True, timeout=300)
    return json.loads(done.stdout)


async def session(tree: Path, calls: list[tuple[str, dict[str, Any]]]) -> tuple[list[str], list[Any]]:
    params = mcp_stdio.StdioServerParameters(command=sys.executable, args=["-m", "kb", "mcp", "--source", str(tree)],
                                             env=dict(os.environ))
    async with mcp_client.Client(params) as client:
        listed = await client.list_tools()
        answers = []
        for name, arguments in calls:
            result = await client.call_tool(name, arguments)
            assert not result.is_error, result
            answers.append(json.loads(result.content[0].text))
        return sorted(t.name for t in listed.tools), answers


def test_the_mcp_tools_answer_as_the_cli_does(tmp_path: Path) -> None:
    tree = write_tree(tmp_path / "tree", tree_files("0.1.0", broken=False))
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"num_attention_heads": 48, "num_key_value_heads": 8}))
    command = "vllm serve m -tp 16 -dcp 4"
    names, (explained, searched, record, checked, fitted, releases) = asyncio.run(session(tree, [
        ("explain", {"text": FILLED}),
        ("search_errors", {"query": FILLED, "limit": 3}),
        ("get_error", {"id": DCP}),
        ("check_launch", {"command": command, "config_json": {"num_attention_heads": 48, "num_key_value_heads": 8}}),
        ("fit", {"command": command, "config_json": {"num_attention_heads": 48}, "hardware": {"gpu_name": "h100"}}),
        ("list_releases", {}),
    ]))
    assert names == ["check_launch", "explain", "fit", "get_error", "list_releases", "search_errors"]
    release = str(tree)
    assert explained.pop("release") == release and explained == cli_json("explain", "--source", str(tree), FILLED)
    assert searched["release"] == release and searched["results"][0]["id"] == DCP
    assert searched["results"] == cli_json("search", "--source", str(tree), "--limit", "3", FILLED)["results"]
    assert record["release"] == release and record["record"]["id"] == DCP
    built = subprocess.run([sys.executable, "-m", "kb", "build", "--source", str(tree), "-o", str(tmp_path / "site"),
                            "--quiet"], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    assert record["record"] == json.loads((tmp_path / "site" / "api" / "errors" / DCP).read_text())
    cli = cli_json("check", "--source", str(tree), "--model-config", str(config), "--", *command.split())
    assert checked.pop("release") == release and checked == cli
    assert "error" in fitted and "parser" in fitted["error"]  # the fixture tree has no `vllm serve` parser
    assert releases["release"] == release and release in releases["releases"]
