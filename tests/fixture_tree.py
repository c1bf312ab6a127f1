"""Small vLLM-shaped trees for tests, written to disk (or git) in tmp_path.

Kept as Python strings rather than as `vllm/*.py` files in the repository: vLLM-shaped
sources are never committed as a tree.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

MODEL_V1 = '''
from pydantic import field_validator
from vllm.config.utils import config


@config
class ModelConfig:
    max_model_len: int = 0

    def verify_with_parallel_config(self, parallel_config) -> None:
        total_num_attention_heads = self.hf_config.num_attention_heads
        tensor_parallel_size = parallel_config.tensor_parallel_size
        if total_num_attention_heads % tensor_parallel_size != 0:
            raise ValueError(
                f"Total number of attention heads ({total_num_attention_heads})"
                " must be divisible by tensor parallel size "
                f"({tensor_parallel_size})."
            )
        decode_context_parallel_size = parallel_config.decode_context_parallel_size
        if decode_context_parallel_size > 1 and not self.use_mla:
            total_num_kv_heads = self.get_total_num_kv_heads()
            num_q_per_kv = total_num_attention_heads // total_num_kv_heads
            if num_q_per_kv % decode_context_parallel_size != 0:
                raise ValueError(
                    "The model's number of query heads per KV head "
                    f"({num_q_per_kv}) must be divisible by "
                    "`--decode-context-parallel-size` "
                    f"({decode_context_parallel_size}) for GQA/MQA."
                )

    @field_validator("max_model_len")
    @classmethod
    def _check_len(cls, value):
        if value < 0:
            raise ValueError("max_model_len must be non-negative, got %d" % value)
        return value

    def __post_init__(self):
        if self.max_model_len == 1:
            raise ValueError("max_model_len of {} is too small".format(self.max_model_len))
'''

ERRORS_V1 = '''
class KBFixtureBase(ValueError):
    pass


class StructuredDecisionError(KBFixtureBase):
    pass


class NotAValueError(Exception):
    pass
'''

DECODING_V1 = '''
from vllm.errors import StructuredDecisionError, NotAValueError


def decide(kind):
    if kind == "a":
        raise StructuredDecisionError(f"cannot decide {kind}")
    elif kind == "b":
        raise NotAValueError("an exception class of the tree, not a ValueError")
    else:
        msg = "unknown kind: "
        msg += kind
        raise ValueError(msg)
'''

VERSION = '''
__version__ = version = "{version}"
__commit_id__ = commit_id = "g0123abcd"
'''

BROKEN = "def broken(:\n    raise ValueError('never seen')\n"

VENDORED = '''
def vendored():
    raise ValueError("from vendored code")
'''


def tree_files(version: str = "0.1.0", broken: bool = True, moved: bool = False) -> dict[str, str]:
    """The files of a fixture tree; `moved` shifts the DCP raise down by two lines."""
    model = MODEL_V1
    if moved:
        model = model.replace("    max_model_len: int = 0\n", "    max_model_len: int = 0\n    use_mla: bool = False\n    dtype: str = 'auto'\n")
    files = {
        "vllm/__init__.py": "",
        "vllm/_version.py": VERSION.format(version=version),
        "vllm/config/__init__.py": "",
        "vllm/config/model.py": model,
        "vllm/errors.py": ERRORS_V1,
        "vllm/decoding.py": DECODING_V1,
        "vllm/third_party/vendored.py": VENDORED,
        "setup.py": "raise ValueError('outside the package: never scanned')\n",
    }
    if broken:
        files["vllm/broken.py"] = BROKEN
    return files


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return root
