"""Public reports (errors/reports/*.yaml) on the records of the errors they quote.

A report counts only where its quote is its error's message: the quote is matched against the
record's template, or an older wording of the same error (the releases' history: a report from
before the message was edited quotes the old words), the way `kb explain` matches a paste. A
report written for an older id follows to the current one, as a curated entry does."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from kb.model import Problem, Record, Report, Wording
from kb.releases.lineage import Gone
from kb.scan.fit import quotable, quotes_template

MAX_REPORTS = 8  # shown per error, and read by search: the first ones by repository and number


def attach_reports(records: Sequence[Record], reports: Sequence[Report], release: str,
                   aliases: Mapping[str, tuple[str, str, str]],
                   wordings: Sequence[Wording] = (), removed: Mapping[str, Gone] = {}) -> \
        tuple[list[Record], list[Problem]]:
    by_id = {r.id: r for r in records}
    # each older id -> the id raised now, or for a removed error the last one (its page's record);
    # an id this release raises is no older wording, whatever the history says
    later = {w.id: w.current or w.chain for w in wordings
             if (w.current or w.chain) not in ("", w.id) and w.id not in by_id}
    older: dict[str, list[str]] = {}
    for w in wordings:
        if w.id in later:
            older.setdefault(later[w.id], []).append(w.template)
    found: dict[str, list[Report]] = {}
    problems: list[Problem] = []
    for rep in reports:
        target = rep.id
        if target not in by_id:
            target = aliases[target][0] if target in aliases else later.get(target, target)
        record = by_id.get(target)
        if record is None:
            gone = removed.get(rep.id)
            if gone is not None:
                problems.append(Problem(rep.path, rep.line, f"report {rep.url}: vLLM {gone.since} no longer raises "
                                                            f"{rep.id} (last raised by {gone.last})", "removed"))
            else:
                problems.append(Problem(rep.path, rep.line, f"report {rep.url}: id {rep.id} is not raised in {release}",
                                        "orphan"))
            continue
        parts = (p for s in record.sites for p in s.fact.parts)  # `{' '.join(errors)}`: the messages it joins
        wordings_of = [t for t in dict.fromkeys((record.template, *parts, *older.get(target, ()))) if quotable(t)]
        if not wordings_of:
            problems.append(Problem(rep.path, rep.line, f"report {rep.url}: the message of {target} "
                                                        f"({record.template[:120]!r}) has too little text of its own "
                                                        "to tell a quote of it", "report"))
            continue
        if not any(quotes_template(t, rep.quote) for t in wordings_of):
            problems.append(Problem(rep.path, rep.line, f"report {rep.url}: its quote is not the message of {target} "
                                                        f"({record.template[:120]!r}) nor an older wording of it",
                                    "report"))
            continue
        mine = found.setdefault(target, [])
        twin = next((r for r in mine if thread(r.url) == thread(rep.url)), None)
        if twin is not None:
            problems.append(Problem(rep.path, rep.line, f"report {rep.url} is listed twice for {target}: also at "
                                                        f"{twin.path}:{twin.line} (as {twin.id})", "report"))
            continue
        mine.append(rep)
    out = [replace(r, reports=tuple(sorted(found[r.id], key=lambda x: (thread(x.url), x.url))[:MAX_REPORTS]))
           if r.id in found else r for r in records]
    return out, problems


def thread(url: str) -> tuple[str, int]:
    """The GitHub thread a URL names: owner/repo in any case and the number as a number (an issue
    and a pull request share numbers: `/pull/7` is `/issues/7`; issue 99 comes before 100)."""
    head, _, number = url.rsplit("/", 2)
    return head.lower(), int(number) if number.isdigit() else 0
