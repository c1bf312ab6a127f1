"""Runs INSIDE the oracle venv: each request's sampling parameters through vLLM's own
`SamplingParams(**fields)` (its __post_init__ checks) and then `SamplingParams.verify` (the checks
the engine runs as it takes the request), with a model config that says what kb's example model
(a Llama of config.json's BASE_CONFIG, kb/derived/fix.py) gives those checks: vLLM's default
`max_logprobs` (20), its vocabulary size and max_model_len, not a diffusion model, no speculative
decoding, no structured-outputs config, no tokenizer. stdin: a JSON list of field objects;
stdout: one result per object: {"outcome": "ok"} or {"outcome": "error", "exception", "message"}.
An AttributeError of the stand-in (a check that reads more of the model config) is "unknown"."""

import json
import sys
import types

from vllm.sampling_params import SamplingParams


class _Model(types.SimpleNamespace):
    def get_vocab_size(self) -> int:
        return self.vocab_size


MODEL = _Model(max_logprobs=20, vocab_size=128256, max_model_len=8192, is_diffusion=False)


def one(fields: dict) -> dict:
    try:
        params = SamplingParams(**fields)  # JSON's Infinity and NaN arrive as Python's floats
        params.verify(MODEL, None, None, None)
    except AttributeError as e:
        return {"outcome": "unknown", "message": str(e)}
    except Exception as e:  # noqa: BLE001 - the error vLLM raises is the label
        return {"outcome": "error", "exception": type(e).__name__, "message": str(e)}
    return {"outcome": "ok"}


print(json.dumps([one(f) for f in json.load(sys.stdin)]))
