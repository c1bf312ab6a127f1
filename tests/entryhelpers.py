from __future__ import annotations

import textwrap
from pathlib import Path

from kb.scan.ids import error_id

DCP_MAX_FILE = "vllm/config/dcp.py"
DCP_MAX = '''
class DcpLimits:
    def verify_dcp_limits(self, parallel_config):
        tensor_parallel_size = parallel_config.tensor_parallel_size
        decode_context_parallel_size = parallel_config.decode_context_parallel_size
        if decode_context_parallel_size > 1 and not self.use_mla:
            total_num_kv_heads = self.get_total_num_kv_heads()
            max_dcp_size = tensor_parallel_size // total_num_kv_heads
            if decode_context_parallel_size > max_dcp_size:
                raise ValueError(
                    "`--decode-context-parallel-size` "
                    f"({decode_context_parallel_size}) exceeds the maximum "
                    f"supported value ({max_dcp_size}) for "
                    f"`--tensor-parallel-size` ({tensor_parallel_size}) and "
                    f"{total_num_kv_heads} model KV heads."
                )
'''
DCP_MAX_TEMPLATE = ("`--decode-context-parallel-size` ({decode_context_parallel_size}) exceeds the maximum supported value "
                    "({max_dcp_size}) for `--tensor-parallel-size` ({tensor_parallel_size}) and {total_num_kv_heads} "
                    "model KV heads.")
DCP_MAX_ID = error_id(DCP_MAX_TEMPLATE, DCP_MAX_FILE)
DCP_ID = "d97d5d8528e2b364"
DCP_TEMPLATE = ("The model's number of query heads per KV head ({num_q_per_kv}) must be divisible by "
                "`--decode-context-parallel-size` ({decode_context_parallel_size}) for GQA/MQA.")
DCP_GUARD = ("decode_context_parallel_size > 1 and not self.use_mla and num_q_per_kv % decode_context_parallel_size != 0")
DCP_MAX_GUARD = "decode_context_parallel_size > 1 and not self.use_mla and decode_context_parallel_size > max_dcp_size"

MEANING = ("Decode context parallelism splits the query heads that share one KV head across the DCP ranks, so the "
           "group size num_attention_heads // num_key_value_heads must be a multiple of the DCP size; this fixture "
           "entry says so at length to pass the length rule.")

DCP_ENTRY = f'''
id: {DCP_ID}
file: vllm/config/model.py
message: "{DCP_TEMPLATE}"
meaning: |
  {MEANING}
solutions:
  - Set `--decode-context-parallel-size` to a divisor of the group size.
example_fix:
  language: shell
  model_config: {{num_attention_heads: 48, num_key_value_heads: 8}}
  before: vllm serve org/m --tensor-parallel-size 16 --decode-context-parallel-size 4
  after: vllm serve org/m --tensor-parallel-size 16 --decode-context-parallel-size 2
related: [{DCP_MAX_ID}]
check:
  inputs: [num_attention_heads, num_key_value_heads, kv_lora_rank, tensor_parallel_size, decode_context_parallel_size]
  raises_when: "decode_context_parallel_size > 1 and kv_lora_rank == 0 and (num_attention_heads // num_key_value_heads) % decode_context_parallel_size != 0"
  source_bindings:
    self.use_mla: "kv_lora_rank > 0"
    total_num_attention_heads: num_attention_heads
    self.get_total_num_kv_heads(): num_key_value_heads
    parallel_config.decode_context_parallel_size: decode_context_parallel_size
  cases:
    - {{inputs: {{num_attention_heads: 48, num_key_value_heads: 8, kv_lora_rank: 0, tensor_parallel_size: 16, decode_context_parallel_size: 4}}, raises: true}}
    - {{inputs: {{num_attention_heads: 48, num_key_value_heads: 8, kv_lora_rank: 0, tensor_parallel_size: 16, decode_context_parallel_size: 3}}, raises: false}}
verified:
  release: 0.1.0
  guard: "{DCP_GUARD}"
'''

DCP_MAX_ENTRY = f'''
id: {DCP_MAX_ID}
message: "{DCP_MAX_TEMPLATE}"
meaning: |
  {MEANING} The maximum DCP size is tensor_parallel_size // num_key_value_heads.
solutions:
  - Lower `--decode-context-parallel-size` to at most `tensor_parallel_size // num_key_value_heads`.
example_fix:
  language: shell
  model_config: {{num_attention_heads: 48, num_key_value_heads: 8}}
  before: vllm serve org/m -tp 16 -dcp 3
  after: vllm serve org/m -tp 16 -dcp 2
check:
  inputs: [num_key_value_heads, kv_lora_rank, tensor_parallel_size, decode_context_parallel_size]
  raises_when: "decode_context_parallel_size > 1 and kv_lora_rank == 0 and decode_context_parallel_size > tensor_parallel_size // num_key_value_heads"
  source_bindings:
    self.use_mla: "kv_lora_rank > 0"
    parallel_config.tensor_parallel_size: tensor_parallel_size
    parallel_config.decode_context_parallel_size: decode_context_parallel_size
    self.get_total_num_kv_heads(): num_key_value_heads
  cases:
    - {{inputs: {{num_key_value_heads: 8, kv_lora_rank: 0, tensor_parallel_size: 16, decode_context_parallel_size: 3}}, raises: true}}
    - {{inputs: {{num_key_value_heads: 8, kv_lora_rank: 0, tensor_parallel_size: 16, decode_context_parallel_size: 2}}, raises: false}}
    - {{inputs: {{num_key_value_heads: 8, kv_lora_rank: 512, tensor_parallel_size: 16, decode_context_parallel_size: 8}}, raises: false}}
verified:
  release: 0.1.0
  guard: "{DCP_MAX_GUARD}"
'''


def write_entries(folder: Path, entries: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in entries.items():
        (folder / name).write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return folder


FAMILY_EXPLANATION = ("Decode context parallelism adds no GPUs: it shards the KV cache across the tensor-parallel ranks "
                      "that hold copies of one KV head, so the DCP size is bounded by those copies and must split the "
                      "query heads that share a KV head evenly; this fixture family says so at length.")


def family_yaml(members: list[str], title: str = "DCP checks", explanation: str = FAMILY_EXPLANATION) -> str:
    """errors/families/<slug>.yaml with these members."""
    return (f"title: {title}\nexplanation: |\n  {explanation}\nmembers:\n"
            + "".join(f"  - {m}\n" for m in members))


def write_family(errors: Path, name: str, text: str) -> Path:
    folder = errors / "families"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text, encoding="utf-8")
    return folder / name
