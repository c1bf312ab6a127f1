"""The stages of a long job, each said once it is done: what it made and how long it took.

`kb build` writes them to standard error when that is not a terminal (a CI log, which would
otherwise see nothing for a minute); a terminal gets the progress display instead."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Optional

# stage name, what it made ("1,512 files, 7,170 errors"), seconds it took
StageLog = Callable[[str, str, float], None]


class Stages:
    """Times consecutive stages: `done(name, what)` reports the time since the previous one."""

    def __init__(self, log: Optional[StageLog] = None) -> None:
        self.log = log
        self.start = time.perf_counter()

    def done(self, name: str, what: str) -> None:
        now = time.perf_counter()
        if self.log is not None:
            self.log(name, what, now - self.start)
        self.start = now


def stage_line(name: str, what: str, seconds: float) -> str:
    """`scan: 1,512 files, 7,170 errors, 6.1 s`"""
    return f"{name}: {what}, {seconds:.1f} s"
