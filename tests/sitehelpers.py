from __future__ import annotations

import contextlib
import gzip
import http.server
import json
import threading
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any, Optional

from fixture_tree import tree_files, write_tree
from kb.records.merge import attach_set_by, build_records
from kb.scan.scanner import scan
from kb.scan.source import from_dir
from kb.site.build import BuildOptions, BuildReport, build_site

EVIL = '''
def evil(x):
    if x == "<b>":
        raise ValueError(f"<script>alert('x')</script> bad {x} & more")
'''


def index_json(site: Path, name: str) -> Any:
    """A built site's api/<name>.json.gz (the match or the search index), unpacked."""
    return json.loads(gzip.decompress((site / "api" / f"{name}.json.gz").read_bytes()))


def unpacked_json(data: bytes) -> Any:
    """A fetched index: gzipped JSON."""
    return json.loads(gzip.decompress(data))


def fixture_scan(root: Path, extra: Optional[dict[str, str]] = None):
    files = tree_files("0.1.0", broken=False) | {"vllm/entrypoints/evil.py": EVIL} | (extra or {})
    write_tree(root, files)
    with from_dir(root, include_vendored=False) as t:
        return scan(t, jobs=1)


def build_fixture(tmp_path: Path, out: Optional[Path] = None, site_url: Optional[str] = None,
                  extra: Optional[dict[str, str]] = None) -> tuple[Path, BuildReport]:
    result = fixture_scan(tmp_path / "tree", extra)
    out = out or tmp_path / "site"
    report = build_site(result, BuildOptions(out, site_url=site_url, jobs=1), attach_set_by(build_records(result), result.config))
    return out, report


@contextlib.contextmanager
def pages_like_host(site: Path) -> Iterator[str]:
    """A static host as GitHub Pages is one: the site under a sub-path (/kb/), its 404.html for any
    missing path, no redirects; the URL of the site's top (`http://127.0.0.1:<port>/kb`)."""

    class Handler(http.server.SimpleHTTPRequestHandler):
        def translate_path(self, path: str) -> str:
            path = path.split("?", 1)[0]
            return super().translate_path(path[len("/kb"):] if path.startswith("/kb/") else "/missing-outside")

        def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
            body = (site / "404.html").read_bytes()
            self.send_response(404)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(Handler, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/kb"
    finally:
        server.shutdown()
        server.server_close()


# Templates and older wordings for the lookup's ranking and edge rules, shared by the Python
# tests of `kb explain` and the browser's agreement test.
LOOKUP_EXTRA = {"vllm/lookup.py": '''
def lora(model, rank, name, value):
    if rank == 1:
        raise ValueError(f"{model} does not support LoRA")
    if rank == 2:
        raise ValueError(f"Model {model} does not support LoRA, but LoRA is enabled. Support for this model "
                         "may be added in the future.")
    if rank == 3:
        raise ValueError(f"{name} must be at least 1, got {value}.")
    if rank == 4:
        raise ValueError(f"max_tokens must be at least 1, got {value}.")
    if rank == 5:
        raise ValueError(f"Unknown quantization method: {name}. Must be one of {value}.")
    if rank == 6:
        raise ValueError(f"The {name} prompt (length {value}) is longer than the maximum model length of {model}. "
                         f"{rank}")
    if rank == 7:
        raise ValueError(f"{name} is not supported for quantization method {value}. Supported dtypes: {model}")
    if rank == 8:
        raise ValueError(f"{name} is not supported.")
'''}
LORA_TEMPLATE = ("Model {model} does not support LoRA, but LoRA is enabled. Support for this model may be added "
                 "in the future.")


def lookup_wordings(result):
    """The current LoRA error raised since 0.6, and two older ids of the same text (moved files)."""
    from kb.model import Wording

    (site,) = [s for s in result.sites if s.template == LORA_TEMPLATE]
    return (
        Wording(site.id, site.template, site.file, site.line, site.fact.qualname, "ValueError", "0.6.6.post1",
                "0.33.0", site.id, None, site.id),
        Wording("0ld0000000000a00", LORA_TEMPLATE, "vllm/model_loader.py", 10, "get_model", "ValueError", "0.2.7",
                "0.3.3", None, "0.4.3", "0ld0000000000b00"),
        Wording("0ld0000000000b00", LORA_TEMPLATE, "vllm/model_loader/loader.py", 20, "get_model", "ValueError",
                "0.4.3", "0.5.5", None, "0.6.6.post1", "0ld0000000000b00"),
    )


def build_lookup_fixture(tmp_path: Path) -> Path:
    """A fixture site whose match index holds LOOKUP_EXTRA and the older wordings."""
    result = fixture_scan(tmp_path / "tree", LOOKUP_EXTRA)
    out = tmp_path / "site"
    build_site(result, BuildOptions(out, jobs=1), attach_set_by(build_records(result), result.config), wordings=lookup_wordings(result))
    return out


LOOKUP_PASTES = [
    "[Usage]: Model Qwen2ForCausalLM does not support LoRA, but LoRA is enabled. Support for this model may be "
    "added in the future",
    "pip list: vllm==0.5.3\nValueError: Model Qwen2ForCausalLM does not support LoRA, but LoRA is enabled. Support "
    "for this model may be added in the future.",
    "vLLM version 0.3.0\n\nModel Qwen2ForCausalLM does not support LoRA, but LoRA is enabled. Support for this "
    "model may be added in the future.",
    "但遇到了ValueError: Model Qwen2VLForConditionalGeneration does not support LoRA, but LoRA is enabled.的问题，请问",
    "Error code: 400 - {'object': 'error', 'message' 'max_tokens must be at least 1, got -2815., 'type' "
    "'BadRequestError', 'param': None, 'code': 400}",
    "I got this:\n```\nUnknown quantization method: gptq. Must be one of ['awq', 'squeezellm']\n```\n",
    "ERROR 11-30 12:00:00 [x.py:1] worker said: MyModel does not support LoRA (see above)",
    "ValueError: Model Qwen2 does not sup\nport LoRA, but LoRA is enabled. Support for this model may be added in "
    "the fu\nture.",
    "ValueError: Model Qwen2 does not support LoRA,but LoRA is enabled.Support for this model may be added in the "
    "future .",
    "INFO 11-30 12:00:00 [loggers.py:1] Engine 000: Avg prompt throughput: 12.5 tokens/s, Avg generation throughput: "
    "80.1 tokens/s, Running: 3 reqs\n\nValueError: Model Qwen2 does not support LoRA, but LoRA is enabled. Supp",
    "ValueError: [address=0.0.0.0:37591, pid=324770] The decoder prompt (length 17772) is longer than the maximum "
    "model length of 16384.",
    '{"detail":"Upstream error, b\'{\\"error\\":{\\"message\\":\\"Unknown quantization method: gptq. Must be one of '
    '[\\\\\'awq\\\\\', \\\\\'gptq_marlin\\\\\']\\"}}\'"}',
    "  File &quot;/x/vllm/config.py&quot;, line 1\nValueError: Unknown quantization method: gptq. Must be one of "
    "[&#39;awq&#39;].",
    "ValueError: torch.bfloat16 is not supported for quantization method gptq",
    "ValueError: [torch.float16, torch.bfloat16] is not supported for quantization method gptq. Suppor",
    "loading failed: bf16 and fp16 is not supported for quantization method gptq",
]
