"""The keys of a JSON-valued flag as pydantic validates them while vLLM's parser reads the flag
(kb/checks/jsonfields.py): JSON-mode lax types, literals, unions, constraints, in pydantic's words
as real vLLM 0.33.0 printed them (tests/data/oracle-derived-0.33.0.json); what kb does not model
gives no verdict. `kb check` stops at the first refused flag of the command, on a small tree."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kb.checks.jsonfields import JsonRefusal, KeyError_, key_errors, refusal
from kb.checks.order import pydantic_repr
from kb.configmodel import ConfigModel, JsonField

DATA = Path(__file__).parent / "data"


def field(*members: tuple[str, tuple[object, ...]], constraints: tuple[tuple[str, object], ...] = ()) -> JsonField:
    return JsonField("ProfilerConfig", "x", tuple(members), constraints)  # type: ignore[arg-type]


@pytest.mark.parametrize("members, value, expected", [
    ((("bool", ()),), "default", ("Input should be a valid boolean, unable to interpret input", "bool_parsing")),
    ((("bool", ()),), "yes", None),
    ((("bool", ()),), 1, None),
    ((("bool", ()),), [1], ("Input should be a valid boolean", "bool_type")),
    ((("str", ()), ("none", ())), False, ("Input should be a valid string", "string_type")),
    ((("str", ()), ("none", ())), None, None),
    ((("int", ()),), 2.5, ("Input should be a valid integer, got a number with a fractional part", "int_from_float")),
    ((("int", ()),), "12", None),
    ((("int", ()),), "twelve", ("Input should be a valid integer, unable to parse string as an integer",
                                "int_parsing")),
    ((("float", ()),), "x", ("Input should be a valid number, unable to parse string as a number", "float_parsing")),
    ((("literal", ("default",)),), True, ("Input should be 'default'", "literal_error")),
    ((("literal", ("binary", "unpacked")),), True, ("Input should be 'binary' or 'unpacked'", "literal_error")),
    ((("literal", ("torch", "cuda", "proton")), ("none", ())), True,
     ("Input should be 'torch', 'cuda' or 'proton'", "literal_error")),
    ((("list", ()), ("none", ())), "torch", ("Input should be a valid array", "list_type")),
])
def test_one_key_in_pydantics_words(members: tuple, value: object, expected: tuple[str, str] | None) -> None:
    errors = key_errors(field(*members), value)
    if expected is None:
        assert errors == []
    else:
        assert [(e.loc, e.msg, e.kind, e.value) for e in errors] == [("x", *expected, value)]


def test_a_union_reports_each_member_tagged_and_constraints_after_the_type() -> None:
    union = field(("literal", ("auto", "bf16")), ("str", ()), ("none", ()))
    assert [(e.loc, e.kind) for e in key_errors(union, True)] == [("x.literal['auto','bf16']", "literal_error"),
                                                                 ("x.str", "string_type")]
    positive = field(("int", ()), constraints=(("gt", 0),))
    assert [(e.msg, e.kind) for e in key_errors(positive, False)] == [("Input should be greater than 0", "greater_than")]
    assert key_errors(positive, 3) == []


def test_what_kb_does_not_model_gives_no_verdict() -> None:
    model = ConfigModel((), (), None, (), json_fields=(
        JsonField("C", "items", (("list", ()),)), JsonField("C", "mode", (("other", ()),)),
        JsonField("C", "flag", (("bool", ()),))))
    assert refusal(model, "C", {"items": ["a", 1], "mode": "x"}) is None  # a list's items, an enum: not modelled
    refused = refusal(model, "C", {"mode": "x", "flag": "maybe"})
    assert refused is not None and not refused.exact  # an error, but `mode` may add one of its own
    assert refusal(model, "C", {"flag": "no"}) is None


def test_the_report_is_what_real_vllm_printed() -> None:
    """Every refusal of a JSON-valued flag real vLLM 0.33.0 printed for a key kb models, rebuilt
    from the recorded launch: the same words (pydantic's link to its docs left out)."""
    doc = json.loads((DATA / "oracle-derived-0.33.0.json").read_text())
    printed = [c for c in doc["cases"] if c["stage"] == "argparse" and "validation error" in (c["message"] or "")
               and "Value error" not in c["message"]]
    assert len(printed) >= 10
    eplb = next(c for c in printed if c["argv"][1] == "--eplb-config" and "policy" in c["argv"][2])
    refused = JsonRefusal("EPLBConfig", (
        KeyError_("use_async", "Input should be a valid boolean, unable to interpret input", "bool_parsing", "default"),
        KeyError_("policy", "Input should be 'default'", "literal_error", True)))
    words = "\n".join(line for line in eplb["message"].splitlines() if "For further information" not in line)
    assert refused.printed("--eplb-config") == words


def test_a_long_value_is_cut_in_the_middle_as_pydantic_does() -> None:
    value = {"cudagraph_mm_encoder": True, "encoder_cudagraph_max_vision_items_per_batch": -1}
    assert pydantic_repr(value) == "{'cudagraph_mm_encoder': ...on_items_per_batch': -1}"  # as vLLM printed it
    assert pydantic_repr("short") == "'short'"


def test_a_key_is_read_as_pydantic_holds_it() -> None:
    from kb.checks.jsonfields import MISSING, converter

    flag = converter(JsonField("EPLBConfig", "use_async", (("bool", ()),)))
    assert flag("false") is False and flag("yes") is True and flag(1) is True and flag("maybe") is MISSING
    count = converter(JsonField("C", "n", (("int", ()), ("none", ()))))
    assert count("12") == 12 and count("1.0") == 1 and count(None) is None and count("x") is MISSING
    assert converter(JsonField("C", "n", (("int", ()),), before=True))(3) is MISSING  # a before validator first
