from __future__ import annotations

from conftest import scan_code
from kb.scan.extract import extract


def one(src: str):
    raises = scan_code(src)
    assert len(raises) == 1, raises
    return raises[0]


def test_dcp_shape_guard_locals_and_qualname() -> None:
    r = one('''
        class ModelConfig:
            def verify_with_parallel_config(self, parallel_config):
                total_num_attention_heads = self.hf.num_attention_heads
                decode_context_parallel_size = parallel_config.decode_context_parallel_size
                if decode_context_parallel_size > 1 and not self.use_mla:
                    total_num_kv_heads = self.get_total_num_kv_heads()
                    num_q_per_kv = total_num_attention_heads // total_num_kv_heads
                    if num_q_per_kv % decode_context_parallel_size != 0:
                        raise ValueError(
                            "per KV head "
                            f"({num_q_per_kv}) must be divisible by ({decode_context_parallel_size})."
                        )
    ''')
    assert r.qualname == "ModelConfig.verify_with_parallel_config"
    assert (r.line, r.end_line) == (10, 13)
    assert r.template == "per KV head ({num_q_per_kv}) must be divisible by ({decode_context_parallel_size})."
    assert r.guard_terms == (
        "decode_context_parallel_size > 1 and not self.use_mla",
        "num_q_per_kv % decode_context_parallel_size != 0",
    )
    assert r.guard == "decode_context_parallel_size > 1 and not self.use_mla and num_q_per_kv % decode_context_parallel_size != 0"
    assert [(d.name, d.source) for d in r.locals] == [
        ("total_num_attention_heads", "self.hf.num_attention_heads"),
        ("decode_context_parallel_size", "parallel_config.decode_context_parallel_size"),
        ("total_num_kv_heads", "self.get_total_num_kv_heads()"),
        ("num_q_per_kv", "total_num_attention_heads // total_num_kv_heads"),
    ]


def test_elif_and_else_negate_earlier_tests() -> None:
    raises = scan_code('''
        def f(a, b, c):
            if a:
                raise ValueError("A")
            elif b or c:
                raise ValueError("B")
            else:
                raise ValueError("C")
    ''')
    assert [r.guard for r in raises] == ["a", "not a and (b or c)", "not a and not (b or c)"]


def test_nested_guards_survive_siblings() -> None:
    raises = scan_code('''
        def f(x, y):
            if x:
                if y:
                    pass
                raise ValueError("after inner if")
            raise ValueError("top level")
    ''')
    assert [(r.template, r.guard) for r in raises] == [("after inner if", "x"), ("top level", "")]


def test_contexts_except_loop_match_with() -> None:
    raises = scan_code('''
        def f(items, mode):
            try:
                pass
            except KeyError as e:
                raise ValueError("missing") from e
            for item in items:
                if item < 0:
                    raise ValueError("negative")
            else:
                raise ValueError("loop else")
            while mode:
                raise ValueError("in while")
            match mode:
                case "a" | "b" if items:
                    raise ValueError("case")
            with open(mode) as fh:
                raise ValueError("with")
    ''')
    got = {r.template: [(c.kind, c.source) for c in r.contexts] for r in raises}
    assert got == {
        "missing": [("except", "except KeyError")],
        "negative": [("for", "for item in items")],
        "loop else": [("for-else", "for item in items")],
        "in while": [("while", "while mode")],
        "case": [("case", "match mode: case 'a' | 'b' if items")],
        "with": [("with", "with open(mode) as fh")],
    }
    assert next(r for r in raises if r.template == "negative").guard == "item < 0"


def test_qualnames_nested_functions_and_classes() -> None:
    raises = scan_code('''
        raise ValueError("module level")
        class Outer:
            class Inner:
                def method(self):
                    def helper():
                        raise ValueError("deep")
            async def coro(self):
                raise ValueError("async")
    ''')
    assert [r.qualname for r in raises] == ["<module>", "Outer.Inner.method.helper", "Outer.coro"]


def test_guard_restarts_in_nested_function() -> None:
    (r,) = scan_code('''
        def outer(flag):
            if flag:
                def inner(v):
                    if v:
                        raise ValueError("v")
    ''')
    assert r.guard == "v"


def test_exception_as_written_and_bare_class() -> None:
    raises = scan_code('''
        import errors
        def f():
            raise errors.StructuredDecisionError("dotted")
            raise ValueError
            raise
            raise ValueError()
    ''')
    assert [(r.exception, r.exception_name, r.template, r.message_kind) for r in raises] == [
        ("errors.StructuredDecisionError", "StructuredDecisionError", "dotted", "literal"),
        ("ValueError", "ValueError", "", "none"),
        ("ValueError", "ValueError", "", "none"),
    ]


def test_message_in_variable_with_reassignment_and_augmented_add() -> None:
    (r,) = scan_code('''
        def f(kind, extra):
            msg = "first draft"
            msg = f"unknown kind {kind}"
            msg += "; expected one of "
            msg = msg + ", ".join(extra)
            raise ValueError(msg)
    ''')
    assert (r.template, r.unresolved, r.message_kind) == (
        "unknown kind {kind}; expected one of {', '.join(extra)}", False, "variable")


def test_module_constant_message() -> None:
    (r,) = scan_code('''
        REJECT = "pooling models reject " "custom logits processors"
        def f():
            raise ValueError(REJECT)
    ''')
    assert (r.template, r.unresolved) == ("pooling models reject custom logits processors", False)


def test_parameter_shadowing_module_constant_is_unresolved() -> None:
    (r,) = scan_code('''
        msg = "module text"
        def f(msg):
            raise ValueError(msg)
    ''')
    assert (r.template, r.unresolved) == ("{msg}", True)


def test_unknown_message_variable_is_unresolved() -> None:
    (r,) = scan_code('''
        def f():
            ok, err_msg = check()
            raise ValueError(err_msg)
    ''')
    assert (r.template, r.unresolved) == ("{err_msg}", True)


def test_pydantic_validators_and_post_init() -> None:
    raises = scan_code('''
        from pydantic import field_validator, model_validator
        from pydantic.dataclasses import dataclass as pydantic_dataclass

        @pydantic_dataclass
        class ParallelConfig:
            @field_validator("x")
            @classmethod
            def _x(cls, v):
                raise ValueError("field")

            @model_validator(mode="after")
            def _all(self):
                raise ValueError("model")

            def __post_init__(self):
                raise ValueError("post init")

            def verify(self):
                raise ValueError("plain method")

        class NotPydantic:
            def __post_init__(self):
                raise ValueError("dataclass post init")
    ''')
    got = [(r.template, r.pydantic_class, r.validation, r.decorators) for r in raises]
    assert got == [
        ("field", True, "field_validator", ("field_validator", "classmethod")),
        ("model", True, "model_validator", ("model_validator",)),
        ("post init", True, "post_init", ()),
        ("plain method", True, None, ()),
        ("dataclass post init", False, None, ()),
    ]


def test_vllm_config_decorator_makes_a_pydantic_class() -> None:
    (r,) = scan_code('''
        from vllm.config.utils import config
        @config(config=ConfigDict(arbitrary_types_allowed=True))
        class ModelConfig:
            def __post_init__(self):
                raise ValueError("x")
    ''')
    assert (r.pydantic_class, r.validation) == (True, "post_init")


def test_class_facts_record_bases() -> None:
    facts = extract(b"class A(ValueError): pass\nclass B(mod.A, Generic[T]): pass\n")
    assert [(c.name, c.bases) for c in facts.classes] == [("A", ("ValueError",)), ("B", ("A", "Generic"))]


def test_unparsable_files_are_located_errors() -> None:
    assert extract(b"def f(:\n  pass\n").error == (1, "cannot parse: invalid syntax")
    assert extract(b"x = 1\ny = \x00\n").error[0] == 2
    assert extract(b"# -*- coding: latin-1 -*-\nx = '\xe9'\n").error is None
    assert extract(b"x = '\xff\xfe'\n").error[1].startswith("cannot parse:")


def test_a_list_of_messages_joined_gives_one_template_per_part() -> None:
    (fact,) = scan_code('''
        def check(lora_rank, max_lora_rank, n):
            error_msg = ["Invalid LoRA config."]
            if lora_rank > max_lora_rank:
                error_msg.append(f"LoRA rank {lora_rank} is greater than max_lora_rank {max_lora_rank}.")
            if n:
                error_msg.append("Too many adapters.")
            if error_msg:
                raise ValueError(" ".join(error_msg))
            raise ValueError(f"{' '.join(error_msg)}")
    ''')[:1]
    assert fact.template == "{' '.join(error_msg)}"  # the id keeps the message as the source writes it
    assert fact.parts == ("Invalid LoRA config.", "LoRA rank {lora_rank} is greater than max_lora_rank {max_lora_rank}.",
                          "Too many adapters.")
    (_, in_fstring) = scan_code('''
        def check(errors):
            errors.append("Adapter bias is not supported.")
            raise ValueError("x")
            raise ValueError(f"{' '.join(errors)}")
    ''')
    assert in_fstring.parts == ("Adapter bias is not supported.",)
