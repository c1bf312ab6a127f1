"""Where the vLLM tree comes from: a folder, a git ref (gitpython), or a release wheel.

Each backend yields a `Tree`: what was scanned (`TreeInfo`), the sorted list of `.py` paths
under `vllm/`, and a `read(path)` that returns bytes. Nothing from the tree is imported or
run; `vllm/_version.py` is read with `ast`.
"""

from __future__ import annotations

import ast
import configparser
import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from kb.errors import Located, SourceError
from kb.model import TreeInfo

if TYPE_CHECKING:
    import git

PACKAGE = "vllm/"
VENDORED_PREFIXES = ("vllm/vllm_flash_attn/", "vllm/third_party/")
# Wheels of vLLM are platform wheels; any of these carries the same .py sources.
WHEEL_PLATFORMS = (
    "manylinux_2_39_x86_64", "manylinux_2_35_x86_64", "manylinux_2_31_x86_64",
    "manylinux_2_34_x86_64", "manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64",
    "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64",
)
# The CPython tags tried in turn: abi3 wheels (0.5 on) match the first; 0.2-0.4 were cp38-cp311 only.
WHEEL_PYTHONS = ("3.12", "3.11", "3.10", "3.9", "3.8")

# A source file is read whole and parsed whole, so its size bounds kb's memory. Both limits are
# checked before a file is read whole (its size from the folder, the git object or the zip
# directory), and a file over one is a located warning, not scanned: the rest of the tree is.
# The largest vLLM file of any release is 0.36 MB (0.28.0's gpu_model_runner.py; 0.34.0: 0.26 MB),
# with about 48,000 words and signs; `ast` takes up to 1.5 KB for each word or sign of dense code.
MAX_SOURCE_BYTES = 8 * 2**20
MAX_SOURCE_TOKENS = 500_000  # words and signs (estimated; see `token_estimate`) of one file


@dataclass(frozen=True)
class SourceSpec:
    """What the user asked for on the command line."""

    source_dir: Optional[str] = None
    git: Optional[str] = None
    ref: Optional[str] = None
    vllm_version: Optional[str] = None
    wheel: Optional[str] = None
    include_vendored: bool = False
    keep_wheel: bool = False  # keep the whole downloaded wheel, not only its Python files


class Tree:
    """A readable vLLM tree. Use as a context manager; `close()` releases files and processes."""

    def __init__(self, info: TreeInfo, paths: list[str], excluded: int, read: Callable[[str], bytes],
                 close: Callable[[], None] = lambda: None, stamp: Optional[Callable[[str], str]] = None,
                 size: Optional[Callable[[str], int]] = None, warnings: Sequence[Located] = ()) -> None:
        self.info = info
        self.paths = paths
        self.excluded = excluded
        # What was refused before any file was parsed: unsafe paths, a __version__ that is no version.
        self.warnings = tuple(warnings)
        self.read = read
        self._close = close
        # A stamp that changes whenever the file's bytes change, known without reading them.
        self.stamp = stamp
        self.size = size

    def __enter__(self) -> Tree:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._close()

    def items(self) -> Iterator[tuple[str, bytes]]:
        for path in self.paths:
            yield path, self.read(path)


def open_tree(spec: SourceSpec, cache: Path) -> Tree:
    if spec.source_dir is not None:
        return from_dir(Path(spec.source_dir), spec.include_vendored)
    if spec.git is not None:
        if not spec.ref:
            raise SourceError("--git needs --ref (a tag, branch or commit)")
        return from_git(spec.git, spec.ref, cache, spec.include_vendored)
    if spec.wheel is not None:
        return from_wheel(Path(spec.wheel), spec.include_vendored)
    if spec.vllm_version is None:
        raise SourceError("no source given")
    return from_wheel(download_wheel(spec.vllm_version, cache, keep=spec.keep_wheel), spec.include_vendored,
                      expect=spec.vllm_version)


def select(paths: list[str], include_vendored: bool, refused: Optional[list[Located]] = None) -> tuple[list[str], int]:
    """The `.py` files of the `vllm/` package, sorted; vendored ones unless asked for. A path
    that could reach outside the tree or the output (`..`, empty parts, control characters, a
    part longer than a file name can be: a zip or git tree can hold any of them) is refused,
    and said so in `refused`."""
    chosen: list[str] = []
    excluded = 0
    for p in paths:
        if not (p.startswith(PACKAGE) and p.endswith(".py")):
            continue
        if not include_vendored and p.startswith(VENDORED_PREFIXES):
            excluded += 1
            continue
        if not safe_path(p):
            if refused is not None:
                refused.append(Located(_shown(p), 1, "not scanned: not a plain relative path (.., empty parts, "
                                                     "control characters or a part over 255 bytes)"))
            continue
        chosen.append(p)
    return sorted(chosen), excluded


def safe_path(path: str) -> bool:
    """A relative path of plain parts: it names a file inside the tree, and its parts can name
    folders of the output (browse/<subsystem>/)."""
    return all(part not in ("", ".", "..") and part.isprintable() and "\\" not in part
               and len(part.encode("utf-8", "surrogatepass")) <= 255 for part in path.split("/"))


def _shown(path: str) -> str:
    """A refused path as a warning can show it: printable, and not too long."""
    text = path.encode("unicode_escape").decode("ascii")
    return text if len(text) <= 200 else text[:200] + "…"


# What a release may be named when it comes from the scanned tree (`__version__`) or from a
# ref: it becomes a folder (releases/<release>/) and a cache file name.
_RELEASE = re.compile(r"[0-9A-Za-z][0-9A-Za-z.+!_-]{0,63}")
_COMMIT = re.compile(r"[0-9A-Za-z][0-9A-Za-z.+_-]{0,63}")


def is_release_name(name: str) -> bool:
    return bool(_RELEASE.fullmatch(name))


def release_name(ref: str) -> str:
    """A git ref as a release name: characters outside the safe set become `-`."""
    name = re.sub(r"[^0-9A-Za-z.+!_-]+", "-", ref).strip(".-_+!")[:64].strip(".-_+!")
    return name or "ref"


def _utc(dt: datetime) -> str:
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def version_info(data: bytes, refused: Optional[list[Located]] = None,
                 path: str = "vllm/_version.py") -> tuple[Optional[str], Optional[str]]:
    """(`__version__`, `__commit_id__` or `__commit__`) as written in `vllm/_version.py` (or
    vLLM 0.5's `vllm/commit_id.py`), read with ast; `commit_of` reads the commit in the latter.

    Both name folders, files and links later, so a value that is not a plain version (or
    commit id) is ignored, and said so in `refused`."""
    try:
        module = ast.parse(data)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None, None
    found: dict[str, tuple[str, int]] = {}
    for stmt in module.body:
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    found.setdefault(target.id, (stmt.value.value, stmt.lineno))
    out: list[Optional[str]] = []
    for names, pattern, what in ((("__version__", "version"), _RELEASE, "version"),
                                 (("__commit_id__", "commit_id", "__commit__"), _COMMIT, "commit id")):
        value, line = next((found[n] for n in names if found.get(n, ("",))[0]), ("", 0))
        if value and not pattern.fullmatch(value):
            if refused is not None:
                refused.append(Located(path, line, f"ignored: {_shown(value)!r} is not a {what}"))
            value = ""
        out.append(value or None)
    return out[0], out[1]


_SCM_NODE = re.compile(r"g?([0-9a-f]{7,64})")


def commit_of(value: Optional[str]) -> Optional[str]:
    """The commit id a `__commit_id__` (or `__commit__`) names, else None. setuptools-scm writes
    its git node, "g" and the abbreviated commit (`g62d4bc3c7`: commit 62d4bc3c7); vLLM 0.5's
    `vllm/commit_id.py` the full sha. Anything else (a Mercurial node, a placeholder) is no commit."""
    m = _SCM_NODE.fullmatch((value or "").lower())
    return m.group(1) if m else None


def commit_kind(commit: Optional[str]) -> str:
    """`full`: a whole commit id; `short`: an abbreviated one (what a release wheel's
    vllm/_version.py holds); `tag`: none is known, the release tag names the source."""
    if commit is None:
        return "tag"
    return "full" if len(commit) in (40, 64) else "short"


def _version_files(read: Callable[[str], bytes], size: Callable[[str], int], have: Callable[[str], bool],
                   refused: list[Located]) -> tuple[Optional[str], Optional[str]]:
    """(version, commit) of a tree from vllm/_version.py, and the commit from vllm/commit_id.py
    when _version.py names none (vLLM 0.5)."""
    version, commit = None, None
    for name in ("vllm/_version.py", "vllm/commit_id.py"):
        if have(name) and _version_size_ok(size(name), refused, name):
            v, c = version_info(read(name), refused, name)
            version = version or (v if name == "vllm/_version.py" else None)
            commit = commit or commit_of(c)
    return version, commit


# --- a folder --------------------------------------------------------------------------------
def from_dir(root: Path, include_vendored: bool) -> Tree:
    root = root.resolve() if root.exists() else root
    if not root.is_dir():
        raise SourceError("not a folder", str(root))
    if not (root / "vllm").is_dir():
        raise SourceError("not a vLLM source tree (no vllm/ package folder)", str(root))
    refused: list[Located] = []
    repo = _work_tree(root)
    if repo is not None:
        listed = repo.git.ls_files("-z", "--", "vllm").split("\0")
        head = repo.head.commit
        dirty = repo.is_dirty(untracked_files=False)
        repo.close()
        paths, excluded = select([p for p in listed if p and (root / p).is_file()], include_vendored, refused)
        paths = within_limits(_inside(root, paths, refused), lambda p: (root / p).stat().st_size,
                              lambda p: _read_file(root, p), refused)
        version = _dir_version(root, refused)[0]
        info = TreeInfo("dir", str(root), head.hexsha, head.hexsha, _utc(head.committed_datetime), version, dirty)
    else:
        listed = [p.relative_to(root).as_posix() for p in (root / "vllm").rglob("*.py") if p.is_file()]
        paths, excluded = select(listed, include_vendored, refused)
        paths = within_limits(_inside(root, paths, refused), lambda p: (root / p).stat().st_size,
                              lambda p: _read_file(root, p), refused)
        version, commit = _dir_version(root, refused)
        ref = f"v{version}" if version else "main"
        info = TreeInfo("dir", str(root), ref, commit, None, version)
    return Tree(info, paths, excluded, lambda p: _read_file(root, p), warnings=refused)


def _read_file(root: Path, path: str) -> bytes:
    """A file of the tree, at most MAX_SOURCE_BYTES of it: one that grew past the limit since it
    was listed is an error, never a whole read."""
    with open(root / path, "rb") as f:
        data = f.read(MAX_SOURCE_BYTES + 1)
    if len(data) > MAX_SOURCE_BYTES:
        raise SourceError(f"grew past the {MAX_SOURCE_BYTES // 2**20} MiB limit for a source file while it was "
                          "scanned", path)
    return data


def within_limits(paths: list[str], size: Callable[[str], int], read: Callable[[str], bytes],
                  refused: list[Located]) -> list[str]:
    """The paths whose file kb may read and parse whole; the others said in `refused`. `size` is
    known without reading the file; only a file larger than MAX_SOURCE_TOKENS bytes (none in
    vLLM) is read here, to estimate its words and signs."""
    kept = []
    for p in paths:
        n = size(p)
        if n > MAX_SOURCE_BYTES:
            refused.append(Located(p, 1, f"not scanned: {n:,} bytes, over the {MAX_SOURCE_BYTES // 2**20} MiB "
                                         "limit for a source file"))
        elif n > MAX_SOURCE_TOKENS and (tokens := token_estimate(read(p))) > MAX_SOURCE_TOKENS:
            refused.append(Located(p, 1, f"not scanned: about {tokens:,} words and signs, over the "
                                         f"{MAX_SOURCE_TOKENS:,} limit for a source file"))
        else:
            kept.append(p)
    return kept


_SPACE = b" \t\n\r\f\v"
_WORD_OR_SPACE = bytes(range(128, 256)) + b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz" + _SPACE
_SPACE_OR_NOT = bytes(b" "[0] if c in _SPACE else b"x"[0] for c in range(256))


def token_estimate(data: bytes) -> int:
    """About as many as the words and signs of Python source `data`, not fewer: each sign byte,
    and each run of white space (two words need one between them). What `ast.parse`'s memory
    follows; at most len(data). Counted in C, with a copy or two of `data` and no list."""
    signs = len(data.translate(None, _WORD_OR_SPACE))
    spaced = data.translate(_SPACE_OR_NOT)
    return signs + spaced.count(b"x ") + spaced.startswith(b" ")


def _inside(root: Path, paths: list[str], refused: list[Located]) -> list[str]:
    """The paths whose file, symbolic links followed, lies inside the tree: a link to a file
    elsewhere would put that file's text into the scan (and the site)."""
    kept = []
    for p in paths:
        target = (root / p).resolve()
        if target.is_relative_to(root) and target.is_file():
            kept.append(p)
        else:
            refused.append(Located(p, 1, "not scanned: a symbolic link to a file outside the tree"))
    return kept


def _dir_version(root: Path, refused: list[Located]) -> tuple[Optional[str], Optional[str]]:
    def have(name: str) -> bool:
        f = root / name
        if not f.is_file():
            return False
        if not f.resolve().is_relative_to(root):
            refused.append(Located(name, 1, "ignored: a symbolic link to a file outside the tree"))
            return False
        return True

    return _version_files(lambda name: _read_file(root, name), lambda name: (root / name).stat().st_size, have,
                          refused)


MAX_VERSION_BYTES = 64 * 1024  # vllm/_version.py is a few lines


def _version_size_ok(size: int, refused: list[Located], path: str = "vllm/_version.py") -> bool:
    if size <= MAX_VERSION_BYTES:
        return True
    refused.append(Located(path, 1, f"ignored: {size:,} bytes, over the {MAX_VERSION_BYTES // 1024} KiB limit for a "
                                    "version file"))
    return False


def _work_tree(root: Path) -> Optional[git.Repo]:
    import git

    try:
        repo = git.Repo(root)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return None
    if repo.bare or repo.working_tree_dir is None or Path(repo.working_tree_dir).resolve() != root:
        repo.close()
        return None
    try:
        _ = repo.head.commit
    except ValueError:  # no commit yet
        repo.close()
        return None
    return repo


# --- a git ref, read from the object store ----------------------------------------------------
def from_git(url: str, ref: str, cache: Path, include_vendored: bool) -> Tree:
    """REF of the repository at URL, read from a bare clone kept in the cache. A cached clone that
    git cannot read (a damaged HEAD, config, ref file or object) is cloned again and replaces it;
    when that clone fails too, the old one stays and the error names it."""
    location = _normalise_url(url)
    target = cache / "git" / (hashlib.sha256(location.encode()).hexdigest()[:16] + ".git")
    cached = os.path.lexists(target)
    if not cached:
        _clone(location, url, target, replace=False)
    try:
        return _read_ref(target, url, ref, include_vendored)
    except _unreadable() as e:
        if not cached:
            raise SourceError(f"git cannot read {ref!r} of {url}: {_git_reason(e)}", str(target)) from None
    _clone(location, url, target, replace=True)
    try:
        return _read_ref(target, url, ref, include_vendored)
    except _unreadable() as e:
        raise SourceError(f"git cannot read {ref!r} of {url}: {_git_reason(e)}", str(target)) from None


def _unreadable() -> tuple[type[Exception], ...]:
    """What git and gitpython raise on a clone they cannot read."""
    import git
    from gitdb.exc import ODBError

    return git.GitError, ODBError, configparser.Error, ValueError, OSError


def _read_ref(target: Path, url: str, ref: str, include_vendored: bool) -> Tree:
    """The tree of REF in the clone at `target`, fetching once when REF is not there yet. Every
    blob is looked up now, so that a damaged clone fails here, where it can be cloned again."""
    import git

    repo = git.Repo(target)
    try:
        commit = _resolve(repo, ref)
        if commit is None:
            repo.git.fetch("--quiet", "--prune", "origin", "+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*")
            commit = _resolve(repo, ref)
        if commit is None:
            raise SourceError(f"ref {ref!r} not found in {url}")
        blobs: dict[str, bytes] = {}
        for b in commit.tree.traverse():
            if isinstance(b, git.Blob):
                path = str(b.path)
                if path.startswith(PACKAGE) and path.endswith(".py"):
                    blobs[path] = b.binsha
        for binsha in blobs.values():
            repo.odb.info(binsha)
        refused: list[Located] = []
        paths, excluded = select(list(blobs), include_vendored, refused)
        version = None
        if "vllm/_version.py" in blobs and _version_size_ok(int(repo.odb.info(blobs["vllm/_version.py"]).size), refused):
            version = version_info(repo.odb.stream(blobs["vllm/_version.py"]).read(), refused)[0]
        info = TreeInfo("git", url, commit.hexsha, commit.hexsha, _utc(commit.committed_datetime), version)
    except BaseException:
        repo.close()
        raise

    def read(path: str) -> bytes:
        try:
            data: bytes = repo.odb.stream(blobs[path]).read()
            algorithm = "sha1" if len(blobs[path]) == 20 else "sha256"  # git's object id
            if hashlib.new(algorithm, b"blob %d\0" % len(data) + data).digest() != blobs[path]:
                raise ValueError("its text does not match its object id")
            return data
        except _unreadable() as e:
            raise SourceError(f"git cannot read it from the cached clone {target}: {_git_reason(e)} "
                              "(delete that folder to clone it again)", path) from None

    paths = within_limits(paths, lambda p: int(repo.odb.info(blobs[p]).size), read, refused)
    return Tree(info, paths, excluded, read, repo.close, warnings=refused)


def _clone(location: str, url: str, target: Path, replace: bool) -> None:
    """A bare clone of `location` at `target`, made beside it and moved in whole; `replace`: the
    folder already there (a damaged clone) is moved out first, and stays when the clone fails."""
    import git

    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".clone-", dir=target.parent))
    try:
        git.Repo.clone_from(location, tmp / "repo.git", bare=True, multi_options=["--quiet"])
        if replace:
            with contextlib.suppress(FileNotFoundError):  # else another kb run replaced it first
                os.replace(target, tmp / "old")  # a symbolic link is moved, never followed
        try:
            os.replace(tmp / "repo.git", target)
        except OSError:
            if not target.is_dir():  # else another kb run cloned it meanwhile
                raise
    except git.GitCommandError as e:
        raise SourceError(f"cannot clone {url}: {_git_reason(e)}") from None
    except OSError as e:
        raise SourceError(f"cannot clone {url} into the cache: {e.strerror or e}", str(target)) from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _normalise_url(url: str) -> str:
    if re.match(r"^[a-z][a-z0-9+.-]*://", url) or re.match(r"^[\w.-]+@[\w.-]+:", url):
        return url
    path = Path(url).expanduser()
    if not path.exists():
        raise SourceError("no such repository", url)
    return str(path.resolve())


def _resolve(repo: git.Repo, ref: str) -> Optional[git.Commit]:
    """The commit REF names, or None when the clone has no such ref or object (yet)."""
    import git
    from gitdb.exc import ODBError

    try:
        commit = repo.commit(ref)
        repo.odb.info(commit.binsha)  # a full commit id resolves without its object
        return commit
    except (ODBError, ValueError, LookupError, git.GitCommandError):
        return None


def _git_reason(e: BaseException) -> str:
    """git's first `fatal:` line (later lines only advise), else its last line."""
    stderr = getattr(e, "stderr", None)
    text = str(stderr or e).strip().splitlines()
    lines = [line.strip().removeprefix("stderr: ").strip("'").strip() for line in text]
    lines = [line for line in lines if line]
    line = next((line for line in lines if line.startswith("fatal:")), lines[-1] if lines else type(e).__name__)
    return line if line.isprintable() and len(line) <= 200 else _shown(line)


# --- a release wheel ---------------------------------------------------------------------------
SLIM_COMMENT = b"kb: only the Python files and the metadata of this wheel are kept"


def slim_wheel(path: Path) -> None:
    """Keep of a wheel only what kb reads: its Python files and its metadata (about 4% of a
    vLLM wheel, whose bulk is compiled code). Members keep their names, dates and CRCs, so the
    scan, its ids and the facts cache see the same tree."""
    tmp = path.with_name(f".{path.name}.slim")
    try:
        with zipfile.ZipFile(path) as z, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as out:
            for info in z.infolist():
                if info.filename.endswith(".py") or ".dist-info/" in info.filename:
                    out.writestr(info, z.read(info), compress_type=zipfile.ZIP_DEFLATED)
            out.comment = SLIM_COMMENT
        os.replace(tmp, path)
    except (zipfile.BadZipFile, OSError, EOFError, zlib.error) as e:
        raise SourceError(f"could not keep the Python files of the wheel: {e}", str(path)) from None
    finally:
        tmp.unlink(missing_ok=True)


def is_slim(path: Path) -> bool:
    try:
        with zipfile.ZipFile(path) as z:
            return z.comment == SLIM_COMMENT
    except (zipfile.BadZipFile, OSError):
        return False


def download_wheel(version: str, cache: Path, keep: bool = False) -> Path:
    """The release wheel of vLLM `version`, downloaded once into the cache with pip; only its
    Python files and metadata stay on disk unless `keep` (a slim wheel is downloaded again
    when the whole one is asked for)."""
    if not re.fullmatch(r"[0-9][0-9A-Za-z.+!-]*", version):
        raise SourceError(f"not a version: {version!r}")
    folder = cache / "wheels"
    for existing in sorted(folder.glob(f"vllm-{version}-*.whl")):
        if keep and is_slim(existing):
            existing.unlink()
            break
        return existing
    folder.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".download-", dir=folder))
    try:
        reason = "no wheel"
        for python in WHEEL_PYTHONS:  # newest first: 0.5.x and later are abi3, older ones cp3XX only
            tag = "cp" + python.replace(".", "")
            cmd = [
                sys.executable, "-m", "pip", "download", f"vllm=={version}", "--no-deps", "--only-binary", ":all:",
                "--python-version", python, "--implementation", "cp", "--abi", "abi3", "--abi", tag, "--abi", "none",
                "--disable-pip-version-check", "--quiet", "-d", str(tmp),
            ]
            for platform in WHEEL_PLATFORMS:
                cmd += ["--platform", platform]
            proc = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
            wheels = sorted(tmp.glob("vllm-*.whl"))
            if proc.returncode == 0 and wheels:
                _check_zip(wheels[0])
                if not keep:
                    slim_wheel(wheels[0])
                final = folder / wheels[0].name
                os.replace(wheels[0], final)
                return final
            lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("ERROR")] or proc.stderr.splitlines()
            reason = lines[-1].removeprefix("ERROR: ") if lines else reason
            if "No matching distribution" not in reason and "from versions" not in reason:
                break  # not a tag mismatch (network, index): another Python tag will not help
        raise SourceError(f"could not download vllm=={version} from the package index: {reason}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _check_zip(path: Path) -> None:
    try:
        with zipfile.ZipFile(path) as z:
            z.namelist()
    except (zipfile.BadZipFile, OSError) as e:
        raise SourceError(f"not a valid wheel (zip): {e}", str(path)) from None


def from_wheel(path: Path, include_vendored: bool, expect: Optional[str] = None) -> Tree:
    if not path.is_file():
        raise SourceError("no such wheel file", str(path))
    try:
        z = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as e:
        raise SourceError(f"not a valid wheel (zip): {e}", str(path)) from None
    members = {i.filename: i for i in z.infolist() if not i.is_dir()}
    refused: list[Located] = []
    paths, excluded = select(list(members), include_vendored, refused)
    if not paths:
        z.close()
        raise SourceError("the wheel holds no vllm/ package", str(path))

    def read(p: str) -> bytes:
        try:
            return z.read(members[p])  # at most its file_size: zipfile stops there (checked first)
        except (zipfile.BadZipFile, OSError, EOFError, zlib.error) as e:  # a corrupt member
            raise SourceError(f"corrupt wheel member {p}: {e}", str(path)) from None

    paths = within_limits(_plainly_compressed(paths, members, refused), lambda p: members[p].file_size, read, refused)
    listed = set(paths)
    version, commit = _version_files(read, lambda p: members[p].file_size, lambda p: p in listed, refused)
    metadata = _metadata_member(members)
    if version is None and metadata is not None:  # no vllm/_version.py before 0.6: the wheel's own metadata
        version = _metadata_version(metadata, lambda: z.read(metadata), refused)
    dated = members.get("vllm/_version.py") if "vllm/_version.py" in listed else metadata
    date = _utc(datetime(*dated.date_time, tzinfo=UTC)) if dated is not None else None
    version = version or expect
    ref = f"v{version}" if version else "main"
    info = TreeInfo("wheel", str(path), ref, commit, date, version)
    return Tree(info, paths, excluded, read, z.close,
                stamp=lambda p: f"zip-crc32:{members[p].CRC:08x}:{members[p].file_size}",
                size=lambda p: members[p].file_size, warnings=refused)


def _metadata_member(members: dict[str, zipfile.ZipInfo]) -> Optional[zipfile.ZipInfo]:
    """The wheel's `vllm-<version>.dist-info/METADATA`, when it has exactly one."""
    found = [i for name, i in members.items() if re.fullmatch(r"vllm-[^/]+\.dist-info/METADATA", name)]
    return found[0] if len(found) == 1 else None


MAX_METADATA_BYTES = 2**20  # vLLM's METADATA is 2-26 KB (its long description)


def _metadata_version(info: zipfile.ZipInfo, read: Callable[[], bytes], refused: list[Located]) -> Optional[str]:
    """The `Version:` header of a wheel's METADATA: the release of a wheel without vllm/_version.py."""
    if info.file_size > MAX_METADATA_BYTES or info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        refused.append(Located(info.filename, 1, "ignored: over 1 MiB or not stored or deflated"))
        return None
    try:
        text = read().decode("utf-8", "replace")
    except (zipfile.BadZipFile, OSError, EOFError, zlib.error):
        return None
    for number, line in enumerate(text.split("\n\n", 1)[0].splitlines(), start=1):
        if line.startswith("Version:"):
            value = line.removeprefix("Version:").strip()
            if _RELEASE.fullmatch(value):
                return value
            refused.append(Located(info.filename, number, f"ignored: {_shown(value)!r} is not a version"))
            return None
    return None


def _plainly_compressed(paths: list[str], members: dict[str, zipfile.ZipInfo], refused: list[Located]) -> list[str]:
    """The members stored or deflated, as wheels are: zipfile unpacks a deflated member in bounded
    steps, while bzip2 or LZMA could unpack one read into gigabytes before its size is checked."""
    kept = []
    for p in paths:
        if members[p].compress_type in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            kept.append(p)
        else:
            refused.append(Located(p, 1, f"not scanned: compressed with zip method {members[p].compress_type} "
                                         "(a wheel's members are stored or deflated)"))
    return kept
