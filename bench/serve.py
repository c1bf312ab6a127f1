"""kb serve under load: 50 concurrent clients, 2,000 requests of a page, each on a new
connection (loopback only), against kb's server and against the same server with
socketserver's default listen queue of 5. Prints latency percentiles, errors and throughput.

    python bench/serve.py [--site DIR] [--clients 50] [--requests 2000]

Without --site it builds the test fixture site into a temporary folder (with a throw-away cache).
"""

from __future__ import annotations

import argparse
import http.client
import os
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVER = """
import sys
from pathlib import Path
from kb.site.serve import make_server, SiteServer
SiteServer.request_queue_size = int(sys.argv[2])
srv = make_server(Path(sys.argv[1]), 0)
print(srv.server_address[1], flush=True)
srv.serve_forever()
"""


def fixture_site(folder: Path) -> Path:
    sys.path.insert(0, str(ROOT / "tests"))
    os.environ["KB_CACHE_DIR"] = str(folder / "cache")
    from sitehelpers import build_fixture

    site, _ = build_fixture(folder)
    return site


def one(port: int, path: str) -> tuple[float, str]:
    start = time.perf_counter()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", path)
        resp = conn.getresponse()
        resp.read()
        conn.close()
        outcome = "ok" if resp.status == 200 else f"HTTP {resp.status}"
    except (OSError, http.client.HTTPException) as e:
        outcome = type(e).__name__ if not isinstance(e, socket.timeout) else "timeout"
    return time.perf_counter() - start, outcome


def run(site: Path, queue: int, clients: int, requests: int, path: str) -> None:
    proc = subprocess.Popen([sys.executable, "-c", SERVER, str(site), str(queue)], stdout=subprocess.PIPE,
                            text=True, cwd=ROOT)
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        one(port, path)  # warm
        start = time.perf_counter()
        with ThreadPoolExecutor(max_workers=clients) as pool:
            results = list(pool.map(lambda _: one(port, path), range(requests)))
        wall = time.perf_counter() - start
    finally:
        proc.terminate()
        proc.wait()
    times = sorted(t for t, _ in results)
    errors: dict[str, int] = {}
    for _, outcome in results:
        if outcome != "ok":
            errors[outcome] = errors.get(outcome, 0) + 1

    def pct(p: float) -> float:
        return times[min(len(times) - 1, int(p * len(times)))] * 1000

    print(f"listen queue {queue:5d}: p50 {pct(0.5):7.1f} ms  p90 {pct(0.9):7.1f} ms  p99 {pct(0.99):7.1f} ms  "
          f"max {times[-1] * 1000:7.1f} ms  {requests / wall:7.0f} req/s  "
          f"errors: {', '.join(f'{k} x{v}' for k, v in sorted(errors.items())) or 'none'}")


def main() -> None:
    from kb.site.serve import REQUEST_QUEUE

    ap = argparse.ArgumentParser()
    ap.add_argument("--site", type=Path, help="a built site (default: the test fixture site, built now)")
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--path", default="/", help="the page every request asks for")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kb-bench-serve-") as tmp:
        site = args.site or fixture_site(Path(tmp))
        print(f"{args.requests} requests of {args.path} from {args.clients} concurrent clients, "
              f"a new connection each, loopback")
        for queue in (REQUEST_QUEUE, 5):
            run(site, queue, args.clients, args.requests, args.path)
        print(f"(kb serve uses a listen queue of {REQUEST_QUEUE}; 5 is socketserver's default)")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
