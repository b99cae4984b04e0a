"""The helpers a command-line trainer of one's own takes from the package:
`keras_attention.arguments.cli_types`, `keras_attention.training.set_intra_op_threads`,
`keras_attention.training.length_batches`,
`keras_attention.generation.decode_batches`, `keras_attention.scoring.edit_distance`
and `keras_attention.scoring.plots`.

Fast: no model is trained. The tests that need TensorFlow are marked so.
"""

import argparse
import subprocess
import sys

import numpy as np
import pytest

from keras_attention.arguments import cli_types
from keras_attention.generation import decode_batches
from keras_attention.scoring.edit_distance import edit_distance
from keras_attention.training import length_bucketed_batches
from keras_attention.training import length_bucketed_dataset
from keras_attention.training import set_intra_op_threads

# ------------------------------------------------------------ cli_types


@pytest.mark.parametrize(
    "kind, text, value",
    [
        (cli_types.positive_int, "3", 3),
        (cli_types.non_negative_int, "0", 0),
        (cli_types.positive_float, "2.5e-3", 2.5e-3),
        (cli_types.unit_interval, "0", 0.0),
        (cli_types.unit_interval, "0.2", 0.2),
    ],
)
def test_cli_types_read_their_values(kind, text, value):
    assert kind(text) == value


@pytest.mark.parametrize(
    "kind, text, expected",
    [
        (cli_types.positive_int, "0", "a positive integer"),
        (cli_types.positive_int, "2.5", "a positive integer"),
        (cli_types.positive_int, "x", "a positive integer"),
        (cli_types.non_negative_int, "-1", "0 or more"),
        (cli_types.positive_float, "0", "a positive number"),
        (cli_types.positive_float, "inf", "a positive number"),
        (cli_types.positive_float, "nan", "a positive number"),
        (cli_types.unit_interval, "1", "a number in [0, 1)"),
        (cli_types.unit_interval, "-0.1", "a number in [0, 1)"),
        (cli_types.unit_interval, "nan", "a number in [0, 1)"),
    ],
)
def test_cli_types_refuse_in_one_line_naming_the_flag(kind, text, expected, capsys):
    parser = argparse.ArgumentParser(prog="trainer")
    parser.add_argument("--size", type=kind)
    with pytest.raises(SystemExit) as exit_info:
        parser.parse_args(["--size", text])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == f"trainer: error: argument --size: expected {expected}, got {text}"


# ------------------------------------------------------ intra-op threads


@pytest.mark.tensorflow
def test_intra_op_threads_are_set_in_a_fresh_process(tmp_path):
    # A fresh interpreter, as a trainer runs from the command line: the
    # setting takes effect before TensorFlow starts; 0 leaves its default.
    script = tmp_path / "threads.py"
    script.write_text(
        "import tensorflow as tf\n"
        "from keras_attention.training import set_intra_op_threads\n"
        "set_intra_op_threads(0)\n"
        "print(tf.config.threading.get_intra_op_parallelism_threads())\n"
        "set_intra_op_threads(1)\n"
        "tf.constant(1.0) + 1.0\n"
        "print(tf.config.threading.get_intra_op_parallelism_threads())\n"
    )
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["0", "1"]


@pytest.mark.tensorflow
def test_intra_op_threads_after_tensorflow_started_is_a_note(capsys):
    import tensorflow as tf

    tf.constant(1.0) + 1.0  # TensorFlow has started in this process
    current = tf.config.threading.get_intra_op_parallelism_threads()
    set_intra_op_threads(current + 3)
    assert tf.config.threading.get_intra_op_parallelism_threads() == current
    assert f"Note: {current + 3} intra-op threads not applied" in capsys.readouterr().err


def test_negative_intra_op_threads_are_refused():
    with pytest.raises(ValueError, match=r"argument `threads`.*Received: threads=-1"):
        set_intra_op_threads(-1)


# ------------------------------------------------------ length batches


def reference_batches(pairs, batch_size, rng, start_id, end_id):
    """The G2P example's `make_batches` as its figures were recorded (before
    it moved into the package), written out: equal arrays mean equal runs."""
    noise = rng.uniform(0, 1.5, len(pairs))
    keys = [len(s) + n for (s, _), n in zip(pairs, noise, strict=True)]
    order = np.argsort(keys, kind="stable")
    batches = []
    for begin in range(0, len(order), batch_size):
        chunk = [pairs[i] for i in order[begin : begin + batch_size]]
        width = max(len(s) for s, _ in chunk)
        length = max(len(t) for _, t in chunk) + 1
        source = np.zeros((len(chunk), width), "int32")
        target = np.zeros((len(chunk), length), "int32")
        decoder_input = np.zeros((len(chunk), length), "int32")
        for row, (s, t) in enumerate(chunk):
            source[row, : len(s)] = s
            target[row, : len(t) + 1] = t + [end_id]
            decoder_input[row, : len(t) + 1] = [start_id] + t
        batches.append(((source, decoder_input), target))
    rng.shuffle(batches)
    return batches


def random_pairs(count, seed=0):
    rng = np.random.default_rng(seed)
    return [
        (
            rng.integers(1, 30, rng.integers(1, 15)).tolist(),
            rng.integers(3, 40, rng.integers(1, 12)).tolist(),
        )
        for _ in range(count)
    ]


def assert_same_batches(actual, expected):
    assert len(actual) == len(expected)
    for ((s, d), t), ((rs, rd), rt) in zip(actual, expected, strict=True):
        for a, b in ((s, rs), (d, rd), (t, rt)):
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_array_equal(a, b)


def test_length_batches_equal_the_recorded_recipe_epoch_after_epoch():
    pairs = random_pairs(203)
    rng, reference_rng = np.random.default_rng(7), np.random.default_rng(7)
    for _ in range(3):  # one generator across epochs: each epoch differs
        batches = length_bucketed_batches(pairs, 16, rng, start_id=1, end_id=2)
        assert_same_batches(batches, reference_batches(pairs, 16, reference_rng, 1, 2))
    assert sum(len(t) for _, t in batches) == 203


def test_length_batches_hold_sources_of_similar_length():
    pairs = random_pairs(400)
    batches = length_bucketed_batches(pairs, 20, np.random.default_rng(0), 1, 2)
    widths = [s.shape[1] - int((s > 0).sum(1).min()) for (s, _), _ in batches]
    assert max(widths) <= 2  # the 1.5 of noise moves a source at most one length


@pytest.mark.tensorflow
def test_length_dataset_gives_the_batches_of_its_seed_every_epoch():
    pairs = random_pairs(50)
    dataset = length_bucketed_dataset(pairs, 8, seed=3, start_id=1, end_id=2)
    assert int(dataset.cardinality()) == 7
    reference_rng = np.random.default_rng(3)
    for _ in range(2):
        batches = [((s.numpy(), d.numpy()), t.numpy()) for (s, d), t in dataset]
        assert_same_batches(batches, reference_batches(pairs, 8, reference_rng, 1, 2))


# ------------------------------------------------------ decode_batches


class RecordingGenerator:
    """Decodes a source as its ids reversed (an independent rule); records batches."""

    def __init__(self):
        self.batches = []

    def _decode(self, source, tag):
        self.batches.append((tag, source.copy()))
        tokens = np.zeros((len(source), source.shape[1] + 1), "int32")
        for row, ids in enumerate(source):
            real = ids[ids > 0][::-1]
            tokens[row, : len(real)] = real + tag
        return {"tokens": tokens}

    def greedy(self, source):
        return self._decode(source, 0)

    def beam(self, source, beam_width):
        return self._decode(source, 100 * beam_width)


@pytest.mark.parametrize("beam_width", [None, 3])
def test_decode_batches_returns_each_sources_tokens_in_the_order_given(beam_width):
    rng = np.random.default_rng(0)
    sources = [rng.integers(1, 9, rng.integers(1, 7)).tolist() for _ in range(23)]
    sources += [sources[4], sources[0]]  # duplicates: decoded once
    generator = RecordingGenerator()
    rows = decode_batches(generator, sources, batch_size=4, beam_width=beam_width)
    tag = 0 if beam_width is None else 300
    for source, row in zip(sources, rows, strict=True):
        np.testing.assert_array_equal(row[: len(source)], np.array(source[::-1]) + tag)
    decoded = [tuple(ids[ids > 0]) for _, batch in generator.batches for ids in batch]
    assert len(decoded) == len(set(decoded)) == len({tuple(s) for s in sources})
    lengths = [len(d) for d in decoded]
    assert lengths == sorted(lengths)  # batches of similar length
    assert all(batch.shape[0] <= 4 and batch.dtype == np.int32 for _, batch in generator.batches)


def test_decode_batches_refuses_a_batch_size_below_one():
    with pytest.raises(ValueError, match=r"argument `batch_size`.*batch_size=0"):
        decode_batches(RecordingGenerator(), [[1]], batch_size=0)


# ------------------------------------------------------ edit distance


@pytest.mark.parametrize(
    "a, b, distance",
    [
        ("", "", 0),
        ("ABC", "", 3),
        ("", "AB", 2),
        ("KITTEN", "SITTING", 3),
        (("K", "AE", "T"), ("K", "AE", "T", "S"), 1),
        (("R", "IY", "D"), ("R", "EH", "D"), 1),
    ],
)
def test_edit_distance_counts_insertions_deletions_substitutions(a, b, distance):
    assert edit_distance(a, b) == distance
    assert edit_distance(b, a) == distance


# ------------------------------------------------------------- plots


def test_alignment_plot_writes_a_png_of_each_panel(tmp_path):
    pytest.importorskip("matplotlib")
    from keras_attention.scoring.plots import plot_alignments

    weights = np.array([[0.9, 0.1], [0.2, 0.8], [0.5, 0.5]])
    path = tmp_path / "figures" / "alignments.png"
    panels = [(weights, ["A", "B"], ["x", "y", "</s>"], "AB"), (weights[:1], ["A", "B"], ["x"], "")]
    plot_alignments(str(path), panels, title="two words")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_alignment_plot_refuses_weights_that_do_not_match_their_labels(tmp_path):
    from keras_attention.scoring.plots import plot_alignments

    with pytest.raises(ValueError, match=r"panel 0 has weights of shape \(2, 2\).*\(3, 2\)"):
        plot_alignments(str(tmp_path / "a.png"), [(np.eye(2), ["A", "B"], ["x", "y", "z"], "")])
    assert not (tmp_path / "a.png").exists()


def test_line_plot_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    from keras_attention.scoring.plots import plot_lines

    path = tmp_path / "lines.png"
    plot_lines(str(path), {"greedy": (["1-4", "5-6"], [10.0, 20.0])}, "letters", "WER (%)")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_comma_separated_keeps_the_order_and_refuses_unknown_items(capsys):
    from keras_attention.arguments.cli_types import comma_separated

    parser = argparse.ArgumentParser(prog="export")
    parser.add_argument("--variants", type=comma_separated(("float32", "float16", "int8")))
    assert parser.parse_args(["--variants", "int8,,float32"]).variants == ["int8", "float32"]
    assert parser.parse_args(["--variants", ""]).variants == []
    with pytest.raises(SystemExit):
        parser.parse_args(["--variants", "float32,int4,fp8"])
    assert "unknown int4, fp8; choose among float32, float16, int8" in capsys.readouterr().err
