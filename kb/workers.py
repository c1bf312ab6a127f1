"""Worker processes for the scan and the page rendering, which never outlive kb: killed with
`kill -9`, kb cannot stop them, so each worker watches its parent and exits once it is gone."""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ProcessPoolExecutor

WATCH_INTERVAL = 0.5  # seconds between two looks at the parent


def worker_pool(workers: int) -> ProcessPoolExecutor:
    """A process pool whose workers exit when this process dies, however it dies."""
    return ProcessPoolExecutor(max_workers=workers, initializer=_watch_parent, initargs=(os.getpid(),))


def _watch_parent(parent: int) -> None:
    """In a worker: a thread that ends the process when its parent is gone (it is then adopted
    by another process, so its parent id changes)."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(WATCH_INTERVAL)
        os._exit(1)

    if os.getppid() != parent:
        os._exit(1)
    threading.Thread(target=watch, name="kb-watch-parent", daemon=True).start()
