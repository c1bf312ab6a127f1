"""The stemmer of the index and of `kb search`, as lunr.js stems: the site's search box stems a
query with lunr.js's own stemmer, so the index must hold lunr.js's stems, not lunr.py's.

lunr.py's Porter stemmer departs from lunr.js's at one rule (its docstring says so): a final
`y` becomes `i` when the stem holds another vowel in Python ("ray" -> "rai", "key" -> "kei",
"try" stays), after a consonant that is not the first letter in lunr.js ("ray" stays, "try" ->
"tri"); and words that are all suffix ("eed", "ies", "sses"). This stemmer is lunr.py's with lunr.js's rules: it
agrees with lunr.js on the 27,036 words of 0.33.0's records and on millions of generated ones,
but for a consonant, `yy` and `ed`/`ing` ("byyed"), which no vLLM text holds.
`tests/test_browser.py` compares the two in the browser."""

from __future__ import annotations

from typing import Any

from lunr.stemmer import PorterStemmer

NAME = "stemmer"  # the name lunr.js knows it by: the index's pipeline names it


class _LunrJsPorter(PorterStemmer):  # type: ignore[misc]
    b: str  # the word being stemmed, and the offsets of its first and last letter (lunr.py's state)
    k: int
    k0: int

    def step1c(self) -> None:
        """lunr.js's step 1c: `^(.+?)([^aeiou])y$` -> `$1$2i`."""
        b, k, k0 = self.b, self.k, self.k0
        if b[k] == "y" and k - 1 > k0 and b[k - 1] not in "aeiou":
            self.b = b[:k] + "i" + b[k + 1:]


_PORTER = _LunrJsPorter()


# lunr.js's suffix rules want a letter before the suffix: a word that is all suffix goes its own way
_WHOLE_SUFFIX = {"eed": "e", "eeds": "e", "ies": "ie", "sses": "sse"}


def stem_word(word: str) -> str:
    return _WHOLE_SUFFIX.get(word) or str(_PORTER.stem(word))


def stemmer(token: Any, i: Any = None, tokens: Any = None) -> Any:
    """The pipeline step (lunr's signature)."""
    return token.update(lambda s, metadata=None: stem_word(s))


def register() -> Any:
    """This stemmer under lunr's name, for building and for loading an index (lunr.py looks a
    loaded index's pipeline up by name): lunr.py's own is replaced for the whole process."""
    from lunr.pipeline import Pipeline

    if Pipeline.registered_functions.get(NAME) is not stemmer:
        Pipeline.registered_functions.pop(NAME, None)  # lunr.py logs a warning on replacing a name
        Pipeline.register_function(stemmer, NAME)
    return stemmer
