"""The flag table as `kb flags` prints it: text for people, JSON for programs."""

from __future__ import annotations

import json
from typing import Any

from kb.configmodel import JSON, ConfigModel, Flag
from kb.model import TreeInfo

FLAGS_FORMAT = "kb-flags/1"
HELP_WIDTH = 100


def flags_json(info: TreeInfo, model: ConfigModel) -> str:
    doc: dict[str, Any] = {"release": info.release, "ref": info.ref, "commit": info.commit, **model.to_json()}
    doc["format"] = FLAGS_FORMAT
    return json.dumps(doc, sort_keys=True, indent=1, ensure_ascii=False) + "\n"


def _default(f: Flag) -> str:
    if not f.default_known:
        return f"not read ({f.default})"
    if not f.default_exact:
        return str(f.default)
    return json.dumps(f.default, ensure_ascii=False)


def _cut(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def flags_text(info: TreeInfo, model: ConfigModel) -> str:
    """One block per argument group, in the order vLLM adds them; flags sorted as --help sorts them."""
    where = info.release or info.ref
    lines = [f"vLLM {where}: {len(model.flags)} `vllm serve` flags in {len(model.groups)} groups, "
             f"read from {model.parser_file}"]
    order = [g.title for g in model.groups]
    titles = ["positional arguments", "options", *[t for t in order if t not in ("positional arguments", "options")]]
    for title in titles:
        members = [f for f in model.flags if f.group == title]
        if not members:
            continue
        lines += ["", f"{title}:"]
        for f in members:
            head = ", ".join(f.visible) or f.dest
            facts = [f"default: {_cut(_default(f), HELP_WIDTH)}"]
            if f.choices is not None:
                facts.append("choices: " + _cut(", ".join(json.dumps(c, ensure_ascii=False) for c in f.choices),
                                                 HELP_WIDTH))
            if f.config_class:
                facts.append(f"sets: {f.config_class}.{f.config_field}")
            if f.deprecated:
                facts.append("deprecated")
            lines.append(f"  {head}")
            lines += [f"      {x}" for x in facts]
            if f.help:
                lines.append(f"      {_cut(f.help, HELP_WIDTH)}")
    return "\n".join(lines) + "\n"


def _value(value: JSON, exact: bool, known: bool) -> str:
    if not known:
        return f"not read ({value})"
    if not exact:
        return str(value)
    return json.dumps(value, ensure_ascii=False)


def env_text(info: TreeInfo, model: ConfigModel) -> str:
    """`kb flags --env`: one block per variable of vllm/envs.py, sorted by name."""
    lines = [f"vLLM {info.release or info.ref}: {len(model.env)} environment variables, read from vllm/envs.py"]
    for e in model.env:
        lines += ["", f"  {e.name}", f"      default: {_cut(_value(e.default, e.default_exact, e.default_known), HELP_WIDTH)}"]
        if e.type:
            lines.append(f"      type: {e.type}")
        if e.doc:
            lines.append(f"      {_cut(e.doc, HELP_WIDTH)}")
    return "\n".join(lines) + "\n"


def config_keys_text(info: TreeInfo, model: ConfigModel) -> str:
    """`kb flags --config-json`: each key with every place vLLM reads it, its fallbacks and default."""
    lines = [f"vLLM {info.release or info.ref}: {len(model.config_keys)} config.json keys read by vLLM"]
    for k in model.config_keys:
        lines += ["", f"  {k.key}"]
        for r in k.reads:
            facts = [f"{r.via}", f"{r.file}:{r.line} {r.function}"]
            others = [a for a in r.alternatives if a != k.key]
            if others:
                facts.append("tried with: " + ", ".join(r.alternatives))
            facts.append(("default: " + _cut(json.dumps(r.default, ensure_ascii=False), 60)) if r.has_default
                         else "required")
            lines.append("      " + "; ".join(facts))
    return "\n".join(lines) + "\n"


def request_text(info: TreeInfo, model: ConfigModel) -> str:
    """`kb flags --request`: the fields of each request model, in class order."""
    models = list(dict.fromkeys(f.model for f in model.request_fields))
    lines = [f"vLLM {info.release or info.ref}: {len(model.request_fields)} request fields of "
             f"{', '.join(models) or 'no request model'}"]
    for name in models:
        members = [f for f in model.request_fields if f.model == name]
        lines += ["", f"{name} ({members[0].file}):"]
        for f in members:
            facts = [f"type: {_cut(f.type, HELP_WIDTH)}",
                     "required" if f.required else
                     f"default: {_cut(_value(f.default, f.default_exact, f.default_known), HELP_WIDTH)}"]
            if f.constraints:
                facts.append("constraints: " + ", ".join(f"{k}={json.dumps(v)}" for k, v in f.constraints))
            lines.append(f"  {f.name}")
            lines += [f"      {x}" for x in facts]
            if f.doc:
                lines.append(f"      {_cut(f.doc, HELP_WIDTH)}")
    return "\n".join(lines) + "\n"
