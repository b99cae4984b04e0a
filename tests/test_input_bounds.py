"""Input bounds: every entry point bounds its source, and empty or bad input gets
a clear answer (docs/reliability.md, "Inputs and bounds").

- A source longer than `max_source_length` (512 tokens) is refused by
  `Seq2SeqGenerator`, `python -m keras_attention.translation translate` and
  `examples/tflite_translate.py` (naming the input line and the limit), and
  truncated, visibly, by the SavedModel (`truncated`) and the TFLite model.
- An empty or blank input gives an empty translation on every path.
- Standard input that is not UTF-8 is an error naming the line; blank input
  lines keep their place in the output.
- Token ids outside [0, vocabulary) are refused by the generator and the app.

One tiny run (random weights, letter vocabularies) is exported once for the
module: the TFLite model is converted; the SavedModel's signatures are the
functions of `ServingTranslator`, called here without the save and load (about
10 s) that tests/test_export.py checks.
"""

import io
import json
import os
import select
import string
import sys
import threading
import time
import tracemalloc

import keras
import numpy as np
import pytest
import tensorflow as tf
from _scripts import load_script
from ai_edge_litert.interpreter import Interpreter

from keras_attention.generation.seq2seq_generator import DEFAULT_MAX_OUTPUT_LENGTH
from keras_attention.generation.seq2seq_generator import DEFAULT_MAX_SOURCE_LENGTH
from keras_attention.training.run_folder import CONFIG_FILE
from keras_attention.translation import SubwordTokenizer
from keras_attention.translation import cli
from keras_attention.translation import commands
from keras_attention.translation import evaluation
from keras_attention.translation import export
from keras_attention.translation.lite import export_translator_tflite
from keras_attention.translation.model import build_translator
from keras_attention.translation.serving import ServingTranslator
from keras_attention.translation.tokenizer import RESERVED_TOKENS
from keras_attention.translation.translator import MODEL_FILE
from keras_attention.translation.translator import SOURCE_VOCAB
from keras_attention.translation.translator import TARGET_VOCAB
from keras_attention.translation.translator import load_run

LIMIT = DEFAULT_MAX_SOURCE_LENGTH
# Every letter and "." is a token, so any lowercase word is; "a": one token each.
VOCAB = [
    *RESERVED_TOKENS,
    ".",
    *string.ascii_lowercase,
    *("##" + c for c in string.ascii_lowercase),
]
LONG = " ".join(["a"] * (LIMIT + 8))
# The package's `translate` command and the TFLite app example.
COMMANDS = ("translate", "tflite_translate")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    keras.utils.set_random_seed(0)
    source = SubwordTokenizer(VOCAB, lower_case=True)
    target = SubwordTokenizer(VOCAB, lower_case=True)
    model = build_translator(
        source.vocab_size, target.vocab_size, embedding_dim=8, units=16, dropout=0.0, seed=0
    )
    run = tmp_path_factory.mktemp("run")
    model.save(run / MODEL_FILE)
    source.save(run / SOURCE_VOCAB)
    target.save(run / TARGET_VOCAB)
    (run / CONFIG_FILE).write_text(json.dumps({"attention": "bahdanau"}))
    return run


@pytest.fixture(scope="module")
def translator(run_dir):
    return load_run(run_dir)[0]


@pytest.fixture(scope="module")
def tflite_dir(tmp_path_factory, translator):
    folder = tmp_path_factory.mktemp("tflite")
    export_translator_tflite(translator, folder, variants=("float32",))
    return folder


@pytest.fixture(scope="module")
def serving(translator):
    """The SavedModel's signatures: `serving_default` is `greedy`, `beam` is `beam`."""
    module = ServingTranslator(translator)
    # The methods hold a weak reference to their module: keep it alive.
    return {"serving_default": module.greedy, "beam": module.beam, "module": module}


@pytest.fixture(scope="module")
def app(tflite_dir):
    """examples/tflite_translate.py's LiteTranslator on the float32 model."""
    example = load_script("examples/tflite_translate.py")
    return example.LiteTranslator(tflite_dir, "float32")


@pytest.fixture
def run_command(monkeypatch, tflite_dir, translator, capsys):
    """`run_command(name, arguments, stdin=b"")` → the printed lines, running in
    this process, on the module's run, the package's command line (`translate`)
    or `examples/tflite_translate.py`'s `main`."""
    mains = {
        "translate": cli.main,
        "tflite_translate": load_script("examples/tflite_translate.py").main,
    }
    # The CLI loads the module's translator instead of reading the run again.
    monkeypatch.setattr(commands, "load_run", lambda _: (translator, {}))

    def run(name, arguments, stdin=b""):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
        if name == "translate":
            argv = ["translate", "--run-dir", "unused", "--method", "greedy", *arguments]
        else:
            argv = ["--variant", "float32", str(tflite_dir), *arguments]
        capsys.readouterr()
        returned = mains[name](argv)
        printed = capsys.readouterr().out
        assert printed.endswith("\n") or not printed
        lines = printed.split("\n")[:-1]
        # `translate` returns the translations of arguments, the number of
        # lines of standard input (it does not keep them).
        assert returned == (len(lines) if name == "translate" and not arguments else lines)
        return lines

    return run


# ------------------------------------------------------ a bounded source


def test_saved_model_truncates_a_long_sentence_and_says_so(serving, translator):
    sentences = ["A man.", LONG]
    assert translator.source_lengths(sentences)[1] > LIMIT
    out = serving["serving_default"](tf.constant(sentences))
    assert out["truncated"].numpy().tolist() == [False, True]
    assert out["source_ids"].shape[1] == LIMIT
    expected = translator.tokenize_source([LONG]).numpy()[0, :LIMIT]
    np.testing.assert_array_equal(out["source_ids"].numpy()[1], expected)
    assert out["tokens"].shape[1] <= DEFAULT_MAX_OUTPUT_LENGTH
    assert out["attention"].shape[2] == LIMIT


def test_tflite_translate_truncates_a_20000_token_source(tflite_dir, translator):
    interpreter = Interpreter(model_path=str(tflite_dir / export.tflite_filename("float32")))
    translate = interpreter.get_signature_runner("translate")
    vocabulary = translator.source_tokenizer.vocab_size
    ids = np.random.default_rng(0).integers(4, vocabulary, (1, 20_000)).astype(np.int32)
    out = translate(source_ids=ids)
    length, columns = out["attention"].shape[1:]
    assert columns == LIMIT  # only the first LIMIT positions are read
    assert length <= DEFAULT_MAX_OUTPUT_LENGTH
    assert 0 < out["lengths"][0] <= length


@pytest.mark.parametrize("command", COMMANDS)
def test_too_long_sentence_is_refused_naming_the_line_and_the_limit(run_command, command):
    with pytest.raises(SystemExit) as info:
        run_command(command, [], stdin=f"A man.\n{LONG}\n".encode())
    assert (
        f"line 2 of standard input has {LIMIT + 8} source tokens, more than the "
        f"model's max_source_length={LIMIT}"
    ) in str(info.value)


def test_translator_json_states_the_bounds_for_the_app(tflite_dir, translator):
    config = json.loads((tflite_dir / export.TFLITE_CONFIG_FILE).read_text())
    assert config["max_source_length"] == LIMIT
    assert config["max_output_length"] == DEFAULT_MAX_OUTPUT_LENGTH
    assert config["source"]["vocab_size"] == translator.source_tokenizer.vocab_size
    assert "does not check" in config["token_ids"]


# ------------------------------------------------------------ empty input


@pytest.mark.parametrize("batch", [[], [""], [" \t\u00a0"], ["A man.", ""]])
@pytest.mark.parametrize("signature", ["serving_default", "beam"])
def test_saved_model_gives_empty_translations_for_empty_and_blank_sentences(
    serving, signature, batch
):
    out = serving[signature](tf.constant(batch, dtype=tf.string))
    assert out["translation"].shape == (len(batch),)
    for i, sentence in enumerate(batch):
        if not sentence.strip():
            assert out["translation"].numpy()[i] == b""
            assert out["lengths"].numpy()[i] == 0


def test_tflite_translate_gives_an_empty_output_for_an_empty_source(tflite_dir, app):
    interpreter = Interpreter(model_path=str(tflite_dir / export.tflite_filename("float32")))
    out = interpreter.get_signature_runner("translate")(source_ids=np.zeros((1, 0), np.int32))
    assert out["lengths"].tolist() == [0]
    assert out["log_probs"].tolist() == [0.0]
    assert app.translate("")[0] == app.translate(" \t")[0] == ""


@pytest.mark.parametrize("search", ["greedy", "beam"])
@pytest.mark.parametrize("shape", [(1, 0), (2, 3)], ids=["empty", "all_padding"])
def test_generator_gives_an_empty_output_for_an_empty_or_padding_source(translator, search, shape):
    result = getattr(translator.generator, search)(np.zeros(shape, np.int32))
    assert result["lengths"].tolist() == [0] * shape[0]
    assert result["log_probs"].tolist() == [0.0] * shape[0]
    assert not result["tokens"].any()


@pytest.mark.parametrize("command", COMMANDS)
def test_empty_sentence_argument_gives_an_empty_line(run_command, command):
    assert run_command(command, ["", "  "]) == ["", ""]


# ------------------------------------------------------ standard input


@pytest.mark.parametrize("command", COMMANDS)
def test_invalid_utf8_on_stdin_is_an_error_naming_the_line(run_command, command):
    with pytest.raises(SystemExit) as info:
        run_command(command, [], stdin=b"A man.\nTwo \xff dogs.\n")
    assert "line 2 of standard input is not valid UTF-8 (byte 0xff at byte 4)" in str(info.value)


@pytest.mark.parametrize("command", COMMANDS)
def test_blank_input_lines_keep_one_output_line_per_input_line(run_command, command):
    outputs = run_command(command, [], stdin=b"A man.\n\n  \nTwo dogs.\n")
    assert len(outputs) == 4
    assert outputs[1] == outputs[2] == ""
    assert outputs[0] and outputs[3]


@pytest.mark.parametrize("command", COMMANDS)
def test_lone_carriage_return_keeps_one_output_line_per_input_line(run_command, command):
    # `printf 'a man\rwalks .\nsecond line\n' | ... translate`: two lines, as
    # `wc -l` counts them; the \r inside a line reads as a space, and a CRLF
    # line ending as a line ending.
    outputs = run_command(command, [], stdin=b"a man\rwalks .\nsecond line\r\nlast")
    expected = run_command(command, ["a man walks .", "second line", "last"])
    assert outputs == expected


def _one_line_per_read(lines, printed):
    """A binary standard input that hands out one line per read and records,
    for each line read, how many output lines were printed by then."""

    class Stream(io.RawIOBase):
        def readable(self):
            return True

        def readinto(self, buffer):
            if not lines:
                return 0
            printed.append(sys.stdout.getvalue().count("\n"))
            line = lines.pop(0)
            buffer[: len(line)] = line
            return len(line)

    return io.BufferedReader(Stream(), buffer_size=16)


def test_translate_prints_each_batch_before_reading_the_next_lines(monkeypatch, translator):
    monkeypatch.setattr(commands, "load_run", lambda _: (translator, {}))
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    printed = []  # output lines printed when line i + 1 was read
    stdin = _one_line_per_read([f"a b {i}\n".encode() for i in range(11)], printed)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(stdin))
    argv = ["translate", "--run-dir", "unused", "--method", "greedy", "--batch-size", "4"]
    assert cli.main(argv) == 11
    assert sys.stdout.getvalue().count("\n") == 11
    # Lines 5 to 8 are read after the first four are printed, 9 to 11 after 8.
    assert printed == [0] * 4 + [4] * 4 + [8] * 3


def _read_lines_within(fd, count, seconds=120):
    """Up to `count` lines of the pipe `fd`, read for at most `seconds`
    (select and os.read: no thread left blocked in a read when it fails)."""
    data = b""
    deadline = time.monotonic() + seconds
    while data.count(b"\n") < count:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            break
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        data += chunk
    return data.decode().splitlines(keepends=True)


def test_translate_answers_a_pipe_before_it_is_closed(monkeypatch, translator):
    # A writer that waits for the translations of what it wrote gets them:
    # a batch is sent when no next line is ready, not only when it is full.
    monkeypatch.setattr(commands, "load_run", lambda _: (translator, {}))
    sentences = ["a man .", "two dogs .", "a dog ."]
    decoded = evaluation.decode_corpus(translator, sentences[:2], progress=False)
    expected = [t + "\n" for t in evaluation.detokenize_output(decoded["text"])]
    read_end, write_end = os.pipe()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(open(read_end, "rb")))
    out_read, out_write = os.pipe()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(open(out_write, "wb")))
    argv = ["translate", "--run-dir", "unused", "--method", "greedy"]
    worker = threading.Thread(target=cli.main, args=(argv,), daemon=True)
    worker.start()
    try:
        with open(write_end, "wb", buffering=0) as writer:
            writer.write(f"{sentences[0]}\n{sentences[1]}\n".encode())
            answered = _read_lines_within(out_read, 2)
            assert answered == expected, "no output while standard input stays open"
            writer.write(f"{sentences[2]}\n".encode())
        assert len(_read_lines_within(out_read, 1)) == 1  # the last, after the end
        worker.join(timeout=120)
        assert not worker.is_alive()
    finally:
        os.close(out_read)


def test_translate_memory_does_not_grow_with_the_input(monkeypatch, translator):
    monkeypatch.setattr(commands, "load_run", lambda _: (translator, {}))
    # 16 KB lines of two tokens: what a command that keeps its input (or
    # its output) would hold shows.
    line = b"a ." + b" " * (1 << 14) + b"\n"
    argv = ["translate", "--run-dir", "unused", "--method", "greedy", "--batch-size", "16"]
    peaks = []
    for lines in (16, 64, 256):  # the first call warms up (imports, caches)
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(line * lines)))
        monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(io.BytesIO()))
        tracemalloc.start()
        assert cli.main(argv) == lines
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    # 192 more lines are 3 MB more input; a bounded command holds none of it.
    assert peaks[2] - peaks[1] < 0.25 * 192 * len(line), peaks


# -------------------------------------------------------------- token ids


@pytest.mark.parametrize("bad", ["negative", "vocabulary"])
def test_generator_refuses_ids_outside_the_source_vocabulary(translator, bad):
    vocabulary = translator.source_tokenizer.vocab_size
    value = -1 if bad == "negative" else vocabulary
    source = np.array([[5, 6, 7], [5, value, 0]], np.int32)
    message = rf"`source`: {value} at \[1, 1\]. Ids must be in \[0, {vocabulary}\)"
    for search in ("greedy", "beam"):
        with pytest.raises(ValueError, match=message):
            getattr(translator.generator, search)(source)


@pytest.mark.parametrize("loop", ["model", "app"])
def test_tflite_app_refuses_ids_outside_the_vocabulary_and_too_many(app, loop):
    run = app.translate_ids if loop == "model" else app.translate_ids_app_loop
    vocabulary = len(app.source.vocab)
    for value in (-1, vocabulary):
        with pytest.raises(ValueError, match=rf"{value} at position 1. .*\[0, {vocabulary}\)"):
            run([5, value])
    with pytest.raises(ValueError, match=f"more than max_source_length={LIMIT}"):
        run([5] * (LIMIT + 1))


@pytest.mark.parametrize("search", ["greedy_graph", "beam_graph"])
@pytest.mark.parametrize("bad", ["negative", "vocabulary"])
def test_translator_in_a_traced_function_refuses_int32_ids_outside_the_vocabulary(
    translator, search, bad
):
    vocabulary = translator.source_tokenizer.vocab_size
    value = -3 if bad == "negative" else vocabulary
    traced = tf.function(lambda ids: getattr(translator, search)(ids)["tokens"])
    traced(tf.constant([[5, 6]], tf.int32))  # within the vocabulary: fine
    with pytest.raises(
        tf.errors.InvalidArgumentError,
        match=rf"Invalid token id in `source_ids`: .*\[0, {vocabulary}\)",
    ):
        traced(tf.constant([[5, value]], tf.int32))


@pytest.mark.parametrize("signature", ["serving_default", "beam"])
def test_saved_model_refuses_sentences_that_are_not_utf8(serving, signature):
    # As `translate` refuses such a line, instead of reading it as unknown pieces.
    batch = tf.constant([b"A man.", b"Two \xff dogs.", b"\xc3"])
    with pytest.raises(
        tf.errors.InvalidArgumentError, match="`sentences`: not valid UTF-8"
    ) as info:
        serving[signature](batch)
    assert "[1 2]" in str(info.value)  # the indices of the two
    # U+FFFD itself is valid UTF-8.
    out = serving[signature](tf.constant(["A man \ufffd.", "é"]))
    assert out["translation"].shape == (2,)
