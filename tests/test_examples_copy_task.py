"""The copy-task example: its data, its buckets and a tiny end-to-end run."""

import numpy as np
import pytest
from _scripts import load_script


@pytest.fixture(scope="module")
def copy_task():
    return load_script("examples/copy_task.py")


@pytest.mark.parametrize(
    "low, high, expected",
    [
        (5, 80, [(5, 10)] + [(10 * k + 1, 10 * k + 10) for k in range(1, 8)]),
        (5, 12, [(5, 10), (11, 12)]),
        (10, 25, [(10, 10), (11, 20), (21, 25)]),
    ],
)
def test_length_buckets_cover_every_length_once(copy_task, low, high, expected):
    assert copy_task.length_buckets(low, high) == expected


def test_batches_copy_the_source_between_start_and_end(copy_task):
    rng = np.random.default_rng(0)
    batches = copy_task.make_batches(
        rng, num_batches=6, batch_size=4, min_length=3, max_length=9, symbols=7
    )
    for source, decoder_input, target in batches:
        length = source.shape[1]
        assert 3 <= length <= 9
        assert decoder_input.shape == target.shape == (4, length + 1)
        np.testing.assert_array_equal(decoder_input[:, 0], copy_task.START)
        np.testing.assert_array_equal(decoder_input[:, 1:], source)
        np.testing.assert_array_equal(target[:, :-1], source)
        np.testing.assert_array_equal(target[:, -1], copy_task.END)
        assert source.min() >= copy_task.FIRST_SYMBOL
        assert source.max() < copy_task.FIRST_SYMBOL + 7


def test_quick_run_prints_both_models_and_saves_the_plot(copy_task, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    plot = tmp_path / "img" / "copy_task.png"
    result = copy_task.main(["--quick", "--seed", "3", "--plot", str(plot)])
    out = capsys.readouterr().out

    header = next(line for line in out.splitlines() if line.startswith("| length"))
    assert "no attention" in header and "| attention |" in header
    rows = [line for line in out.splitlines() if line.startswith("| 5-10 |")]
    assert len(rows) == 1
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    assert len(cells) == 3 and all(c.endswith("%") for c in cells[1:])
    assert "| 11-12 |" in out
    longest = next(line for line in out.splitlines() if line.startswith("At length 12 exactly:"))
    for name, counts in result["counts"].items():
        correct, total = counts[12]
        assert f"{name} {100 * correct / total:.2f} %" in longest

    assert set(result["accuracy"]) == {"no attention", "attention"}
    for accuracies in result["accuracy"].values():
        assert len(accuracies) == len(result["buckets"])
        assert all(0.0 <= a <= 1.0 for a in accuracies)

    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert plot.stat().st_size > 10_000


def test_quick_run_exports_the_attention_model_to_builtin_tflite(copy_task, tmp_path, capsys):
    from keras_attention import export

    path = tmp_path / "copy.tflite"
    copy_task.main(["--quick", "--models", "attention", "--export", str(path)])
    out = capsys.readouterr().out
    assert path.exists() and path.with_suffix(".json").exists()
    assert export.non_builtin_operators(path) == {}
    assert "WHILE" in export.tflite_operators(path)  # the greedy loop is inside
    lines = {
        line.split(" ", 1)[0]: line.split(" ", 1)[1].strip()
        for line in out.splitlines()
        if line.startswith(("TFLite ", "Keras "))
    }
    assert lines["TFLite"] == lines["Keras"]


def test_quick_length_run_evaluates_past_the_trained_lengths(copy_task, tmp_path, capsys):
    # The length lesson: trained on 5..12, evaluated on 5..16 with the two
    # attentions that carry an alignment (the quick run above has the others).
    plot = tmp_path / "length.png"
    result = copy_task.main(
        [
            "--quick",
            "--models",
            "monotonic,location-sensitive",
            "--eval-max-length",
            "16",
            "--plot",
            str(plot),
        ]
    )
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.startswith("| length"))
    # In MODELS' order, whatever the order asked for.
    assert header == "| length | location-sensitive | monotonic | monotonic, soft |"
    assert result["buckets"] == [(5, 10), (11, 16)]
    assert sorted(result["counts"]["monotonic"]) == list(range(5, 17))
    for length in (12, 16):
        line = next(x for x in out.splitlines() if x.startswith(f"At length {length} exactly:"))
        for name, counts in result["counts"].items():
            correct, total = counts[length]
            assert f"{name} {100 * correct / total:.2f} %" in line
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_monotonic_model_decodes_with_hard_decisions_and_soft(copy_task):
    model = copy_task.CopyModel("monotonic", vocab_size=10, embedding_dim=8, units=16)
    assert model.attention.mode == "parallel"  # trained on the expected alignment
    assert model.decodings() == [("monotonic", "hard"), ("monotonic, soft", "parallel")]
    before = model.generator
    model.for_inference("hard")
    assert model.attention.mode == "hard" and model.generator is not before
    content = copy_task.CopyModel("attention", 10, 8, 16).attention
    assert not getattr(content, "stateful_attention", False)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--max-length", "40", "--eval-max-length", "30"], "--eval-max-length"),
        (["--min-length", "50", "--max-length", "40"], "--min-length"),
    ],
)
def test_inconsistent_lengths_are_refused(copy_task, argv, message, capsys):
    with pytest.raises(SystemExit):
        copy_task.parse_args(argv)
    assert message in capsys.readouterr().err
