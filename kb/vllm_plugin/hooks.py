"""Where the plugin hears of an error on its way out, in every process vLLM starts:

- an exception that ends the process or a thread: `sys.excepthook` and `threading.excepthook`,
  each chained after the one before (vLLM's own output first, then ours);
- an exception vLLM logs as the root cause (`logger.exception(...)`: the engine core's "EngineCore
  failed to start.", a worker's "WorkerProc failed to start."), in the processes vLLM starts: a
  filter on vLLM's loggers.

vLLM configures logging again in each child process (`logging.config.dictConfig`), which empties
the handler lists of the `vllm` logger and of all its children, but keeps their filters. So the
filter, not a handler, is what stays: on an error record carrying an exception, it appends a
one-time handler to the end of the handler list the record goes through last, which prints our
lines after vLLM's own handlers have written the record, to the stream they wrote it to, and
removes itself. A process forked from one with the plugin (vLLM's default for the engine core and
the workers) has the filter put on the loggers it has then.

Everything here is guarded: an exception inside the plugin is swallowed, and vLLM's own output
is never touched. Each exception is answered once per process."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
from collections.abc import Callable
from types import TracebackType
from typing import IO, Any, Optional

_MARK = "_kb_vllm_plugin"  # set on the hooks installed here: never chained twice
_KEEP = 64  # exceptions answered lately (the same one logged, then ending the process, is answered once)
_answered: list[BaseException] = []
_state = {"installed": False, "at_fork": False}


def install() -> None:
    """The hooks of this process, once (vLLM may call its plugins more than once)."""
    if not _state["installed"]:
        _state["installed"] = True
        if not getattr(sys.excepthook, _MARK, False):
            sys.excepthook = _chained_excepthook(sys.excepthook)
        if not getattr(threading.excepthook, _MARK, False):
            threading.excepthook = _chained_thread_hook(threading.excepthook)
    watch_loggers()
    if not _state["at_fork"] and hasattr(os, "register_at_fork"):
        _state["at_fork"] = True
        os.register_at_fork(after_in_child=_after_fork)


def _after_fork() -> None:
    with contextlib.suppress(Exception):
        watch_loggers()


def _chained_excepthook(previous: Callable[..., Any]) -> Callable[..., Any]:
    def hook(kind: type[BaseException], value: BaseException, tb: Optional[TracebackType]) -> None:
        previous(kind, value, tb)
        report(value, sys.stderr)

    setattr(hook, _MARK, True)
    return hook


def _chained_thread_hook(previous: Callable[..., Any]) -> Callable[..., Any]:
    def hook(args: Any) -> None:
        previous(args)
        report(getattr(args, "exc_value", None), sys.stderr)

    setattr(hook, _MARK, True)
    return hook


class _Watch(logging.Filter):
    """On vLLM's loggers: arms a one-time handler for an error record carrying an exception."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            if record.levelno >= logging.ERROR and record.exc_info and isinstance(record.exc_info[1], Exception):
                _arm(record, record.exc_info[1])
        except Exception:
            pass
        return True


_WATCH = _Watch()


def watch_loggers() -> None:
    """Put the filter on the `vllm` logger and each of its children this process has (none is made)."""
    for name, logger in list(logging.Logger.manager.loggerDict.items()):
        if (name == "vllm" or name.startswith("vllm.")) and isinstance(logger, logging.Logger) \
                and _WATCH not in logger.filters:
            logger.addFilter(_WATCH)


def _arm(record: logging.LogRecord, exc: BaseException) -> None:
    """Append the one-time handler where the record's handlers end, in a process vLLM started
    (the engine core, a worker: there a logged exception is the root cause of a failure; the
    main process's errors that end it reach the excepthook, and a request's error a server logs
    is no business of ours), when some handler of vLLM's writes the record (without one,
    Python's last resort prints it: ours must not take its place)."""
    if not _started_by_vllm():
        return
    logger: Optional[logging.Logger] = logging.getLogger(record.name)
    last = None
    stream: Optional[IO[str]] = None
    writes = False
    while logger is not None:
        for h in logger.handlers:
            if not isinstance(h, _After) and record.levelno >= h.level:
                writes = True
                stream = getattr(h, "stream", None) or stream
        last = logger
        logger = logger.parent if logger.propagate else None
    if writes and last is not None and not _already(exc, mark=False):
        last.addHandler(_After(last, record, exc, stream))


def _started_by_vllm() -> bool:
    """A child process (vLLM starts its engine core and workers with multiprocessing)."""
    mp = sys.modules.get("multiprocessing")
    return mp is not None and mp.parent_process() is not None


class _After(logging.Handler):
    """The last handler of one record: prints our lines for its exception, then leaves."""

    def __init__(self, logger: logging.Logger, record: logging.LogRecord, exc: BaseException,
                 stream: Optional[IO[str]]) -> None:
        super().__init__()
        self._logger, self._record, self._exc, self._stream = logger, record, exc, stream

    def handle(self, record: logging.LogRecord) -> bool:  # no filters, no lock of our own needed
        if record is self._record:
            with contextlib.suppress(Exception):
                self._logger.removeHandler(self)
            report(self._exc, self._stream or sys.stderr)
        return True

    def emit(self, record: logging.LogRecord) -> None:  # handle() does the work
        pass


def _already(exc: BaseException, mark: bool = True) -> bool:
    """Whether `exc` was answered in this process (and, with `mark`, it is now)."""
    if any(e is exc for e in _answered):
        return True
    if mark:
        _answered.append(exc)
        del _answered[:-_KEEP]
    return False


def report(exc: Optional[BaseException], stream: Optional[IO[str]]) -> None:
    """Our lines for `exc` on `stream`, when it is a vLLM error kb knows; never an exception."""
    try:
        if not isinstance(exc, Exception) or stream is None or _already(exc):
            return
        from kb.vllm_plugin import turned_off
        from kb.vllm_plugin.answer import answer_lines

        if turned_off(os.environ):
            return
        lines = answer_lines(exc, os.environ)
        if lines:
            stream.write("".join(line + "\n" for line in lines))
            stream.flush()
    except Exception:
        pass
