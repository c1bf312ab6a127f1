"""lunr's index builder, adding a document faster with the same result: lunr runs each word of a
field through the pipeline (trimmer, stop words, stemmer) as a token object, every time it
meets it; here a word's terms are computed once per build (the pipeline's steps read one word at
a time) and the words are split as lunr's tokenizer splits them. The index it builds is lunr's
own (tests/test_search_index.py compares the two)."""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any, Optional

from lunr.builder import Builder
from lunr.field_ref import FieldRef
from lunr.token import Token
from lunr.tokenizer import SEPARATOR_CHARS

_SEPARATOR = re.compile("[" + re.escape(SEPARATOR_CHARS) + "]")


class FastBuilder(Builder):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self._terms: dict[tuple[str, str], list[str]] = {}  # (field, word) -> its terms

    def _terms_of(self, field_name: str, word: str) -> list[str]:
        key = (field_name, word)
        terms = self._terms.get(key)
        if terms is None:
            terms = self._terms[key] = [str(t) for t in self.pipeline.run([Token(word, {})], field_name)]
        return terms

    def add(self, doc: dict[str, Any], attributes: Optional[dict[str, Any]] = None) -> None:
        """As lunr's Builder.add, for text fields and no metadata kept (else lunr's own)."""
        fields = self._fields.items()
        if self.metadata_whitelist or any(f.extractor is not None or not isinstance(doc[name], (str, type(None)))
                                          for name, f in fields):
            super().add(doc, attributes)
            return
        doc_ref = str(doc[self._ref])
        self._documents[doc_ref] = attributes or {}
        self.document_count += 1
        for field_name, _field in fields:
            value = doc[field_name]
            words = [w for w in _SEPARATOR.split(value.lower()) if w] if value is not None else []
            terms = [t for w in words for t in self._terms_of(field_name, w)]
            field_ref = str(FieldRef(doc_ref, field_name))
            field_terms: defaultdict[str, int] = defaultdict(int)
            self.field_term_frequencies[field_ref] = field_terms
            self.field_lengths[field_ref] = len(terms)
            for term in terms:
                field_terms[term] += 1
                posting = self.inverted_index.get(term)
                if posting is None:
                    posting = {name: {} for name in self._fields}
                    posting["_index"] = self.term_index
                    self.term_index += 1
                    self.inverted_index[term] = posting
                if doc_ref not in posting[field_name]:
                    posting[field_name][doc_ref] = defaultdict(list)
