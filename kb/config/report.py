"""The flag table as `kb flags` prints it: text for people, JSON for programs."""

from __future__ import annotations

import json
from typing import Any

from kb.config.model import ConfigModel, Flag
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
