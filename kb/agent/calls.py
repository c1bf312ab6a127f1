"""Tool calls of `kb mcp`, each on a thread of its own and bounded in time: the server answers other
requests while one runs, a call past its limit is answered with CallTimeout and stopped (an
exception raised in its thread at its next Python instruction), and at most `most` run at once
(a call waits for a free place within its own limit)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import ctypes
import threading
from collections.abc import Callable
from typing import Any

import anyio

from kb.errors import CallTimeout

DEFAULT_SECONDS = 120.0  # a cold release's first load takes seconds, a check of a hostile tree minutes
MOST_AT_ONCE = 4


class _Stopped(BaseException):
    """Raised in a call's thread once it is past its limit; a BaseException so that no
    `except Exception` in kb swallows it (every `except BaseException` there cleans up and re-raises)."""


class Calls:
    def __init__(self, seconds: float = DEFAULT_SECONDS, most: int = MOST_AT_ONCE) -> None:
        self.seconds, self.most = seconds, most
        self.threads: list[threading.Thread] = []

    async def run(self, name: str, fn: Callable[[], Any]) -> Any:
        """fn's value or exception, or CallTimeout after `seconds` (fn's thread is then stopped)."""
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        thread = threading.Thread(target=_work, args=(fn, future), name=f"kb mcp {name}", daemon=True)
        try:
            with anyio.fail_after(self.seconds):
                while self._running() >= self.most:
                    await anyio.sleep(0.05)
                self.threads.append(thread)
                thread.start()
                return await asyncio.wrap_future(future)
        except TimeoutError:
            _stop(thread)
            raise CallTimeout(f"no answer within {self.seconds:g} s (kb mcp --call-timeout); the call was stopped",
                              name) from None
        except anyio.get_cancelled_exc_class():  # by the client or at shutdown: the work is no longer wanted
            _stop(thread)
            raise

    def _running(self) -> int:
        self.threads = [t for t in self.threads if t.is_alive()]
        return len(self.threads)


def _work(fn: Callable[[], Any], future: concurrent.futures.Future[Any]) -> None:
    try:
        try:
            value = fn()
        except BaseException as e:  # the caller gets it (a _Stopped call has no caller left)
            _settle(future, e)
        else:
            _settle(future, None, value)
    except _Stopped:  # it came as the call was ending
        pass


def _settle(future: concurrent.futures.Future[Any], error: BaseException | None, value: Any = None) -> None:
    try:
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)
    except concurrent.futures.InvalidStateError:  # the caller gave up (time-out, cancel)
        pass


def _stop(thread: threading.Thread) -> None:
    """Raise _Stopped in the thread (CPython's PyThreadState_SetAsyncExc); it takes effect at the
    thread's next Python instruction, so a long call into C ends when that returns."""
    if thread.ident is not None and thread.is_alive():
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(_Stopped))
