"""What every transcript importer shares: the parsed form, problems, token calls, and
the pieces of seed 003's NormalizedMessage (segments, sanitising, JSON of tool I/O).

A parser turns a file's lines into a `Transcript`: one NormalizedMessage per line, as
its JSON form (the type is `opencrab.importers.normalized.NormalizedMessage`), or per
content block for formats that pack several into a line; every line that
could not be read reported as a `Problem`, and the model calls whose tokens the file
records as `UsageCall`s. `opencrab.importers.store` then writes a Transcript into the
import tables, the event log, the agent's memory and the LLM metrics.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, TypeVar

import nh3
import orjson

from opencrab.llm.pricing import PriceBook
from opencrab.store import Database
from opencrab.store.repositories import metrics as metrics_repo
from opencrab.store.repositories.metrics import MetricRow

ALLOWED_TAGS = {"p", "pre", "code", "strong", "em", "ul", "ol", "li", "a"}
MB = 1024 * 1024
MAX_LINE_BYTES = 64 * MB  # longer lines are reported, not parsed (nor held whole)
OVERLONG_MARK = b"\x00opencrab: over-long line "
"""How a line over the limit is stood in for by read_lines: the mark, its size in bytes and
the SHA-256 of its bytes (so an appended file still proves its start unchanged)."""
UNREAD_MARK = b"\x00opencrab: no transcript line "
"""How a line that is not JSON, not an object or nested too deep is stored (`unread`):
the mark and the SHA-256 of its bytes, never its text."""
UNREAD_KEY = "\x00opencrab_sha256"
"""The key of a stored JSON-object line no rule reads (`unread_stand_in`): its SHA-256."""
MAX_DEPTH = 200
"""Deepest nesting of arrays and objects taken from a file (orjson parses 1024 levels but
writes 254 at most, and a message wraps what it keeps in a few levels of its own)."""
DEEP_LINE_BYTES = 2 * (MAX_DEPTH + 1)
"""The shortest text that can nest deeper than MAX_DEPTH: each of its MAX_DEPTH + 1
opening brackets is closed (shorter lines are not looked at for depth)."""
_NOT_OPENING = bytes(b for b in range(256) if b not in b"[{")
"""Every byte but `[` and `{`: deleting them leaves a line's opening brackets (one pass)."""


@dataclass(frozen=True)
class Problem:
    """A line that could not be normalized as it is, and why."""

    file: str
    line: int
    reason: str

    def as_json(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "reason": self.reason}

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.reason}"


@dataclass
class UsageCall:
    """One model call's tokens.

    `input_tokens` includes cached input (read and written) and `output_tokens`
    includes reasoning, so `total_tokens` is input + output and the cache and reasoning
    counts are breakdowns, never added on top. `latency_ms` is estimated from the
    transcript's timestamps: from the last input (user message or tool output) before
    the call to the line that recorded its tokens.
    """

    timestamp: str
    line: int
    model: str | None
    input_tokens: int
    cached_input_tokens: int
    output_tokens: int
    reasoning_output_tokens: int
    total_tokens: int
    cache_write_input_tokens: int = 0
    latency_ms: int | None = None
    message_id: str | None = None  # the provider's message id, where the file has one


@dataclass
class UsageImport:
    """What a usage-only import (`gemini.import_usage`, `opencode.import_usage`) read and
    stored."""

    files: int = 0  # files read (chat files, databases)
    calls: int = 0  # metrics rows added (calls stored before are not counted again)
    problems: list[Problem] = field(default_factory=list)


def text_or_none(value: object) -> str | None:
    """`value` when it is a non-empty string, else None (a field a file may leave out)."""
    return value if isinstance(value, str) and value else None


def shown(value: object) -> str:
    """`value` as a problem quotes it: its repr, cut to 40 characters."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."


def store_new_calls(db: Database, rows: Sequence[MetricRow]) -> int:
    """Store those of a usage import's `rows` not stored yet (their ids are stable, so
    a file read again adds nothing), in one transaction; how many were new."""
    if not rows:
        return 0
    with db.write() as conn:
        stored = metrics_repo.stored_ids(conn, [row.id for row in rows])
        new = [row for row in rows if row.id not in stored]
        if new:
            metrics_repo.insert(conn, new)
    return len(new)


class UsageRead(Protocol):
    """What a usage-only import read of one file: its problems (and its calls)."""

    problems: list[Problem]


U = TypeVar("U", bound=UsageRead)


def import_usage_of(
    db: Database,
    found: tuple[list[Path], list[Problem]],
    read: Callable[[Path], U],
    rows: Callable[[U, PriceBook], Iterable[MetricRow]],
    prices: PriceBook | None,
) -> UsageImport:
    """A usage-only import: each of the `found` files (and the problems of finding them)
    read with `read`, its calls made metrics rows with `rows` and those not stored yet
    stored, one transaction per file. `prices` None: the database's price book."""
    files, problems = found
    result = UsageImport(problems=list(problems))
    if prices is None:
        with db.read() as conn:
            prices = PriceBook.load(conn)
    for path in files:
        usage = read(path)
        result.problems += usage.problems
        result.files += 1
        result.calls += store_new_calls(db, list(rows(usage, prices)))
    return result


@dataclass(slots=True)
class Entry:
    """A line's part that becomes an AgentEvent (what the import writes to the event log).

    kind: user, assistant, reasoning, tool_call, tool_result or usage. `text` is the
    text as written (not sanitised: this is memory, not HTML); a tool_call has `name`
    and `arguments` (parsed JSON when it parses); a tool_result names its call by
    `call_line`/`call_part` and has `text` as its output; usage carries its UsageCall.
    `part` tells apart several entries of one line (Claude Code packs content blocks).
    """

    line: int
    kind: str
    timestamp: str
    text: str = ""
    name: str | None = None
    arguments: Any = None
    call_line: int | None = None
    call_part: int = 0
    is_error: bool = False
    usage: UsageCall | None = None
    part: int = 0
    parent: tuple[int, int] | None = None  # (line, part) of the event it answers, if not the
    # one before it (Claude Code's parentUuid tree)


@dataclass
class Transcript:
    """What one file (or the new lines of one) holds."""

    file_path: str
    source: str = "codex"
    session_id: str | None = None
    started_at: str | None = None
    ended_at: str | None = None  # the last timestamp the file gives
    header: dict[str, Any] = field(default_factory=dict)
    model: str | None = None
    provider: str | None = None
    title: str | None = None  # the first thing the user said, or the file's own summary
    messages: list[dict[str, Any]] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    lines: int = 0  # lines read, the skipped ones included
    blank_lines: int = 0
    consumed_lines: int = 0  # lines that will not be read again (a cut-off last line is not)
    consumed_bytes: int = 0
    usage: list[UsageCall] = field(default_factory=list)
    total_usage: dict[str, int] | None = None  # the file's own running total, if it has one
    legacy: bool = False
    kinds: dict[str, int] = field(default_factory=dict)  # messages by source_type
    entries: list[Entry] = field(default_factory=list)  # filled by the import scan only
    # lines that are no transcript's, by 0-based index: what is stored in their place
    # (their SHA-256 and what reading them again needs, never their text); see `unread`
    unread: dict[int, bytes] = field(default_factory=dict)

    def count(self, source_type: str, n: int = 1) -> None:
        self.kinds[source_type] = self.kinds.get(source_type, 0) + n


def name_of(value: Any) -> str | None:
    """`value` when it is a string, else None: for the types, ids and names read from a
    file, which a hostile or damaged line may give as an object, a list or a number."""
    return value if type(value) is str else None


def _object_digest(event: dict[str, Any]) -> str:
    stored = event.get(UNREAD_KEY)
    if type(stored) is str:  # a stand-in (`unread_stand_in`): the digest of the line it was
        return stored
    try:
        text = orjson.dumps(event, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # a value orjson does not write: its repr is as stable
        text = repr(sorted(event.items(), key=lambda kv: kv[0])).encode()
    return hashlib.sha256(text).hexdigest()


def unread_payload(event: dict[str, Any]) -> dict[str, str]:
    """What a NormalizedMessage keeps in `raw` of a line no rule reads: the SHA-256 of
    the line's object (keys sorted), never its text, which need not be a transcript's."""
    return {"payload_sha256": _object_digest(event)}


def unread(result: Transcript, index: int, event: dict[str, Any]) -> None:
    """Note a JSON-object line no rule reads: an import stores, instead of its text, the
    few keys its meta message is made of (`type` and `timestamp`, when strings) and its
    SHA-256, which read again give the same message."""
    kept: dict[str, Any] = {k: event[k] for k in ("type", "timestamp") if type(event.get(k)) is str}
    kept[UNREAD_KEY] = _object_digest(event)
    result.unread[index] = orjson.dumps(kept)


def described(value: Any) -> str:
    """A value from a file, short enough for a problem report."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def json_lines(
    lines: Iterable[bytes], result: Transcript, skip_lines: int
) -> Iterator[tuple[int, dict[str, Any]]]:
    """(0-based index, object) for each JSON-object line; `result` keeps the bookkeeping.

    Blank lines are counted; a line that is too long, not JSON or not an object is
    reported as a Problem (for lines past `skip_lines` only: the others were reported by
    the import that read them). A last line cut off mid-write (no newline, incomplete
    JSON) is reported and not consumed, so the next import reads it again. Skipped lines
    are yielded too: parsers replay them to rebuild their state.
    """
    file_path = result.file_path
    problems = result.problems
    unread_line = result.unread
    loads = orjson.loads
    number = read = cut_lines = cut_bytes = 0  # cut: lines cut off mid-write (not consumed)
    try:
        for index, raw in enumerate(lines):
            number = index + 1
            size = len(raw)
            read += size
            try:
                if size > MAX_LINE_BYTES:
                    raise ValueError
                event = loads(raw)
            except (orjson.JSONDecodeError, ValueError) as exc:
                stripped = raw.strip()
                if not stripped:
                    if index >= skip_lines:
                        result.blank_lines += 1
                    continue
                if raw.startswith(UNREAD_MARK):  # stored in place of a line (`unread`)
                    reason = "not a transcript line (stored as its SHA-256 only)"
                elif raw.startswith(OVERLONG_MARK):  # read_lines' stand-in: "size sha256"
                    length = raw[len(OVERLONG_MARK) :].split(b" ", 1)[0].decode(errors="replace")
                    reason = f"line of {length} bytes is too long"
                elif len(stripped) > MAX_LINE_BYTES:
                    reason = f"line of {len(stripped)} bytes is too long"
                elif not raw.endswith(b"\n"):  # cut off mid-write: read again next time
                    cut_lines += 1
                    cut_bytes += size
                    reason = "truncated last line (no newline, not complete JSON)"
                else:
                    reason = f"not valid JSON: {exc}"
                    if index >= skip_lines:
                        unread_line[index] = _unread_mark(raw)
                if index >= skip_lines:
                    problems.append(Problem(file_path, number, reason))
                continue
            if type(event) is not dict:
                if index >= skip_lines:
                    problems.append(
                        Problem(file_path, number, f"a JSON {type(event).__name__}, not an object")
                    )
                    unread_line[index] = _unread_mark(raw)
                continue
            # walked only when the line has that many opening brackets (see too_deep)
            if size >= DEEP_LINE_BYTES and too_deep(raw, event):
                if index >= skip_lines:
                    problems.append(
                        Problem(file_path, number, f"JSON nested deeper than {MAX_DEPTH} levels")
                    )
                    unread_line[index] = _unread_mark(raw)
                continue
            yield index, event
    finally:
        result.lines = number
        result.consumed_lines = number - cut_lines
        result.consumed_bytes += read - cut_bytes


def _unread_mark(raw: bytes) -> bytes:
    """What is stored in place of a line that is no JSON object (see UNREAD_MARK)."""
    return UNREAD_MARK + hashlib.sha256(raw.rstrip(b"\r\n")).hexdigest().encode()


UNREADABLE = "could not be read"
"""How the problem of a line that made a reader fail starts (no known input does)."""


def unreadable(result: Transcript, index: int, exc: Exception) -> None:
    """Report a line a reader failed on: the import keeps it as meta and goes on."""
    reason = f"{UNREADABLE} ({type(exc).__name__}: {described(str(exc))}); kept as meta"
    result.problems.append(Problem(result.file_path, index + 1, reason))


def opening_brackets(text: bytes) -> int:
    """How many `[` and `{` bytes `text` holds (inside strings too), in one pass."""
    return len(text.translate(None, _NOT_OPENING))


def too_deep(text: bytes | str, value: Any) -> bool:
    """True when `value`, parsed from `text`, nests arrays and objects deeper than
    MAX_DEPTH; walked only when `text` has that many opening brackets."""
    if isinstance(text, bytes):
        if opening_brackets(text) <= MAX_DEPTH:
            return False
    elif text.count("[") + text.count("{") <= MAX_DEPTH:
        return False
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if type(node) is dict else node if type(node) is list else ()
        if children and depth > MAX_DEPTH:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


# ------------------------------------------------------------------ reading files
@dataclass(frozen=True)
class ReadLimits:
    """What an import takes from one file, counted after decompression (`[imports]`)."""

    max_bytes: int = 512 * MB
    max_lines: int = 1_000_000
    max_line_bytes: int = MAX_LINE_BYTES  # a longer line is reported, never held whole

    @classmethod
    def of(cls, max_decompressed_mb: int, max_lines: int) -> ReadLimits:
        return cls(max_bytes=max_decompressed_mb * MB, max_lines=max_lines)


class FileTooLarge(Exception):
    """A file gave more bytes or lines than ReadLimits allow; the import refuses it whole."""


def read_lines(path: Path, limits: ReadLimits | None = None) -> Iterator[bytes]:
    """The file's lines as bytes (`.zst` files decompressed on the fly), within `limits`:
    FileTooLarge past the bytes or lines allowed, and a line over `max_line_bytes` read
    in pieces and yielded as a short stand-in (OVERLONG_MARK, its size, its SHA-256)."""
    limits = limits or ReadLimits()
    with path.open("rb") as handle:
        if path.suffix == ".zst":
            import zstandard

            with zstandard.ZstdDecompressor().stream_reader(handle) as reader:
                yield from _lines(io.BufferedReader(reader, 1 << 20), limits)
            return
        # a plain file that cannot hold a line over the limit is read in one go
        whole = min(limits.max_line_bytes, limits.max_bytes)
        if os.fstat(handle.fileno()).st_size <= whole:
            data = handle.read(whole + 1)
            if len(data) <= whole:  # (it may have grown since)
                lines = io.BytesIO(data).readlines()
                del data
                if len(lines) > limits.max_lines:
                    raise _too_many_lines(limits)
                yield from lines
                return
            handle.seek(0)
        yield from _lines(handle, limits)


def _lines(stream: io.BufferedReader, limits: ReadLimits) -> Iterator[bytes]:
    readline = stream.readline
    longest = limits.max_line_bytes + 1
    total = lines = 0
    while line := readline(longest):
        lines += 1
        total += len(line)
        if lines > limits.max_lines:
            raise _too_many_lines(limits)
        if total > limits.max_bytes:
            raise _too_many_bytes(limits)
        if len(line) > limits.max_line_bytes:
            size, digest = len(line), hashlib.sha256(line)
            while not line.endswith(b"\n"):
                line = readline(1 << 20)
                if not line:
                    break
                size += len(line)
                total += len(line)
                if total > limits.max_bytes:
                    raise _too_many_bytes(limits)
                digest.update(line)
            end = b"\n" if line.endswith(b"\n") else b""
            line = OVERLONG_MARK + f"{size} {digest.hexdigest()}".encode() + end
        yield line


def _too_many_lines(limits: ReadLimits) -> FileTooLarge:
    return FileTooLarge(
        f"more than {limits.max_lines} lines; not imported (the limit is [imports] max_lines)"
    )


def _too_many_bytes(limits: ReadLimits) -> FileTooLarge:
    return FileTooLarge(
        f"more than {limits.max_bytes // MB} MB of lines once decompressed; not imported "
        "(the limit is [imports] max_decompressed_mb)"
    )


def find_files(
    paths: Iterable[str | os.PathLike[str]], pattern: str, suffixes: tuple[str, ...]
) -> tuple[list[Path], list[Problem]]:
    """Files under `paths` matching `pattern` and ending in one of `suffixes`, each once;
    a path given as a file is taken as it is, one that does not exist is a Problem."""
    found: list[Path] = []
    problems: list[Problem] = []
    for given in paths:
        path = Path(given).expanduser()
        if path.is_file():
            found.append(path)
        elif path.is_dir():
            found += sorted(
                p for p in path.rglob(pattern) if p.is_file() and p.name.endswith(suffixes)
            )
        else:
            reason = "not a file or folder" if path.exists() else "no such file or folder"
            problems.append(Problem(str(path), 0, reason))
    return list(dict.fromkeys(found)), problems


def parse_path(parse: Callable[..., Transcript], path: Path, skip_lines: int) -> Transcript:
    """`parse` (a parser's parse_lines) over a file, with the file's mtime."""
    try:
        mtime: float | None = path.stat().st_mtime
    except OSError:
        mtime = None
    return parse(read_lines(path), str(path), skip_lines=skip_lines, mtime=mtime)


def parse_time(text: str | None) -> datetime | None:
    """An ISO-8601 timestamp as an aware UTC datetime (UTC when it has no zone); None
    when it is missing, unreadable or out of range once in UTC."""
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        return None


def file_size(path: Path) -> int:
    """The file's size in bytes, 0 when it cannot be read."""
    try:
        return path.stat().st_size
    except OSError:
        return 0


def millis_between(start: str | None, end: str | None) -> int | None:
    """Milliseconds from one timestamp to a later one; None when unknown or negative."""
    if not start or not end:
        return None
    first, last = parse_time(start), parse_time(end)
    if first is None or last is None:
        return None
    millis = round((last - first).total_seconds() * 1000)
    return millis if 0 <= millis < 2**31 else None


# ------------------------------------------------------------------ message pieces
def normalized_message(
    file_path: str,
    timestamp: str,
    index: int,
    part: int = 0,
    *,
    role: str,
    source_type: str,
    event_type: str,
    payload_type: str | None = None,
    segments: list[dict[str, Any]] | None = None,
    tool_call: dict[str, Any] | None = None,
    metadata: dict[str, Any] | None = None,
    raw_extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Line `index`'s NormalizedMessage (block `part` of it) as its JSON form: id
    `timestamp#line` (`timestamp#line.part` for part > 0), where it came from in `raw`."""
    raw: dict[str, Any] = {
        "event_type": event_type,
        "payload_type": payload_type,
        "file_path": file_path,
        "line_index": index,
    }
    if part:
        raw["part"] = part
    if raw_extra:
        raw.update(raw_extra)
    number = f"{index + 1}" if part == 0 else f"{index + 1}.{part}"
    message: dict[str, Any] = {
        "id": f"{timestamp}#{number}",
        "timestamp": timestamp,
        "role": role,
        "source_type": source_type,
        "segments": segments or [],
        "raw": raw,
    }
    if tool_call is not None:
        message["tool_call"] = tool_call
    if metadata:
        message["metadata"] = metadata
    return message


def injected_kind(texts: list[str], prefixes: Iterable[tuple[str, str]]) -> str | None:
    """The kinds (comma-joined) of context a coding agent put on the user's side, when
    every text starts with one of its `(prefix, kind)` markers; None when one does not."""
    if not texts:
        return None
    kinds = set()
    for text in texts:
        head = text.lstrip()[:64].lower()
        kind = next((k for prefix, k in prefixes if head.startswith(prefix)), None)
        if kind is None:
            return None
        kinds.add(kind)
    return ",".join(sorted(kinds))


def text_segments(text: Any, channel: str, fmt: str) -> list[dict[str, Any]]:
    """One sanitised text segment, or none for empty text."""
    if not isinstance(text, str) or not text:
        return []
    return [
        {
            "channel": channel,
            "type": "text",
            "format": fmt,
            "text": sanitize(text),
            "annotations": [],
        }
    ]


def image_segment(channel: str, fmt: str, url: Any, media_type: Any = None) -> dict[str, Any]:
    """An image segment: a `data:` URI kept whole with its decoded size, or a plain URL."""
    media: dict[str, Any] = {}
    if isinstance(url, str):
        media["data_uri" if url.startswith("data:") else "url"] = url
        if url.startswith("data:") and "," in url:
            media["size_bytes"] = len(url.split(",", 1)[1]) * 3 // 4
    if isinstance(media_type, str):
        media["media_type"] = media_type
    return {"channel": channel, "type": "image", "format": fmt, "media": media, "annotations": []}


def sanitize(text: str) -> str:
    """`text` as HTML holding allow-listed tags only (p, pre, code, strong, em, ul, ol, li,
    a): a `<` that opens no allowed tag is text (`&lt;`), so `Vec<String>`, `x<y` or a
    `<script>` a person wrote is kept as written and shown, never run nor dropped."""
    if "<" not in text and "&" not in text and ">" not in text:
        return text  # nothing an HTML parser would change
    return str(nh3.clean(_NOT_A_TAG.sub("&lt;", text), tags=ALLOWED_TAGS))


_NOT_A_TAG = re.compile(
    r"<(?!/?(?:" + "|".join(sorted(ALLOWED_TAGS, key=len, reverse=True)) + r")(?=[\s/>]))",
    re.IGNORECASE,
)
"""A `<` that does not open or close an allow-listed tag."""


_JSON_AFTER = {"{": '"}', "[": '"{[]-0123456789tfn'}
"""What may follow an opening bracket of JSON text (after whitespace)."""


def json_of(value: Any) -> Any:
    """A JSON string's value; None when it is not JSON text or nests deeper than
    MAX_DEPTH (the raw string is kept)."""
    if not isinstance(value, str):
        return value if isinstance(value, dict | list) else None
    stripped = value.lstrip()
    if not stripped or stripped[0] not in "{[":
        return None
    # what follows the bracket cannot start a member or value ("[REDACTED …]", "[x]"):
    # no JSON, told without raising (an orjson error costs microseconds)
    after = stripped[1:33].lstrip()
    if after and after[0] not in _JSON_AFTER[stripped[0]]:
        return None
    try:
        parsed = orjson.loads(value)
    except orjson.JSONDecodeError:
        return None
    return None if too_deep(value, parsed) else parsed


def segment_text(message: dict[str, Any]) -> str:
    """The text of a message's text segments, joined by blank lines."""
    return "\n\n".join(
        s["text"] for s in message.get("segments") or () if s.get("type") == "text" and s["text"]
    )
