"""`LineReader`: the lines of a stream, one per line feed, read as they come.

The commands that read text line by line (`python -m keras_attention.translation
translate` from standard input, the G2P example's `pronounce`) read it here, so
that they agree on what a line is: the bytes up to a line feed (b"\\n"), as
`wc -l` counts them; a last line without one is a line too. Nothing else
breaks a line. `str.splitlines` and Python's universal newlines would also
break it at a lone carriage return, a form feed, U+2028 and others, and every
later output would then sit beside the wrong input.

A carriage return right before the line feed (a CRLF file) is dropped with
it; one anywhere else stays in the text (the translator's tokenizer reads it
as white space). A byte-order mark at the start of the first line is dropped.
"""

import io
import select
import sys

# A longer line is refused, not read whole: the memory of a reader is bounded.
MAX_LINE_BYTES = 1 << 20
_CHUNK = 1 << 16


class LineReader:
    """Iterates over `(number, text)`, one per line of `stream`, 1-based.

    Args:
        stream: a binary stream (`sys.stdin.buffer`, an open file), or a text
            stream: its bytes (`.buffer`) are read when it has them, else
            its text is encoded as UTF-8.
        name: what the errors call the stream ("standard input").
        max_line_bytes: int, the longest line accepted, in bytes.

    It holds at most one chunk (64 KiB) and one line at a time; a line is
    decoded when it is read.

    Raises (while iterating):
        ValueError: a line is not valid UTF-8 (the message names the line and
            the byte) or is longer than `max_line_bytes`.
    """

    def __init__(self, stream, name="standard input", max_line_bytes=MAX_LINE_BYTES):
        self.stream = getattr(stream, "buffer", stream)
        self.name = name
        self.max_line_bytes = int(max_line_bytes)
        self.number = 0  # lines read so far
        self._buffer = bytearray()
        self._eof = False

    def where(self, number):
        """The name of line `number`: "line 3 of standard input"."""
        return f"line {number} of {self.name}"

    def __iter__(self):
        return self

    def __next__(self):
        while True:
            end = self._buffer.find(b"\n")
            if end > self.max_line_bytes or (end < 0 and len(self._buffer) > self.max_line_bytes):
                self._too_long()
            if end >= 0:
                raw = bytes(self._buffer[:end])
                del self._buffer[: end + 1]
                break
            if self._eof:
                if not self._buffer:
                    raise StopIteration
                raw = bytes(self._buffer)
                self._buffer.clear()
                break
            self._fill()
        self.number += 1
        return self.number, self._decode(raw)

    def ready(self):
        """Whether the next line (or the end) can be read without waiting for
        the writer: a line is buffered, or the stream has bytes ready. A
        stream that cannot say (no file descriptor) counts as ready."""
        if self._eof or b"\n" in self._buffer:
            return True
        try:
            readable, _, _ = select.select([self.stream.fileno()], [], [], 0)
        except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
            return True
        return bool(readable)

    def _fill(self):
        read = getattr(self.stream, "read1", None) or self.stream.read
        chunk = read(_CHUNK)
        if isinstance(chunk, str):
            chunk = chunk.encode("utf-8", "surrogatepass")
        if not chunk:
            self._eof = True
        self._buffer += chunk

    def _too_long(self):
        raise ValueError(
            f"{self.where(self.number + 1)} is longer than {self.max_line_bytes} bytes; "
            "split it into shorter lines"
        )

    def _decode(self, raw):
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise ValueError(
                f"{self.where(self.number)} is not valid UTF-8 (byte 0x{raw[error.start]:02x} "
                f"at byte {error.start}); convert the file to UTF-8, e.g. with iconv"
            ) from None
        return text.removeprefix("\ufeff") if self.number == 1 else text


def read_inputs(arguments, command, reader=None):
    """`(label, text)` pairs of a command's inputs: its arguments, or else one
    per line of standard input ("argument 2", "line 3 of standard input").

    Standard input is read with `LineReader` (`reader`, or one over
    `sys.stdin`), lazily: the pairs come as the lines are read, blank lines
    included, so that the output can have one line per input line.

    Args:
        arguments: the command's positional texts; empty or None: read lines.
        command: the command's name, first in the one-line errors.
        reader: a `LineReader` to read instead of standard input.

    Raises:
        SystemExit: `"{command}: {label} is not valid UTF-8 ..."` for an
            argument or a line that is not valid UTF-8, or a line longer than
            the reader takes; raised while iterating for standard input.
    """
    if arguments:
        inputs = [(f"argument {i}", text) for i, text in enumerate(arguments, 1)]
        for label, text in inputs:
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as error:  # undecodable bytes in argv
                raise SystemExit(
                    f"{command}: {label} is not valid UTF-8 (character {error.start})"
                ) from None
        return inputs
    return _lines(LineReader(sys.stdin) if reader is None else reader, command)


def _lines(reader, command):
    try:
        for number, text in reader:
            yield reader.where(number), text
    except ValueError as error:
        raise SystemExit(f"{command}: {error}") from None
