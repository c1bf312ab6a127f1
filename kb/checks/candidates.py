"""The values `kb check` tries for a flag (kb/checks/valid.py, the derived fixes, kb fit's
suggestions and `kb explain`'s fix for the pasted values): small domains only, at most
MAX_CANDIDATES. A module of its own, light to import: `kb explain` reads it without the checks."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from kb.configmodel import Flag

MAX_CANDIDATES = 64


def flag_candidates(flag: Flag, given: Mapping[str, Any]) -> list[Any]:
    """The values worth trying for a flag: its choices; for a count, 1 to 16, the powers of two to
    1024 and the divisors of the other counts given, within its pydantic constraints; none for a
    switch (turning a feature off is a fix, not a value)."""
    if flag.choices:
        return [c for c in flag.choices if isinstance(c, (str, int, float, bool))][:MAX_CANDIDATES]
    if (flag.value_type or flag.type) != "int" or flag.action != "store":  # a switch turns a feature off: not a value
        return []
    found = set(range(1, 17)) | {2**k for k in range(11)}
    for value in given.values():
        if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= 4096:
            found |= {d for d in range(1, value + 1) if value % d == 0}
    limits = dict(flag.constraints)
    low = limits.get("ge", limits.get("gt", 0))
    high = limits.get("le", limits.get("lt", math.inf))
    ok = [v for v in sorted(found) if isinstance(low, (int, float)) and isinstance(high, (int, float))
          and (v >= low if "ge" in limits or "gt" not in limits else v > low)
          and (v <= high if "le" in limits or "lt" not in limits else v < high)]
    return ok[:MAX_CANDIDATES]


__all__ = ["MAX_CANDIDATES", "flag_candidates"]
