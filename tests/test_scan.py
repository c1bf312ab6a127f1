from __future__ import annotations

import hashlib
import importlib
import json
from pathlib import Path

import jsonschema
import pytest

from fixture_tree import tree_files, write_tree
from kb.errors import ScanError
from kb.scan.factcache import FactCache
from kb.scan.ids import error_id
from kb.model import ClassFact
from kb.scan.scanner import DEFAULT_EXCEPTIONS, excerpt, resolve_exceptions, scan, source_lines
from kb.scan.document import dumps
from kb.scan.source import from_dir

SCHEMA = json.loads((Path(__file__).parent.parent / "kb/schemas/scan.schema.json").read_text())


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return write_tree(tmp_path / "tree", tree_files("0.1.0"))


def test_id_formula_is_errlookups() -> None:
    template = ("The model's number of query heads per KV head ({num_q_per_kv}) must be divisible by "
                "`--decode-context-parallel-size` ({decode_context_parallel_size}) for GQA/MQA.")
    expected = hashlib.sha256(("vllm-project/vllm\x01" + template + "\x01vllm/config/model.py").encode()).hexdigest()[:16]
    assert error_id(template, "vllm/config/model.py") == expected == "d97d5d8528e2b364"


def test_subclasses_resolve_transitively_by_name() -> None:
    classes = [ClassFact("B", ("A",), 1), ClassFact("A", ("ValueError",), 1), ClassFact("C", ("Exception",), 1),
               ClassFact("D", ("B", "Mixin"), 1)]
    chosen = resolve_exceptions(["ValueError"], classes)
    assert {"ValueError", "A", "B", "D", "UnicodeDecodeError"} <= chosen
    assert "C" not in chosen and "TypeError" not in chosen
    assert resolve_exceptions(["all"], classes) is None
    assert resolve_exceptions(["TypeError"], classes) == {"TypeError"}


def test_the_default_set_is_every_class_of_the_tree_and_three_builtins() -> None:
    classes = [ClassFact("VLLMError", ("Exception",), 1), ClassFact("VLLMClientError", ("VLLMError",), 2),
               ClassFact("VLLMValidationError", ("VLLMClientError",), 3), ClassFact("ShardError", ("ValueError",), 4),
               ClassFact("Config", ("BaseModel",), 5), ClassFact("Helper", (), 6)]
    chosen = resolve_exceptions(DEFAULT_EXCEPTIONS, classes)
    assert chosen is not None
    assert {"VLLMError", "VLLMClientError", "VLLMValidationError", "ShardError", "ValueError", "RuntimeError",
            "TypeError", "NotImplementedError", "UnicodeDecodeError", "RecursionError"} <= chosen
    assert not {"Config", "Helper", "Exception", "KeyError", "OSError", "vllm"} & chosen


def test_scan_fixture_tree(tree: Path) -> None:
    with from_dir(tree, include_vendored=False) as t:
        result = scan(t, jobs=1)
    got = [(s.file, s.line, s.exception_class, s.template) for s in result.sites]
    assert got == [
        ("vllm/config/model.py", 13, "ValueError",
         "Total number of attention heads ({total_num_attention_heads}) must be divisible by tensor parallel size ({tensor_parallel_size})."),
        ("vllm/config/model.py", 23, "ValueError",
         "The model's number of query heads per KV head ({num_q_per_kv}) must be divisible by "
         "`--decode-context-parallel-size` ({decode_context_parallel_size}) for GQA/MQA."),
        ("vllm/config/model.py", 34, "ValueError", "max_model_len must be non-negative, got {value}"),
        ("vllm/config/model.py", 39, "ValueError", "max_model_len of {self.max_model_len} is too small"),
        ("vllm/decoding.py", 6, "StructuredDecisionError", "cannot decide {kind}"),
        ("vllm/decoding.py", 8, "NotAValueError", "an exception class of the tree, not a ValueError"),
        ("vllm/decoding.py", 12, "ValueError", "unknown kind: {kind}"),
    ]
    assert result.sites[1].id == "d97d5d8528e2b364"
    assert result.counts == {"bytes": result.bytes, "excluded_files": 1, "files": 7, "ids": 7, "parse_warnings": 1,
                             "sites": 7, "unresolved_templates": 0}
    with from_dir(tree, include_vendored=False) as t:
        only = scan(t, ["ValueError"], jobs=1)
    assert "NotAValueError" not in {s.exception_class for s in only.sites} and only.counts["sites"] == 6
    assert [str(w) for w in result.warnings] == ["vllm/broken.py:1: cannot parse: invalid syntax"]
    assert result.tree.release == "0.1.0" and result.tree.ref == "v0.1.0"


def test_wider_exception_sets(tree: Path) -> None:
    with from_dir(tree, include_vendored=True) as t:
        everything = scan(t, ["all"], jobs=1)
        exc = scan(t, ["Exception"], jobs=1)
    assert "NotAValueError" in {s.exception_class for s in everything.sites}
    assert "vllm/third_party/vendored.py" in {s.file for s in everything.sites}
    assert everything.exceptions == ("all",)
    # user-defined classes are found through their bases even from a builtin root
    assert {"NotAValueError", "StructuredDecisionError", "ValueError"} <= {s.exception_class for s in exc.sites}


def test_strict_fails_on_parse_warnings(tree: Path) -> None:
    with from_dir(tree, include_vendored=False) as t, pytest.raises(ScanError, match="could not be parsed"):
        scan(t, jobs=1, strict=True)


def test_files_without_raise_or_class_are_parsed_only_when_strict(tree: Path) -> None:
    (tree / "vllm/broken.py").unlink()
    (tree / "vllm/quiet.py").write_text("x = (\n")
    with from_dir(tree, include_vendored=False) as t:
        assert scan(t, jobs=1).warnings == ()
        with pytest.raises(ScanError, match="first: vllm/quiet.py:1: cannot parse"):
            scan(t, jobs=1, strict=True)


def test_excerpt_is_37_lines_clipped_at_file_ends() -> None:
    lines = source_lines(b"".join(b"line %d\n" % i for i in range(1, 101)))
    e = excerpt(lines, 50)
    assert (e.start, e.end, len(e.lines), e.lines[18]) == (32, 68, 37, "line 50")
    top, bottom = excerpt(lines, 3), excerpt(lines, 99)
    assert (top.start, top.end) == (1, 21)
    assert (bottom.start, bottom.end, bottom.lines[-1]) == (81, 100, "line 100")


def test_source_lines_follow_ast_numbering() -> None:
    assert source_lines(b"a\r\nb\rc\x0cd\ne") == ["a", "b", "c\x0cd", "e"]


def test_output_is_deterministic_and_valid(tree: Path) -> None:
    texts = []
    for jobs in (1, 2):
        with from_dir(tree, include_vendored=False) as t:
            texts.append(dumps(scan(t, jobs=jobs)))
    assert texts[0] == texts[1]
    jsonschema.validate(json.loads(texts[0]), SCHEMA)


def test_cache_skips_parsing_unchanged_files(tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = FactCache(tmp_path / "facts")
    with from_dir(tree, include_vendored=False) as t:
        first = scan(t, jobs=1, cache=cache)
    parsed: list[bytes] = []
    scan_module = importlib.import_module("kb.scan.scanner")
    real = scan_module.extract
    monkeypatch.setattr(scan_module, "extract", lambda data: parsed.append(data) or real(data))
    (tree / "vllm/decoding.py").write_text((tree / "vllm/decoding.py").read_text() + "\n# edited\n")
    with from_dir(tree, include_vendored=False) as t:
        second = scan(t, jobs=1, cache=cache)
    assert len(parsed) == 1 and parsed[0].endswith(b"# edited\n")
    assert [(s.id, s.fact) for s in first.sites] == [(s.id, s.fact) for s in second.sites]
    assert second.sites[-1].excerpt.lines[-2:] == ("", "# edited")
    cache.close()


def test_excerpts_know_when_they_start_inside_a_docstring(tmp_path: Path) -> None:
    body = "def f(x):\n    \"\"\"A long docstring\n" + "    line\n" * 30 + "    \"\"\"\n    raise ValueError('x')\n"
    write_tree(tmp_path / "t", {"vllm/__init__.py": "", "vllm/doc.py": body})
    with from_dir(tmp_path / "t", include_vendored=False) as t:
        (site,) = scan(t, jobs=1).sites
    assert site.excerpt.start == 16 and site.excerpt.open_string == '"""'
    from kb.site.highlight import highlight_excerpts

    html = highlight_excerpts([site.excerpt])
    assert html[16].startswith('<span class="sd">')  # lexed as the docstring it is, not as code


def test_a_scanner_change_starts_a_new_facts_cache(tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The facts cache is keyed by the scanner's own code: facts parsed by another version of
    the scanner are never served (no hand-bumped version number)."""
    from kb.scan import factcache

    folder = tmp_path / "facts"
    with from_dir(tree, include_vendored=False) as t:
        scan(t, jobs=1, cache=FactCache(folder))
    (old,) = folder.glob("facts-*.sqlite")
    assert old.name == f"facts-{factcache.scanner_digest()}.sqlite"
    monkeypatch.setattr(factcache, "scanner_digest", lambda: "0123456789abcdef")
    parsed: list[bytes] = []
    scan_module = importlib.import_module("kb.scan.scanner")
    real = scan_module.extract
    monkeypatch.setattr(scan_module, "extract", lambda data: parsed.append(data) or real(data))
    cache = FactCache(folder)
    with from_dir(tree, include_vendored=False) as t:
        scan(t, jobs=1, cache=cache)
    cache.close()
    assert parsed  # parsed again, not served from the other version's cache
    assert [p.name for p in folder.glob("facts-*.sqlite")] == ["facts-0123456789abcdef.sqlite"]


def test_code_digest_covers_every_module() -> None:
    from kb.paths import PACKAGE_DIR
    from kb.site.build import code_files

    files = set(code_files())
    assert {PACKAGE_DIR / "scan/extract.py", PACKAGE_DIR / "site/render.py", PACKAGE_DIR / "model.py"} <= files
    assert files == set(PACKAGE_DIR.rglob("*.py"))
