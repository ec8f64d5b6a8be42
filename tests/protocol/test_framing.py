"""LSP base framing: bad header parts are skipped and logged, the reader resynchronises
at the next Content-Length, and no input makes it wait or buffer without bound."""

from __future__ import annotations

import asyncio
import logging
import tracemalloc
from collections.abc import Iterable, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cleveragents.protocol import MAX_BODY, encode_frame, fits, read_body
from cleveragents.protocol._framing import MAX_HEADER, FrameReader

GOOD = b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}'


def framed(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


class ChunkStream(asyncio.StreamReader):
    """A stream that hands out pre-cut chunks as they are asked for, so that nothing is
    buffered ahead of the reader (what a slow pipe does)."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        super().__init__()
        self._chunks: Iterator[bytes] = iter(chunks)
        self._pending = b""

    async def read(self, n: int = -1) -> bytes:
        if not self._pending:
            self._pending = next(self._chunks, b"")
        size = len(self._pending) if n < 0 else n
        chunk, self._pending = self._pending[:size], self._pending[size:]
        return chunk


def stream(data: bytes, *, eof: bool = True) -> asyncio.StreamReader:
    reader = asyncio.StreamReader()
    reader.feed_data(data)
    if eof:
        reader.feed_eof()
    return reader


async def read_all(reader: asyncio.StreamReader, **options: int) -> list[bytes]:
    framer = FrameReader(reader, **options)
    bodies = []
    async with asyncio.timeout(10):
        while (body := await framer.read()) is not None:
            bodies.append(body)
    return bodies


async def read_chunks(chunks: Iterable[bytes], **options: int) -> list[bytes]:
    return await read_all(ChunkStream(chunks), **options)  # a StreamReader wants a loop


BAD_HEADERS = {
    "missing length": b"Content-Type: application/json\r\n\r\n{}",
    "negative": b"Content-Length: -5\r\n\r\nhello",
    "not a number": b"Content-Length: abc\r\n\r\nabc",
    "empty value": b"Content-Length: \r\n\r\n{}",
    "trailing letters": b"Content-Length: 5x\r\n\r\nhello",
    "plus sign": b"Content-Length: +2\r\n\r\n{}",
    "underscore digits": b"Content-Length: 1_0\r\n\r\n0123456789",
    "fraction": b"Content-Length: 2.0\r\n\r\n{}",
    "over the limit": b"Content-Length: %d\r\n\r\n{}" % (MAX_BODY + 1),
    "200 MB": b"Content-Length: 209715200\r\n\r\n{}",
    "a million digits": b"Content-Length: " + b"9" * 1_000_000 + b"\r\n\r\n{}",
    "conflicting lengths": b"Content-Length: 2\r\nContent-Length: 3\r\n\r\nabc",
    "line with no end": b"X-Junk: " + b"x" * (3 * MAX_HEADER),
    "header part with no end": b"X-Junk: x\r\n" * MAX_HEADER,
    "bare garbage": b"abc",
    "garbage glued to the header": b"garbage",
    "a lone blank-line-terminated line": b"hello\r\n\r\n",
}


@pytest.mark.parametrize("bad", BAD_HEADERS.values(), ids=BAD_HEADERS.keys())
async def test_a_bad_header_part_is_skipped_and_the_next_frame_is_read(
    bad: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="cleveragents.protocol")
    assert await read_all(stream(bad + framed(GOOD) + framed(b"{}"))) == [GOOD, b"{}"]
    assert any(r.name == "cleveragents.protocol" for r in caplog.records)


async def test_the_log_never_shows_the_body_of_a_skipped_frame(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="cleveragents.protocol")
    secret = b"SECRET-" * 20
    await read_all(stream(b"Content-Length: -5\r\n\r\n" + secret + framed(GOOD)))
    assert caplog.records
    assert "SECRET" not in caplog.text
    assert max(len(r.getMessage()) for r in caplog.records) < 200


async def test_a_huge_claimed_length_is_not_waited_for() -> None:
    # No EOF: a reader that trusted the length would wait for 200 MB that never come.
    reader = stream(b"Content-Length: 209715200\r\n\r\n" + framed(GOOD), eof=False)
    framer = FrameReader(reader)
    async with asyncio.timeout(5):
        assert await framer.read() == GOOD


async def test_a_10_mb_line_without_newline_is_skipped_in_bounded_memory() -> None:
    line = b"x" * 65536
    chunks = [framed(b"[1]"), *([line] * 160), framed(GOOD)]  # 10 MiB of one line
    tracemalloc.start()
    try:
        bodies = await read_all(ChunkStream(chunks))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert bodies == [b"[1]", GOOD]
    assert peak < 1024 * 1024, f"peak {peak} bytes while skipping a 10 MiB line"


async def test_lf_only_and_mixed_line_ends_are_read() -> None:
    data = (
        b"Content-Length: 2\n\n{}"
        + b"Content-Type: application/json\nContent-Length: 3\r\n\n[1]"
        + b"Content-Length: 4\r\n\r\n[22]"
    )
    assert await read_all(stream(data)) == [b"{}", b"[1]", b"[22]"]


async def test_content_type_and_header_case_are_accepted() -> None:
    data = (
        b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\ncontent-length: 2\r\n\r\n{}"
        + b"CONTENT-LENGTH:3\r\n\r\n[1]"
        + b"Content-Length: 2\r\nContent-Length: 2\r\n\r\n[]"  # a repeated equal length
    )
    assert await read_all(stream(data)) == [b"{}", b"[1]", b"[]"]


async def test_blank_lines_between_frames_are_harmless(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="cleveragents.protocol")
    data = b"\r\n" + framed(b"{}") + b"\r\n\n\r\n" + framed(GOOD)
    assert await read_all(stream(data)) == [b"{}", GOOD]
    assert not caplog.records


@pytest.mark.parametrize(
    "data",
    [b"", b"Content-Length: 10\r\n\r\n{}", b"Content-Length: 10\r\n", b"Content-Le"],
    ids=["empty", "body cut short", "header cut short", "name cut short"],
)
async def test_end_of_input_inside_a_frame_is_none(data: bytes) -> None:
    framer = FrameReader(stream(data))
    async with asyncio.timeout(5):
        assert await framer.read() is None
        assert await framer.read() is None


async def test_a_frame_fed_one_byte_at_a_time_is_read() -> None:
    data = b"Content-Type: x\r\n" + framed(GOOD) + framed(b"{}")
    assert await read_all(ChunkStream(data[i : i + 1] for i in range(len(data)))) == [GOOD, b"{}"]


async def test_a_read_cancelled_mid_body_resumes_where_it_stopped() -> None:
    reader = asyncio.StreamReader()
    framer = FrameReader(reader)
    reader.feed_data(b"Content-Length: 5\r\n\r\n[1,")
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05):
            await framer.read()
    reader.feed_data(b"2]" + framed(b"{}"))
    async with asyncio.timeout(5):
        assert await framer.read() == b"[1,2]"
        assert await framer.read() == b"{}"


async def test_read_body_keeps_bytes_read_ahead_between_calls() -> None:
    reader = stream(framed(b"[1]") + b"junk" + framed(b"[2]") + framed(b"[3]"))
    async with asyncio.timeout(5):
        bodies = [await read_body(reader) for _ in range(4)]
    assert bodies == [b"[1]", b"[2]", b"[3]", None]


def test_encode_frame_counts_utf8_bytes_and_fits_says_what_a_reader_accepts() -> None:
    assert encode_frame('"é"') == b'Content-Length: 4\r\n\r\n"\xc3\xa9"'
    assert fits(b"x" * MAX_BODY)
    assert not fits(b"x" * (MAX_BODY + 1))


# Garbage that holds no Content-Length header name cannot make a frame, so every valid
# frame around it must come out, in order, and nothing else.
garbage = st.binary(max_size=300).filter(lambda g: b"content-length" not in g.lower())


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    items=st.lists(st.tuples(garbage, st.binary(max_size=40)), max_size=8),
    tail=garbage,
    cut=st.lists(st.integers(min_value=1, max_value=97), min_size=1, max_size=20),
    max_header=st.sampled_from([64, MAX_HEADER]),
)
def test_every_frame_after_garbage_is_recovered_in_order(
    items: list[tuple[bytes, bytes]], tail: bytes, cut: list[int], max_header: int
) -> None:
    data = b"".join(junk + framed(body) for junk, body in items) + tail

    def chunks() -> Iterator[bytes]:
        pos, i = 0, 0
        while pos < len(data):
            size = cut[i % len(cut)]
            yield data[pos : pos + size]
            pos, i = pos + size, i + 1

    logging.getLogger("cleveragents.protocol").disabled = True
    try:
        got = asyncio.run(read_chunks(chunks(), max_header=max_header))
    finally:
        logging.getLogger("cleveragents.protocol").disabled = False
    assert got == [body for _, body in items]
