"""Run inside the oracle venv: the fields of SamplingParams (msgspec) and of the OpenAI
request models (pydantic), with their defaults; stdout is JSON."""

import json
import sys

import msgspec


def shown(value):
    try:
        json.dumps(value)
        return {"default": value, "exact": True}
    except TypeError:
        return {"default": repr(value), "exact": False}


out = {}
from vllm.sampling_params import SamplingParams  # noqa: E402

fields = {}
for f in msgspec.structs.fields(SamplingParams):
    if f.name.startswith("_"):
        continue
    if f.default is not msgspec.NODEFAULT:
        fields[f.name] = {**shown(f.default), "required": False}
    elif f.default_factory is not msgspec.NODEFAULT:
        fields[f.name] = {**shown(f.default_factory()), "required": False}
    else:
        fields[f.name] = {"default": None, "exact": True, "required": True}
out["SamplingParams"] = fields

from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest  # noqa: E402
from vllm.entrypoints.openai.completion.protocol import CompletionRequest  # noqa: E402

for cls in (ChatCompletionRequest, CompletionRequest):
    fields = {}
    for name, info in cls.model_fields.items():
        if info.is_required():
            fields[name] = {"default": None, "exact": True, "required": True}
        else:
            fields[name] = {**shown(info.get_default(call_default_factory=True)), "required": False}
    out[cls.__name__] = fields
json.dump({"models": out}, sys.stdout, indent=1, sort_keys=True)
