"""`kb new <id>`: a skeleton entry prefilled with facts from the scan, for a person to complete."""

from __future__ import annotations

from typing import Any

import yaml

from kb.model import Record, TreeInfo
from kb.records.present import one_line, trigger_text

TODO = "TODO"


class _Dumper(yaml.SafeDumper):
    pass


def _str(dumper: yaml.SafeDumper, value: str) -> Any:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def skeleton(record: Record, tree: TreeInfo) -> str:
    site = record.sites[0]
    data = {
        "id": record.id,
        "file": record.file,
        "message": record.template,
        "meaning": f"{TODO}: what this error means, in terms of what the user controls (at least 200 characters).\n",
        "solutions": [f"{TODO}: the most likely fix first, with exact flags and values."],
        "trigger": trigger_text(site, markdown=True) + "\n",
        "prevention": [f"{TODO}: how to avoid this error, specific to it."],
        "common_situations": [],
        "references": [],
        "no_check": f"{TODO}: write a check (see errors/README.md), or say why none can predict this error.",
        "verified": {"release": tree.release or tree.ref, "guard": site.fact.guard},
    }
    where = one_line(f"{tree.release or tree.ref}: {site.file}:{site.line} in {site.fact.qualname}")  # stays a comment
    head = f"# Written by `kb new` from vLLM {where}.\n# Complete every {TODO}, then run `kb lint`.\n"
    return head + yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)
