"""`read_lines`: a plain file read in one go gives the same lines as one read line by
line (only b"\\n" ends a line), and the limits hold on both paths."""

from __future__ import annotations

from pathlib import Path

import pytest

from opencrab.importers.common import FileTooLarge, ReadLimits, read_lines
from tests.fakes.corpora import CODEX_FILES

# a file at least this long is read line by line (no line can be over max_line_bytes)
STREAMED = ReadLimits(max_line_bytes=16)
AWKWARD = (
    b'{"a": "carriage\\r"}\r\n'
    b"form\x0cfeed \x1c separators \x1d\x1e \x85 and \xe2\x80\xa8 line separators\n"
    b"\n"
    b"\r\r\n"
    b"cut off mid-line"
)


@pytest.mark.parametrize("content", [AWKWARD, AWKWARD + b"\n", b"{}\n\n{}\n"])
def test_whole_and_streamed_reads_agree(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "rollout.jsonl"
    path.write_bytes(content)
    whole = list(read_lines(path))
    longest = max(len(line) for line in whole)
    assert longest < len(content)  # so with max_line_bytes=longest it is read line by line
    assert list(read_lines(path, ReadLimits(max_line_bytes=longest))) == whole
    assert b"".join(whole) == content
    assert all(line.endswith(b"\n") for line in whole[:-1])
    assert len(whole) == content.count(b"\n") + (not content.endswith(b"\n"))


def test_an_empty_file_has_no_lines(tmp_path: Path) -> None:
    path = tmp_path / "rollout.jsonl"
    path.write_bytes(b"")
    assert list(read_lines(path)) == []


def test_the_corpus_reads_the_same_either_way() -> None:
    for path in CODEX_FILES:
        whole = list(read_lines(path))
        streamed = list(read_lines(path, STREAMED))
        # streamed with 16-byte lines: the long ones become stand-ins, the rest agree
        assert len(whole) == len(streamed)
        assert b"".join(whole) == path.read_bytes()
        for a, b in zip(whole, streamed, strict=True):
            assert a == b or (len(a) > 16 and b.startswith(b"\x00opencrab: over-long line"))


def test_too_many_lines_is_refused_on_both_paths(tmp_path: Path) -> None:
    path = tmp_path / "rollout.jsonl"
    path.write_bytes(b"{}\n" * 11)
    for limits in (ReadLimits(max_lines=10), ReadLimits(max_lines=10, max_line_bytes=8)):
        with pytest.raises(FileTooLarge, match="more than 10 lines"):
            list(read_lines(path, limits))
    assert len(list(read_lines(path, ReadLimits(max_lines=11)))) == 11
