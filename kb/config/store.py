"""The configuration model of a release wheel, read once: kept in the cache under a key of
the wheel's members (name, CRC and size of every file) and of kb's configuration reader, so
that a build of many releases and the tests do not read it again. Trees without such stamps
(a folder, a git ref) are read each time. A cached file that cannot be read is read again."""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Optional

from kb.config.read import read_config
from kb.configmodel import ConfigModel
from kb.files import compact_json, write_atomic

_CODE = Path(__file__).resolve().parent


def _code_digest() -> str:
    h = hashlib.sha256()
    for p in sorted(_CODE.glob("*.py")):
        h.update(p.name.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def config_of(paths: Sequence[str], read: Callable[[str], bytes], stamp: Optional[Callable[[str], str]],
              folder: Optional[Path]) -> ConfigModel:
    """The model of the tree, from the cache `folder` when the tree's files are stamped."""
    if stamp is None or folder is None:
        return read_config(paths, read)
    key = hashlib.sha256(json.dumps([_code_digest(), [(p, stamp(p)) for p in sorted(paths)]]).encode()).hexdigest()
    path = folder / f"{key[:32]}.json"
    try:
        return ConfigModel.from_json(json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        pass
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        path.unlink(missing_ok=True)  # damaged: read the tree again
    model = read_config(paths, read)
    with contextlib.suppress(OSError):  # a cache that cannot be written only costs time
        write_atomic(path, compact_json(model.to_json()))
    return model
