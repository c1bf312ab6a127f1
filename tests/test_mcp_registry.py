"""The MCP registry files shipped beside `kb mcp` (kb/agent/): `server.json` for the official MCP
registry, valid against its published schema, and `SKILL.md`, the usage note for agents, whose
tools are the server's own (names, arguments and descriptions), so neither can drift.

tests/data/mcp-server.schema.json is the registry's schema, vendored (the tests run offline):
https://github.com/modelcontextprotocol/registry/blob/145c2ec7c424d503a553a50c0efac6c48db407db/docs/reference/server-json/draft/server.schema.json
(its `$schema` example names the published https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json,
which server.json declares). The schema has no field for tools: they live in SKILL.md."""

from __future__ import annotations

import copy
import inspect
import json
import re
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import pytest

pytest.importorskip("mcp")

from kb.agent.arguments import MAX_OBJECT_CHARS, MAX_OBJECT_NESTING, MAX_TEXT, input_schema
from kb.agent.calls import DEFAULT_SECONDS, MOST_AT_ONCE
from kb.agent.mcp_server import MAX_LIMIT, Releases, tools
from kb.scan.source import SourceSpec
from kb.site.api import SiteInfo

ROOT = Path(__file__).resolve().parents[1]
AGENT = ROOT / "kb" / "agent"
SCHEMA = json.loads((ROOT / "tests" / "data" / "mcp-server.schema.json").read_text(encoding="utf-8"))
PUBLISHED = "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"
BEGIN = "<!-- generated from the server's own tools"
END = "<!-- end of the generated tools -->"


def server_json() -> dict[str, Any]:
    return json.loads((AGENT / "server.json").read_text(encoding="utf-8"))


def validator() -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator(SCHEMA, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER)


def the_tools() -> dict[str, Any]:
    return tools(Releases(SourceSpec(vllm_version="0.34.0"), None))


def tools_reference() -> str:
    """What SKILL.md's generated part says: each tool's signature (`?`: optional) and description,
    as the server lists them (`tools/list`: the docstring and kb/agent/arguments.py's schema)."""
    out = []
    for name, fn in the_tools().items():
        schema = input_schema(fn)
        args = ", ".join(p + ("" if p in schema["required"] else "?") for p in schema["properties"])
        out += [f"### `{name}({args})`", "", " ".join((inspect.getdoc(fn) or "").split()), ""]
    return "\n".join(out).rstrip()


def test_server_json_is_valid_against_the_registrys_schema() -> None:
    doc = server_json()
    validator().validate(doc)
    assert doc["$schema"] == PUBLISHED
    assert SCHEMA["definitions"]["ServerDetail"]["properties"]["$schema"]["example"] == PUBLISHED


@pytest.mark.parametrize("break_it", [
    lambda d: d.pop("name"),
    lambda d: d.__setitem__("name", "vllm-error-kb"),  # reverse-DNS with one slash
    lambda d: d.__setitem__("description", "x" * 101),
    lambda d: d["packages"][0].pop("transport"),
    lambda d: d["packages"][0].__setitem__("version", "latest"),
    lambda d: d["packages"][0]["packageArguments"][0].pop("value"),  # a positional argument needs a value
])
def test_the_vendored_schema_rejects_what_the_registry_rejects(break_it: Any) -> None:
    doc = copy.deepcopy(server_json())
    break_it(doc)
    assert list(validator().iter_errors(doc))


def test_server_json_names_this_package_its_version_and_how_it_starts() -> None:
    doc = server_json()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    (package,) = doc["packages"]
    assert doc["version"] == package["version"] == project["version"]
    assert package["registryType"] == "pypi" and package["identifier"] == project["name"] == "vllm-error-kb"
    assert package["transport"] == {"type": "stdio"}
    assert package["runtimeArguments"][0]["value"] == f"{project['name']}[mcp]=={project['version']}"
    assert "mcp" in project["optional-dependencies"]
    assert project["scripts"][project["name"]] == project["scripts"]["kb"] == "kb.cli:main"  # uvx runs the package's name
    args = package["packageArguments"]
    assert args[0] == {"type": "positional", "value": "mcp"}
    import argparse

    from kb.cli import parser

    (commands,) = [a for a in parser()._actions if isinstance(a, argparse._SubParsersAction)]
    flags = {o for action in commands.choices["mcp"]._actions for o in action.option_strings}
    assert {a["name"] for a in args[1:]} <= flags  # every named argument is one kb mcp takes
    owner_repo = SiteInfo.__dataclass_fields__["report_repo"].default
    assert doc["repository"] == {"url": f"https://github.com/{owner_repo}", "source": "github"}
    assert doc["name"] == f"io.github.{owner_repo}"


def test_the_readme_carries_the_registrys_ownership_marker() -> None:
    """The registry proves a PyPI package is the server's by `mcp-name: <name>` in its description
    (the README, pyproject's `readme`)."""
    assert f"mcp-name: {server_json()['name']}" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_skill_md_lists_the_servers_own_tools() -> None:
    text = (AGENT / "SKILL.md").read_text(encoding="utf-8")
    start, end = text.index(BEGIN), text.index(END)
    generated = text[text.index("\n", start) + 1:end].strip()
    expected = tools_reference()
    assert generated == expected, f"SKILL.md's tools differ from the server's; its generated part should read:\n\n{expected}"
    # the prose above names only tools the server has, and each of them
    named = set(re.findall(r"`(\w+)\(", text[:start]))
    assert named == set(the_tools())


def test_skill_md_front_matter_and_limits_are_the_servers() -> None:
    text = (AGENT / "SKILL.md").read_text(encoding="utf-8")
    front = re.match(r"---\nname: ([a-z0-9-]+)\ndescription: (.+)\n---\n", text)
    assert front and len(front.group(1)) <= 64 and len(front.group(2)) <= 1024
    for said, actual in ((f"{MAX_TEXT:,} characters", True), ("2 MiB", MAX_OBJECT_CHARS == 2 * 1024 * 1024),
                         (f"{MAX_OBJECT_NESTING} levels", True), (f"`limit` 1 to {MAX_LIMIT}", True),
                         (f"default {DEFAULT_SECONDS:g} s", True), ("four calls run at once", MOST_AT_ONCE == 4)):
        assert said in text and actual, said
