"""kb.files: deterministic gzip, and reading a file that may be gzipped, bounded."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from kb.cli import main
from kb.files import gzip_text, read_text


def test_gzip_text_is_deterministic_and_reads_back(tmp_path: Path) -> None:
    text = '{"a": "héllo"}\n' * 1000
    data = gzip_text(text)
    assert data[:2] == b"\x1f\x8b" and data == gzip_text(text)
    assert data[3] == 0 and data[4:8] == b"\0\0\0\0"  # no file name, no time: the same bytes on any day
    assert gzip.decompress(data).decode("utf-8") == text
    assert len(data) < len(text) // 10
    (tmp_path / "x.gz").write_bytes(data)
    (tmp_path / "plain").write_text(text, encoding="utf-8")  # a host that unpacked it already
    assert read_text(tmp_path / "x.gz", 1 << 20) == read_text(tmp_path / "plain", 1 << 20) == text


def test_read_text_refuses_a_bomb_and_a_damaged_stream(tmp_path: Path) -> None:
    (tmp_path / "bomb").write_bytes(gzip.compress(b"0" * (8 << 20)))  # 8 KB packed, 8 MB unpacked
    with pytest.raises(OSError, match="larger than 1 MB"):
        read_text(tmp_path / "bomb", 1 << 20)
    (tmp_path / "plain").write_bytes(b"1" * ((1 << 20) + 1))
    with pytest.raises(OSError, match="larger than 1 MB"):
        read_text(tmp_path / "plain", 1 << 20)
    (tmp_path / "cut").write_bytes(gzip_text("x" * 10000)[:30])
    with pytest.raises(OSError, match="damaged gzip"):
        read_text(tmp_path / "cut", 1 << 20)
    (tmp_path / "garbage").write_bytes(b"\x1f\x8b" + bytes(range(256)))
    with pytest.raises(OSError, match="damaged gzip"):
        read_text(tmp_path / "garbage", 1 << 20)


def test_read_text_refuses_what_is_no_file_and_names_an_older_sites_file(tmp_path: Path) -> None:
    import os

    os.mkfifo(tmp_path / "fifo.gz")  # read, it would never end
    with pytest.raises(OSError, match="not a regular file"):
        read_text(tmp_path / "fifo.gz", 1 << 20)
    with pytest.raises(FileNotFoundError):
        read_text(tmp_path / "index.json.gz", 1 << 20)
    (tmp_path / "index.json").write_text("{}")
    with pytest.raises(OSError, match="index.json is there: a site an older kb built, build it again"):
        read_text(tmp_path / "index.json.gz", 1 << 20)


@pytest.mark.parametrize("command", ["explain", "search"])
def test_a_site_an_older_kb_built_is_said_so(tmp_path: Path, capsys, command: str) -> None:
    (tmp_path / "api").mkdir()
    for name in ("match-index.json", "search-index.json"):
        (tmp_path / "api" / name).write_text("{}")
    assert main([command, "--site", str(tmp_path), "some error text"]) == 1
    err = capsys.readouterr().err
    assert "a site an older kb built, build it again" in err and "Traceback" not in err, err
    (tmp_path / "api" / "search-index.json").unlink()
    (tmp_path / "api" / "match-index.json").unlink()
    assert main([command, "--site", str(tmp_path), "some error text"]) == 1
    assert "index there (build the site first" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["explain", "search"])
def test_damaged_gzipped_indexes_are_located_errors(tmp_path: Path, capsys, command: str) -> None:
    site = tmp_path / "site"
    (site / "api").mkdir(parents=True)
    for name in ("match-index.json.gz", "search-index.json.gz"):
        (site / "api" / name).write_bytes(gzip_text('{"format": "kb-match/1", "entries": [')[:-6])
    assert main([command, "--site", str(site), "some error text"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Error: ") and "index.json.gz: " in err and "damaged gzip" in err, err
