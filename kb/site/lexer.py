"""pygments' Python lexer with the same tokens, found faster: pygments tries a state's rules one
by one in Python (a name, the commonest token, is matched by about the fortieth rule of `root`).
Here the rules of a state that can match at a position (those that can start with its character,
kb/site/firstchar.py) are one alternation, tried in one call, which picks the first rule that
matches, as pygments does (`re` tries the alternatives in order). A rule with a callback is
matched again by its own pattern, so the callback sees the groups it expects. A state whose
rules cannot be joined (a backreference, a conditional) keeps pygments' loop."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar, Optional

from pygments.lexers import PythonLexer
from pygments.token import Error, Whitespace, _TokenType

from kb.site.firstchar import first_test

# pattern flags a rule may set for itself, by their inline letter
_LETTERS = ((re.IGNORECASE, "i"), (re.MULTILINE, "m"), (re.DOTALL, "s"), (re.VERBOSE, "x"))
_LEADING_FLAGS = re.compile(r"\(\?([aiLmsux]+)\)")
_UNJOINABLE = re.compile(r"\\[1-9]|\(\?P=|\(\?\(")  # backreferences, conditionals: numbers would shift

# (the alternation, its wrapper group -> (the rule's match, action, new state, plain token))
_Joined = tuple["re.Pattern[str]", dict[int, tuple[Any, Any, Any, bool]]]


def _scoped(pattern: re.Pattern[str]) -> str:
    """The rule's pattern with its own flags scoped to it."""
    body = pattern.pattern
    lead = _LEADING_FLAGS.match(body)
    if lead is not None:
        body = body[lead.end():]
    on = "".join(letter for flag, letter in _LETTERS if pattern.flags & flag)
    off = "".join(letter for flag, letter in _LETTERS if not pattern.flags & flag)
    return f"(?{on}-{off}:{body})" if off else f"(?{on}:{body})"


def _join(rules: Sequence[tuple[Any, Any, Any]]) -> Optional[_Joined]:
    parts: list[str] = []
    by_group: dict[int, tuple[Any, Any, Any, bool]] = {}
    group = 0
    for rexmatch, action, new_state in rules:
        pattern = rexmatch.__self__
        group += 1
        by_group[group] = (rexmatch, action, new_state, type(action) is _TokenType)
        parts.append(f"({_scoped(pattern)})")
        group += pattern.groups
    try:
        joined = re.compile("|".join(parts) or "(?!)")
    except re.error:
        return None
    return (joined, by_group) if joined.groups == group else None


class _State:
    """A state's rules, joined for each first character (the rules that can start with it)."""

    def __init__(self, rules: Sequence[tuple[Any, Any, Any]]) -> None:
        self.rules = list(rules)
        self.tests = [first_test(rexmatch.__self__) for rexmatch, _, _ in rules]
        self.by_char: dict[str, Optional[_Joined]] = {"": _join(self.rules)}  # "": at the end of the text
        self.by_rules: dict[tuple[int, ...], Optional[_Joined]] = {}

    def at(self, c: str) -> Optional[_Joined]:
        found = self.by_char.get(c, _NOT_YET)
        if found is _NOT_YET:
            which = tuple(i for i, test in enumerate(self.tests) if test(c))
            if which not in self.by_rules:
                self.by_rules[which] = _join([self.rules[i] for i in which])
            found = self.by_char[c] = self.by_rules[which]
        return found  # type: ignore[return-value]


_NOT_YET = object()


def _state(rules: Sequence[tuple[Any, Any, Any]]) -> Optional[_State]:
    """None when a rule's pattern cannot be joined with others."""
    for rexmatch, _, _ in rules:
        pattern = getattr(rexmatch, "__self__", None)
        if not isinstance(pattern, re.Pattern) or _UNJOINABLE.search(pattern.pattern):
            return None
    state = _State(rules)
    return state if state.by_char[""] is not None else None


class FastPythonLexer(PythonLexer):  # type: ignore[misc]
    """PythonLexer's tokens for any text (tests/test_highlight.py compares them on vLLM's files)."""

    _states: ClassVar[dict[str, Optional[_State]]] = {}  # by state name, built as they are met

    def get_tokens_unprocessed(self, text: str, stack: tuple[str, ...] = ("root",)) -> Iterator[tuple[int, Any, str]]:
        pos = 0
        tokendefs = self._tokens
        states = self._states
        statestack = list(stack)
        state = statestack[-1]
        while True:
            if state not in states:
                states[state] = _state(tokendefs[state])
            rules = states[state]
            rule: Optional[tuple[Any, Any, Any, bool]] = None
            found = rules.at(text[pos:pos + 1]) if rules is not None else None
            if found is not None:
                m = found[0].match(text, pos)
                if m is not None:
                    group = m.lastindex
                    assert group is not None
                    rule = found[1][group]
                    rexmatch, action, new_state, plain = rule
                    if plain:
                        yield pos, action, m.group(group)
                        pos = m.end(group)
                    else:
                        m = rexmatch(text, pos)
                        if action is not None:
                            yield from action(self, m)
                        pos = m.end()
            else:
                for rexmatch, action, new_state in tokendefs[state]:
                    m = rexmatch(text, pos)
                    if m:
                        rule = (rexmatch, action, new_state, False)
                        if action is not None:
                            if type(action) is _TokenType:
                                yield pos, action, m.group()
                            else:
                                yield from action(self, m)
                        pos = m.end()
                        break
            if rule is not None:
                new_state = rule[2]
                if new_state is not None:  # as pygments' RegexLexer moves between states
                    if isinstance(new_state, tuple):
                        for s in new_state:
                            if s == "#pop":
                                if len(statestack) > 1:
                                    statestack.pop()
                            elif s == "#push":
                                statestack.append(statestack[-1])
                            else:
                                statestack.append(s)
                    elif isinstance(new_state, int):
                        if abs(new_state) >= len(statestack):
                            del statestack[1:]
                        else:
                            del statestack[new_state:]
                    elif new_state == "#push":
                        statestack.append(statestack[-1])
                    else:
                        raise AssertionError(f"wrong state def: {new_state!r}")
                    state = statestack[-1]
                continue
            if pos >= len(text):
                break
            if text[pos] == "\n":  # at the end of a line, back to "root"
                statestack = ["root"]
                state = "root"
                yield pos, Whitespace, "\n"
                pos += 1
                continue
            yield pos, Error, text[pos]
            pos += 1
