"""`kb mcp` started as a subprocess and driven by the MCP SDK's own client over stdio: its tools
listed, each called, the answers compared with what the CLI prints for the same input. Then driven
line by line as a hostile client would: every request with an id answered (a JSON-RPC error, or a
tool error carrying kb's message), the server still up after hundreds of bad calls, a call past its
time limit answered as a tool error."""

from __future__ import annotations

import asyncio
import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Optional

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
    """Each call's JSON answer, or ("isError", its first text) for a tool error."""
    params = mcp_stdio.StdioServerParameters(command=sys.executable, args=["-m", "kb", "mcp", "--source", str(tree)],
                                             env=dict(os.environ))
    async with mcp_client.Client(params) as client:
        listed = await client.list_tools()
        answers: list[Any] = []
        for name, arguments in calls:
            result = await client.call_tool(name, arguments)
            text = result.content[0].text
            answers.append(("isError", text) if result.is_error else json.loads(text))
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
    assert cli["configJson"]["source"] == "given"  # the tool names its config_json argument, not its temporary file
    assert checked.pop("configJson") == {**cli.pop("configJson"), "path": "config_json"}
    assert checked.pop("release") == release and checked == cli
    assert fitted[0] == "isError" and fitted[1].startswith("fit: ") and "parser" in fitted[1]  # the tree has none
    assert releases["release"] == release and release in releases["releases"]


class Wire:
    """`kb mcp` over stdio driven a line at a time, as a hostile client would: raw lines in, each
    reply line out as JSON."""

    def __init__(self, tmp_path: Path, *options: str) -> None:
        self.errors = tmp_path / "mcp-stderr.txt"
        with open(self.errors, "wb") as err:
            self.proc = subprocess.Popen([sys.executable, "-m", "kb", "mcp", *options], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=err, env=dict(os.environ))
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        self.send({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}})
        assert self.reply()["id"] == "init"
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def send(self, message: Any) -> None:
        assert self.proc.stdin is not None
        raw = message if isinstance(message, bytes) else json.dumps(message).encode()
        self.proc.stdin.write(raw + b"\n")
        self.proc.stdin.flush()

    def reply(self, timeout: float = 120) -> Any:
        return json.loads(self.lines.get(timeout=timeout))

    def call(self, rid: int, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        self.send({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": tool, "arguments": arguments}})
        answer = self.reply()
        assert answer["id"] == rid, answer
        return answer["result"]

    def close(self) -> str:
        """Ends the input; the server exits 0 and its stderr holds no traceback."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        assert self.proc.wait(timeout=120) == 0
        text = self.errors.read_text(errors="replace")
        assert "Traceback" not in text, text
        return text


@pytest.fixture
def wire(tmp_path: Path) -> Iterator[Wire]:
    tree = write_tree(tmp_path / "tree", tree_files("0.1.0", broken=False))
    w = Wire(tmp_path, "--source", str(tree))
    yield w
    if w.proc.poll() is None:
        w.proc.kill()


def nested(levels: int) -> str:
    return '{"a":' * levels + "1" + "}" * levels


ANSWERED = [  # a line that carries an id, the id the reply carries, the JSON-RPC error code
    (b'[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]', 1, -32600),  # a batch: answered as one
    (b'{"jsonrpc":"2.0","id":2}', 2, -32600),
    (b'{"jsonrpc":"1.0","id":3,"method":"tools/list"}', 3, -32600),
    (b'{"jsonrpc":"2.0","id":4,"method":"tools/call","params":"abc"}', 4, -32602),
    (b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"search_errors",'
     b'"arguments":{"query":"\\ud800"}}}', 5, -32602),
    (b'{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"check_launch","arguments":'
     b'{"command":"vllm serve m","config_json":' + nested(300).encode() + b"}}}", 6, -32602),
    (b'{"jsonrpc":"2.0","id":7,', 7, -32700),
    (b'{"jsonrpc":"2.0","id":8,"method":"tools/list","x":"\xff"}', 8, -32700),
    (b'{"jsonrpc":"2.0","id":9,"method":"no/such/method"}', 9, -32601),
    (b'{"jsonrpc":"2.0","id":10,"method":"tools/list","params":[1]}', 10, -32602),
    (b'{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":5}}', 11, -32602),
    (b'{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"explain","arguments":"x"}}', 12, -32602),
    (b'{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"explain","arguments":{"text":"'
     + b"x" * (9 * 1024 * 1024) + b'"}}}', 13, -32600),  # longer than a message may be
    (b'{"jsonrpc":"2.0","id":14,"method":"tools/call","params":{"name":"x","arguments":' + b"[" * 5000, 14, -32600),
    (b'{"jsonrpc":"2.0","id":15,"method":"tools/list","params":{"a":[' + b"[]," * 250_001 + b"1]}}", 15, -32600),
    (b"not json", None, -32700),
    (b"5", None, -32600),
    (b"[]", None, -32600),
    (b'{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}', None, -32600),
    (b'{"jsonrpc":"2.0","id":null,"method":"tools/list"}', None, -32600),
]
UNANSWERED = [  # notifications, well formed or not: never answered
    b'{"jsonrpc":"2.0","method":"notifications/no-such-thing"}',
    b'{"jsonrpc":"1.0","method":"tools/list"}',
    b'{"jsonrpc":"2.0","method":"tools/call","params":"abc"}',
    b'[{"jsonrpc":"2.0","method":"tools/list"}]',
    b"",
]


def test_every_request_with_an_id_is_answered_and_no_notification(wire: Wire) -> None:
    answers = []
    for raw, rid, code in ANSWERED:
        wire.send(raw)
        answer = wire.reply()
        error = answer[0] if isinstance(answer, list) else answer  # a batch is answered with an array
        assert error["id"] == rid and error["error"]["code"] == code, (raw[:100], answer)
        answers.append(error["error"]["message"])
    assert answers[5] == "params.arguments.config_json.a.a...: nested deeper than 64 levels (kb mcp's limit)"
    assert answers[4] == "params.arguments.query: a lone UTF-16 surrogate, which is not text"
    assert answers[2] == 'jsonrpc: expected "2.0", got "1.0"'
    for raw in UNANSWERED:
        wire.send(raw)
    wire.send({"jsonrpc": "2.0", "id": "after", "method": "ping"})
    assert wire.reply() == {"jsonrpc": "2.0", "id": "after", "result": {}}  # the notifications got nothing
    wire.close()


CHECK = "vllm serve m -tp 16 -dcp 4"
BAD_CALLS = [  # a tool, its bad arguments, how kb's message begins
    ("check_launch", {"command": CHECK, "config_json": {"num_attention_heads": float("inf")}},
     "check_launch: config_json: num_attention_heads: "),
    ("check_launch", {"command": CHECK, "config_json": {"num_attention_heads": 1e308}},
     "check_launch: config_json: num_attention_heads: "),
    ("check_launch", {"command": CHECK, "config_json": {"num_attention_heads": 10**400}},
     "check_launch: config_json: num_attention_heads: "),
    ("check_launch", {"command": 5}, "check_launch: command: expected a string, got 5"),
    ("check_launch", {}, "check_launch: command: missing"),
    ("check_launch", {"command": 'vllm serve "m'}, "check_launch: command: not a shell command"),
    ("check_launch", {"command": CHECK, "hardware": {"gpu_count": "8"}},
     'check_launch: hardware: gpu_count: expected an integer, got "8"'),
    ("check_launch", {"command": CHECK, "config_json": json.loads(nested(40))},
     "check_launch: config_json: nested deeper than 32 levels"),
    ("explain", {"text": "x" * 1_000_001}, "explain: text: 1,000,001 characters; kb mcp takes at most 1,000,000"),
    ("explain", {"txt": "x"}, "explain: 'txt': no such argument"),
    ("check_launch", {"command": CHECK, "config_json": {"k": "x" * 2 * 1024 * 1024}},
     "check_launch: config_json: 2,097,161 characters as JSON; kb mcp takes at most 2,097,152"),
    ("search_errors", {"query": "x", "limit": 0}, "search_errors: limit: expected an integer from 1 to 50, got 0"),
    ("search_errors", {"query": "x", "limit": "abc"}, 'search_errors: limit: expected an integer, got "abc"'),
    ("get_error", {"id": "x", "release": "../../etc"}, "get_error: release: not a vLLM version"),
    ("get_error", {"id": "no-such-id"}, 'get_error: id: no error "no-such-id"'),
    ("fit", {"command": CHECK, "config_json": {"num_attention_heads": 10**400}, "hardware": {"gpu_memory_gib": 1e308}},
     "fit: "),
    ("no_such_tool", {}, "tools/call: no tool 'no_such_tool'"),
]


def test_bad_tool_arguments_are_tool_errors_with_kbs_message_and_the_server_stays_up(wire: Wire) -> None:
    for n in range(200):
        tool, arguments, begins = BAD_CALLS[n % len(BAD_CALLS)]
        result = wire.call(n, tool, arguments)
        text = result["content"][0]["text"]
        assert result["isError"] is True and text.startswith(begins), (tool, arguments, text)
        assert "Error executing tool" not in text
    searched = wire.call(200, "search_errors", {"query": FILLED})
    assert not searched["isError"] and searched["structuredContent"]["results"][0]["id"] == DCP
    checked = wire.call(201, "check_launch", {"command": CHECK, "config_json": {"num_attention_heads": 48,
                                                                                "num_key_value_heads": 8}})
    assert not checked["isError"] and checked["structuredContent"]["problems"] == []
    wire.close()


def test_a_call_past_the_time_limit_is_a_tool_error_and_the_server_answers_on(tmp_path: Path) -> None:
    tree = write_tree(tmp_path / "tree", tree_files("0.1.0", broken=False))
    wire = Wire(tmp_path, "--call-timeout", "0.01", "--source", str(tree))
    try:
        result = wire.call(1, "get_error", {"id": DCP})  # loading the release's records takes far longer
        assert result == {"content": [{"type": "text", "text": "get_error: no answer within 0.01 s (kb mcp "
                                       "--call-timeout); the call was stopped"}], "isError": True}
        wire.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        assert len(wire.reply()["result"]["tools"]) == 6
        wire.close()
    finally:
        if wire.proc.poll() is None:
            wire.proc.kill()


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "1e9"])
def test_a_call_timeout_out_of_range_is_a_usage_error(value: str, tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "kb", "mcp", "--source", str(tmp_path), "--call-timeout", value],
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and done.stderr.splitlines()[-1].startswith("Error: --call-timeout: expected seconds")


def checks() -> tuple[Any, Any, Any]:
    from kb.agent.arguments import checked
    from kb.agent.mcp_server import Releases, tools
    from kb.agent.wire import check_line
    from kb.scan.source import SourceSpec

    return check_line, checked, tools(Releases(SourceSpec(vllm_version="0.0.0"), None))


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                    max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(tool=st.sampled_from(["explain", "search_errors", "get_error", "check_launch", "fit", "list_releases"]),
       arguments=st.dictionaries(st.sampled_from(["text", "query", "id", "command", "config_json", "hardware",
                                                  "release", "limit", "other"]), JSON, max_size=4))
def test_any_tool_arguments_are_taken_or_refused_with_a_located_message(tool: str, arguments: dict[str, Any]) -> None:
    from kb.errors import UsageError

    _, checked, table = checks()
    try:
        kwargs = checked(tool, table[tool], arguments)
    except UsageError as e:
        assert str(e).startswith(f"{tool}: ")
    else:
        assert set(kwargs) <= set(arguments)


@settings(max_examples=300, deadline=None)
@given(message=st.dictionaries(st.sampled_from(["jsonrpc", "id", "method", "params", "result"]), JSON, max_size=5)
       | JSON, raw=st.binary(max_size=40))
def test_any_line_is_passed_on_answered_or_a_notification(message: Any, raw: bytes) -> None:
    from kb.agent.wire import Reply

    check_line, _, _ = checks()
    check_line(raw)  # never raises
    checked: Optional[Any] = check_line(json.dumps(message).encode())
    has_id = isinstance(message, dict) and "id" in message
    if checked is None:  # only a notification, or an answer to the server, goes unanswered
        assert isinstance(message, list) or (isinstance(message, dict) and (not has_id or "method" not in message))
    if has_id and "method" in message and not isinstance(checked, Reply):
        assert getattr(checked, "id", None) == message["id"]
