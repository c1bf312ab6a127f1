"""`kb mcp`'s stdio in front of the MCP SDK: every line read is checked as a JSON-RPC 2.0 message
first, and answered here when it is not one the SDK can take (the SDK drops those unanswered):

- not UTF-8 or not JSON: -32700 (parse error);
- longer than MAX_MESSAGE_BYTES or holding more than MAX_OPENINGS `{` and `[` (both counted before
  parsing, so the memory a message takes is bounded), nested deeper than MAX_NESTING, a batch (MCP
  has none since 2025-06-18), `jsonrpc` not "2.0", no `method`, an id neither string nor integer,
  a lone UTF-16 surrogate: -32600 (invalid request);
- `params` not an object, or too deep or holding a lone surrogate: -32602 (invalid params).

The reply carries the request's id (read from the top level of the text even when the JSON does
not parse), or null when there is none to read; a notification (no id) is never answered. The
rest goes to the SDK, which answers an unknown method with -32601."""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, BinaryIO, Optional, Union

import anyio
import anyio.to_thread
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage
from mcp.types import JSONRPCMessage, jsonrpc_message_adapter
from pydantic import ValidationError

MAX_MESSAGE_BYTES = 4 * 1024 * 1024  # one line of the wire; the tools' own limits are in kb/agent/arguments.py
MAX_NESTING = 64  # levels of objects and arrays in one message
MAX_OPENINGS = 250_000  # `{` and `[` in one message (in strings too): Python spends ~100 bytes on each

PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS = -32700, -32600, -32602
RequestId = Union[str, int]
_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class Reply:
    """What the front answers itself: one JSON-RPC error, or a batch's list of them."""

    body: Union[dict[str, Any], list[dict[str, Any]]]

    def text(self) -> str:
        return json.dumps(self.body, separators=(",", ":"))  # ASCII: any text quoted in a message is escaped


Checked = Union[JSONRPCMessage, Reply, None]  # None: nothing to pass on and nothing to answer


def check_line(raw: bytes) -> Checked:
    """One line of the wire: the message for the SDK, the error reply, or None (a blank line, a
    bad notification, a response nobody waits for)."""
    raw = raw.rstrip(b"\r\n") if raw.endswith(b"\n") else raw
    if not raw.strip():
        return None
    if len(raw) > MAX_MESSAGE_BYTES:  # _read_line cut it
        return _error(_top_level_id(raw[:65536].decode("utf-8", "ignore")), INVALID_REQUEST,
                      f"a message of more than {MAX_MESSAGE_BYTES:,} bytes (kb mcp's limit), not read")
    openings = raw.count(b"{") + raw.count(b"[")
    if openings > MAX_OPENINGS:
        return _error(_top_level_id(raw[:65536].decode("utf-8", "ignore")), INVALID_REQUEST,
                      f"{openings:,} objects and arrays (`{{` and `[`); kb mcp reads at most {MAX_OPENINGS:,} in a message")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return _error(_top_level_id(raw[:e.start].decode("utf-8")), PARSE_ERROR, f"not UTF-8 (byte {e.start})")
    try:
        message = json.loads(text)
    except json.JSONDecodeError as e:
        return _error(_top_level_id(text), PARSE_ERROR, f"not JSON: {e.msg} (column {e.colno})")
    except RecursionError:
        return _error(_top_level_id(text), INVALID_REQUEST,
                      f"nested deeper than {MAX_NESTING} levels (kb mcp's limit)")
    except ValueError as e:  # an integer of more digits than Python converts
        return _error(_top_level_id(text), PARSE_ERROR, f"not JSON: {e}")
    if isinstance(message, list):
        return _batch(message)
    if not isinstance(message, dict):
        return _error(None, INVALID_REQUEST, f"expected a JSON-RPC message (a JSON object), got {_kind(message)}")
    return _check_message(message)


def _check_message(message: dict[str, Any]) -> Checked:
    has_id = "id" in message
    rid = message.get("id")
    good_id = _good_id(rid)

    def error(code: int, text: str) -> Optional[Reply]:
        return _error(rid if good_id else None, code, text) if has_id else None

    if message.get("jsonrpc") != "2.0":
        return error(INVALID_REQUEST, f'jsonrpc: expected "2.0", got {_shown(message.get("jsonrpc"))}')
    if has_id and not good_id:
        return error(INVALID_REQUEST, f"id: expected a string or an integer, got {_shown(rid)}")
    answer = "method" not in message and has_id and ("result" in message or "error" in message)
    if "method" not in message and not answer:
        return error(INVALID_REQUEST, "method: missing")
    if not answer and not isinstance(message["method"], str):
        return error(INVALID_REQUEST, f"method: expected a string, got {_shown(message['method'])}")
    if "params" in message and not isinstance(message["params"], dict):
        return error(INVALID_PARAMS, f"params: expected a JSON object, got {_kind(message['params'])}")
    if message.get("method") == "tools/call" and not answer:
        params = message.get("params") or {}
        if not isinstance(params.get("name"), str):
            return error(INVALID_PARAMS, f"params.name: expected the tool's name, got {_shown(params.get('name'))}")
        if params.get("arguments") is not None and not isinstance(params["arguments"], dict):
            return error(INVALID_PARAMS, f"params.arguments: expected a JSON object, got {_kind(params['arguments'])}")
    bad = _hostile(message)
    if bad is not None:
        where, what = bad
        return None if answer else error(INVALID_PARAMS if where.startswith("params") else INVALID_REQUEST,
                                          f"{where}: {what}")
    if answer:
        return _sdk(message)  # a client's answer to a request of the server's (none answered back)
    checked = _sdk(message)
    if checked is None:
        return error(INVALID_REQUEST, "not a JSON-RPC 2.0 request the MCP SDK reads")
    return checked


def _sdk(message: dict[str, Any]) -> Optional[JSONRPCMessage]:
    try:
        return jsonrpc_message_adapter.validate_python(message, by_name=False)
    except ValidationError:
        return None


def _batch(items: list[Any]) -> Optional[Reply]:
    """JSON-RPC 2.0 batches were dropped from MCP (2025-06-18): each request in one is answered
    -32600; the answers come as one array, as JSON-RPC answers a batch."""
    if not items:
        return _error(None, INVALID_REQUEST, "an empty batch")
    replies = []
    for item in items:
        if not isinstance(item, dict):
            replies.append(_body(None, INVALID_REQUEST, f"expected a JSON-RPC message, got {_kind(item)}"))
        elif "id" in item:
            rid = item["id"]
            replies.append(_body(rid if _good_id(rid) else None, INVALID_REQUEST,
                                 "batches are not part of MCP; send each message on a line of its own"))
    return Reply(replies) if replies else None


def _hostile(message: dict[str, Any]) -> Optional[tuple[str, str]]:
    """Where the message nests deeper than MAX_NESTING or holds a lone surrogate, and what; an
    explicit stack of the objects and arrays only, so a hostile message never meets Python's
    recursion limit nor costs a stack entry per value."""
    stack: list[tuple[Union[dict[str, Any], list[Any]], str, int]] = [(message, "", 0)]
    while stack:
        item, at, depth = stack.pop()
        if depth >= MAX_NESTING:
            return at, f"nested deeper than {MAX_NESTING} levels (kb mcp's limit)"
        for key, sub in item.items() if isinstance(item, dict) else enumerate(item):
            if isinstance(key, str) and _SURROGATE.search(key):
                return at or "message", "a key with a lone UTF-16 surrogate, which is not text"
            if isinstance(sub, str):
                if _SURROGATE.search(sub):
                    return _below(at, key), "a lone UTF-16 surrogate, which is not text"
            elif isinstance(sub, (dict, list)):
                stack.append((sub, _below(at, key), depth + 1))
    return None


def _below(at: str, key: Union[str, int]) -> str:
    """The location of an item, kept short: the first levels' keys, then `...`."""
    if at.endswith("...") or at.count(".") + at.count("[") >= 4:
        return at if at.endswith("...") else at + "..."
    if isinstance(key, int):
        return f"{at}[{key}]"
    return f"{at}.{key[:40]}" if at else key[:40]


def _good_id(rid: Any) -> bool:
    return (isinstance(rid, int) and not isinstance(rid, bool)) or (isinstance(rid, str) and not _SURROGATE.search(rid))


def _body(rid: Optional[RequestId], code: int, text: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": text}}


def _error(rid: Optional[RequestId], code: int, text: str) -> Reply:
    return Reply(_body(rid, code, text))


def _kind(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number")


def _shown(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return _kind(value)
    text = json.dumps(value[:60] if isinstance(value, str) else value)
    return text if len(text) <= 60 else text[:57] + "..."


_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_PLAIN = re.compile(r'[^"{}\[\]]+')
_ID_VALUE = re.compile(r'\s*:\s*("(?:[^"\\]|\\.)*"|-?\d{1,19}(?![.eE\d]))')


def _top_level_id(text: str) -> Optional[RequestId]:
    """The id of a message that does not parse as a whole, read from the top level of its text
    (a string or an integer after a key "id" outside every nested value, in its first 64 KiB), or None."""
    text = text[:65536].lstrip()
    if not text.startswith("{"):
        return None
    depth, i = 0, 0
    while i < len(text):
        c = text[i]
        if c == '"':
            m = _STRING.match(text, i)
            if m is None:
                return None
            i = m.end()
            if depth == 1 and m.group() == '"id"':
                value = _ID_VALUE.match(text, i)
                if value is not None:
                    try:
                        found = json.loads(value.group(1))
                    except ValueError:
                        return None
                    return found if _good_id(found) else None
            continue
        if c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
            if depth <= 0:
                return None
        else:
            m = _PLAIN.match(text, i)
            i = m.end() if m else i + 1
            continue
        i += 1
    return None


def _read_line(wire: BinaryIO) -> Optional[bytes]:
    """One line of at most MAX_MESSAGE_BYTES (a longer one is read through and returned cut, one
    byte over the limit); None at the end of the input."""
    line = wire.readline(MAX_MESSAGE_BYTES + 1)
    if not line:
        return None
    if len(line) > MAX_MESSAGE_BYTES and not line.endswith(b"\n"):
        rest = line
        while rest and not rest.endswith(b"\n"):
            rest = wire.readline(1024 * 1024)
    return line


def _claim_stdio() -> tuple[BinaryIO, BinaryIO, Callable[[], None]]:
    """The wire's own copies of stdin and stdout; fd 0 then reads nothing and fd 1 writes to
    stderr, so that nothing a tool prints can corrupt the wire. The returned function undoes it."""
    try:
        wire_in = os.fdopen(os.dup(0), "rb")
        wire_out = os.fdopen(os.dup(1), "wb")
    except OSError:
        return sys.stdin.buffer, sys.stdout.buffer, lambda: None
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    sys.stdout.flush()
    os.dup2(2, 1)

    def restore() -> None:
        sys.stdout.flush()
        os.dup2(wire_in.fileno(), 0)
        os.dup2(wire_out.fileno(), 1)
        wire_in.close()
        with contextlib.suppress(OSError):  # what the client did not read when it closed its end
            wire_out.close()

    return wire_in, wire_out, restore


Outgoing = Union[SessionMessage, Reply]


@asynccontextmanager
async def checked_stdio() -> AsyncIterator[tuple[MemoryObjectReceiveStream[Union[SessionMessage, Exception]],
                                                 MemoryObjectSendStream[SessionMessage]]]:
    """The streams the SDK's `Server.run` takes, fed by the checked lines of stdin; what the SDK
    and the checks answer is written to stdout one line each."""
    wire_in, wire_out, restore = _claim_stdio()
    to_sdk, from_wire = anyio.create_memory_object_stream[Union[SessionMessage, Exception]](0)
    to_wire, outgoing = anyio.create_memory_object_stream[Outgoing](64)
    from_sdk = to_wire.clone()
    written = anyio.Event()

    async def read() -> None:
        async with to_sdk, to_wire:
            while True:
                line = await anyio.to_thread.run_sync(_read_line, wire_in, abandon_on_cancel=True)
                if line is None:
                    return
                checked = await anyio.to_thread.run_sync(_check_safely, line)
                try:
                    if isinstance(checked, Reply):
                        await to_wire.send(checked)
                    elif checked is not None:
                        await to_sdk.send(SessionMessage(checked))
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):  # the server has ended
                    return

    async def write(stop: anyio.CancelScope) -> None:
        try:
            async with outgoing:
                async for item in outgoing:
                    await anyio.to_thread.run_sync(_write, wire_out, _text(item), abandon_on_cancel=True)
        except OSError:  # the client stopped reading: nothing more can be answered, the server ends
            stop.cancel()
        finally:
            written.set()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(read)
            tg.start_soon(write, tg.cancel_scope)
            try:
                yield from_wire, from_sdk
            finally:
                from_sdk.close()
                with anyio.move_on_after(10):
                    await written.wait()
                tg.cancel_scope.cancel()
    finally:
        restore()


def _check_safely(line: bytes) -> Checked:
    try:
        return check_line(line)
    except Exception as e:  # a defect of these checks must cost one message, not the server
        return _error(None, -32603, f"kb mcp could not read the message: {type(e).__name__}")


def _text(item: Outgoing) -> str:
    if isinstance(item, Reply):
        return item.text()
    try:
        return item.message.model_dump_json(by_alias=True, exclude_unset=True)
    except ValueError as e:  # e.g. text kb could not encode: the request still gets its answer
        rid = getattr(item.message, "id", None)
        return Reply(_body(rid if _good_id(rid) else None, -32603, f"kb mcp could not write its answer: {e}")).text()


def _write(wire: BinaryIO, text: str) -> None:
    wire.write(text.encode("utf-8", "backslashreplace") + b"\n")
    wire.flush()
