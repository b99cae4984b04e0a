"""What a line is: `LineReader` splits at a line feed only, as `wc -l` counts
(docs/reliability.md, "Inputs and bounds"), for `translate` and the G2P
example's `pronounce`."""

import io

import pytest
from _scripts import load_script

from keras_attention.text.line_reader import LineReader
from keras_attention.text.line_reader import read_inputs


def _lines(data, **options):
    return [text for _, text in LineReader(io.BytesIO(data), **options)]


@pytest.mark.parametrize(
    "data, expected",
    [
        (b"a man\rwalks .\nsecond line\n", ["a man\rwalks .", "second line"]),
        (b"one\r\ntwo\r\n", ["one", "two"]),  # CRLF: the \r goes with its \n
        (b"a\x0cb\nc\x0bd\x1ce\n", ["a\x0cb", "c\x0bd\x1ce"]),
        ("a\u2028b\u2029c\x85d\n".encode(), ["a\u2028b\u2029c\x85d"]),
        (b"no final line feed", ["no final line feed"]),
        (b"\n\n  \n", ["", "", "  "]),
        (b"\r", [""]),
        (b"", []),
        ("\ufeffbom\n\ufeffkept\n".encode(), ["bom", "\ufeffkept"]),
    ],
)
def test_one_line_per_line_feed_whatever_the_line_holds(data, expected):
    lines = _lines(data)
    assert lines == expected
    # As `wc -l` counts (plus a last line without a line feed).
    assert len(lines) == data.count(b"\n") + (bool(data) and not data.endswith(b"\n"))


def test_lines_longer_than_a_chunk_are_read_whole():
    line = "x" * 200_000
    assert _lines(f"{line}\n{line}".encode()) == [line, line]


def test_a_text_stream_is_read_as_its_bytes():
    # A text stream with universal newlines (Windows' standard input) would
    # split at the \r; its bytes are read instead.
    stream = io.TextIOWrapper(io.BytesIO(b"a\rb\nc\n"), encoding="utf-8")
    assert [text for _, text in LineReader(stream)] == ["a\rb", "c"]
    assert [text for _, text in LineReader(io.StringIO("a\rb\nc"))] == ["a\rb", "c"]


def test_invalid_utf8_is_an_error_naming_the_line_and_byte():
    reader = LineReader(io.BytesIO(b"fine\nTwo \xff dogs.\n"))
    assert next(reader) == (1, "fine")
    with pytest.raises(ValueError, match=r"^line 2 of standard input is not valid UTF-8 "):
        next(reader)
    with pytest.raises(ValueError, match=r"\(byte 0xff at byte 4\)"):
        _lines(b"fine\nTwo \xff dogs.\n")


def test_a_line_longer_than_the_bound_is_refused_naming_it():
    with pytest.raises(ValueError, match="line 2 of the file is longer than 10 bytes"):
        list(LineReader(io.BytesIO(b"short\n" + b"y" * 11 + b"\n"), "the file", 10))
    with pytest.raises(ValueError, match="line 1 of standard input is longer than 10 bytes"):
        _lines(b"y" * 11, max_line_bytes=10)
    assert _lines(b"y" * 10 + b"\n", max_line_bytes=10) == ["y" * 10]


def test_ready_says_whether_a_pipe_has_a_line_without_waiting():
    import os

    read_end, write_end = os.pipe()
    with open(read_end, "rb") as stream, open(write_end, "wb", buffering=0) as writer:
        reader = LineReader(stream)
        assert not reader.ready()  # nothing written: reading would wait
        writer.write(b"one\ntwo\n")
        assert reader.ready()
        assert next(reader) == (1, "one")
        assert reader.ready()  # "two" is buffered
        assert next(reader) == (2, "two")
        assert not reader.ready()


def test_read_inputs_labels_arguments_or_the_lines_of_a_reader():
    assert read_inputs(["a b", ""], "cmd") == [("argument 1", "a b"), ("argument 2", "")]
    stream = io.TextIOWrapper(io.BytesIO(b"keras\rkeras\n\nword\r\n"), encoding="utf-8")
    lines = read_inputs([], "cmd", LineReader(stream))
    assert list(lines) == [
        ("line 1 of standard input", "keras\rkeras"),  # a lone CR stays in its line
        ("line 2 of standard input", ""),  # blank lines are kept
        ("line 3 of standard input", "word"),
    ]
    bad = read_inputs(None, "cmd", LineReader(io.BytesIO(b"ok\nw\xe9rd\n")))
    assert next(bad) == ("line 1 of standard input", "ok")  # lazily, line by line
    with pytest.raises(SystemExit, match=r"^cmd: line 2 of standard input is not valid UTF-8"):
        next(bad)
    with pytest.raises(SystemExit, match=r"^cmd: argument 2 is not valid UTF-8 \(character 1\)"):
        read_inputs(["fine", "w\udce9rd"], "cmd")  # bytes of argv Python could not decode


# ------------------------------------------------------------- G2P example


@pytest.mark.tensorflow
def test_g2p_pronounce_reads_one_word_per_line_feed():
    g2p = load_script("examples/g2p_cmudict.py")
    args = g2p.parse_args(["pronounce", "--run-dir", "unused"])
    bad = io.TextIOWrapper(io.BytesIO(b"keras\nw\xe9rd\n"), encoding="latin-1")
    with pytest.raises(
        SystemExit, match=r"^pronounce: line 2 of standard input is not valid UTF-8"
    ):
        g2p.pronounce(args, stream=bad, out=io.StringIO())
