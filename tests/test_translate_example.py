"""A tiny end-to-end run of the translator's command line (`python -m
keras_attention.translation`): train, evaluate, translate, explain, resume after
a kill, average; and of examples/translate_en_fr.py, top to bottom and as the
old command lines. Trains a few hundred pairs for one epoch."""

import csv
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import keras
import numpy as np
import pytest
from _data_paths import require_multi30k
from _scripts import load_script

from keras_attention import SmoothedSparseCrossentropy
from keras_attention.training import averaging
from keras_attention.translation import SubwordTokenizer
from keras_attention.translation import cli
from keras_attention.translation import evaluation
from keras_attention.translation import load_multi30k
from keras_attention.translation import make_dataset
from keras_attention.translation import runs as run_folders
from keras_attention.translation.runs import RUN_FILES
from keras_attention.translation.tied_embedding import TiedEmbedding
from keras_attention.translation.translator import load_run

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = "examples/translate_en_fr.py"
TINY = ["--preset", "tiny", "--max-train-examples", "300", "--epochs", "1"]
# The presets smooth the targets but do not average the weights; the tiny
# runs turn both on so that their code paths (checkpoint, resume) are tested.
RECIPE = ["--label-smoothing", "0.1", "--ema-momentum", "0.9"]
# The attention run has its own output layer and the baseline ties it to the
# target embedding (the presets' choice), so that both model shapes go
# through every command; the resumed run ties it too.
TIED = {"bahdanau": ["--no-tie-embeddings"], "none": ["--tie-embeddings"]}
# The attention run's encoder has 48 units per direction (memory 96, decoder
# 64), so every command also runs with a memory wider than the decoder; the
# baseline keeps the preset's units / 2.
ENCODER_UNITS = {"bahdanau": ["--encoder-units", "48"], "none": []}
# The attention run also saves its epochs' weights, for `average`.
KEEP = {"bahdanau": ["--keep-epochs"], "none": []}
# The presets' decoder is the conditional one, started from the mean of the
# memory (tested by the resumed run; the baseline also starts from the mean);
# the attention run here has the plain Bahdanau decoder, started from the
# encoder's final states.
DECODER = {"bahdanau": ["--no-conditional", "--decoder-init", "final"], "none": []}


@pytest.fixture(scope="module")
def data_dir():
    return require_multi30k()


@pytest.fixture(scope="module")
def runs(tmp_path_factory, data_dir):
    root = tmp_path_factory.mktemp("runs")
    for attention in ("bahdanau", "none"):
        cli.main(
            ["--data-dir", data_dir, "train", "--attention", attention]
            + TINY
            + RECIPE
            + TIED[attention]
            + ENCODER_UNITS[attention]
            + KEEP[attention]
            + DECODER[attention]
            + ["--run-dir", str(root / attention)]
        )
    return root


def test_train_writes_a_complete_run_folder(runs):
    for attention in ("bahdanau", "none"):
        folder = runs / attention
        assert all((folder / name).exists() for name in RUN_FILES)
        config = json.loads((folder / "config.json").read_text())
        assert config["attention"] == attention
        assert config["tie_embeddings"] is (attention == "none")
        # Off by request for the attention run; the baseline has no attention decoder.
        assert config["conditional"] is False
        model = keras.saving.load_model(folder / "model.keras", compile=False)
        tied = isinstance(model.get_layer("target_embedding"), TiedEmbedding)
        assert tied is (attention == "none")
        if attention == "bahdanau":
            assert not model.get_layer("decoder").conditional
        mean_init = attention == "none"  # the preset's start; "final" asked for the other
        assert config["decoder_init"] == ("mean" if mean_init else "final")
        assert ("encoder_mean" in {layer.name for layer in model.layers}) is mean_init
        per_direction = 48 if attention == "bahdanau" else 32  # tiny: units 64
        assert config["encoder_units"] == (48 if attention == "bahdanau" else None)
        memory = model.get_layer("encoder").output[0]
        assert tuple(memory.shape) == (None, None, 2 * per_direction)
        with open(folder / "history.csv") as f:
            rows = list(csv.DictReader(f))
        assert [int(r["epoch"]) for r in rows] == [0]
        assert float(rows[0]["loss"]) > 0


def test_checkpoint_holds_the_validated_averaged_weights(runs, data_dir):
    # The tiny runs average the weights (EMA 0.9) and smooth the targets.
    # The saved model must be the one whose validation loss was logged: with
    # the weight swap after the checkpoint, the raw weights would be saved.
    folder = runs / "bahdanau"
    config = json.loads((folder / "config.json").read_text())
    assert config["ema_momentum"] == 0.9 and config["label_smoothing"] == 0.1
    with open(folder / "history.csv") as f:
        logged = float(next(csv.DictReader(f))["val_loss"])
    _, run_config = load_run(folder)
    model = keras.saving.load_model(folder / "model.keras", compile=False)
    model.compile(loss=SmoothedSparseCrossentropy(run_config["label_smoothing"]))
    val = load_multi30k(("val",), data_dir)["val"]
    dataset = make_dataset(
        val.en,
        val.fr,
        SubwordTokenizer.load(folder / "source_vocab"),
        SubwordTokenizer.load(folder / "target_vocab"),
        batch_size=config["batch_size"],
        shuffle=False,
    )
    assert model.evaluate(dataset, verbose=0) == pytest.approx(logged, rel=1e-4)


def test_evaluate_scores_plots_and_heatmaps(runs, data_dir, tmp_path):
    results = cli.main(
        [
            "--data-dir",
            data_dir,
            "evaluate",
            "--run-dir",
            str(runs / "bahdanau"),
            "--baseline-run-dir",
            str(runs / "none"),
            "--splits",
            "test_2016_flickr",
            "--max-sentences",
            "24",
            "--heatmaps",
            "0,5",
            "--out-dir",
            str(tmp_path),
        ]
    )
    for key in ("test_2016_flickr/greedy", "test_2016_flickr/beam"):
        scores = results[key]
        assert 0.0 <= scores["bleu"] <= 100.0
        assert 0.0 <= scores["bleu_lc_tok"] <= 100.0
        assert scores["bleu_signature"].startswith("nrefs:1")
    assert results["test_2016_flickr/beam"]["beam_width"] == 4
    assert results["test_2016_flickr/beam"]["length_penalty"] == 0.6
    assert "beam_width" not in results["test_2016_flickr/greedy"]
    assert "test_2016_flickr/greedy/baseline" in results
    curves = results["test_2016_flickr/bleu_by_length"]
    assert set(curves) == {"bahdanau attention", "no attention"}
    assert sum(n for _, _, n, _ in curves["no attention"]) == 24
    for name in (
        "bleu_by_length.test_2016_flickr.png",
        "attention.test_2016_flickr.0.png",
        "attention.test_2016_flickr.5.png",
        "results.json",
    ):
        assert (tmp_path / name).stat().st_size > 0
    hyps = (tmp_path / "test_2016_flickr.greedy.fr").read_text().splitlines()
    assert len(hyps) == 24


def test_translate_gives_one_line_per_sentence(runs, capsys):
    outputs = cli.main(
        [
            "translate",
            "--run-dir",
            str(runs / "bahdanau"),
            "--method",
            "greedy",
            "A man is riding a bike.",
            "Two dogs play in the snow.",
        ]
    )
    assert len(outputs) == 2
    assert all(isinstance(o, str) for o in outputs)
    printed = capsys.readouterr().out.strip().splitlines()
    assert printed[-2:] == outputs


def test_explain_reports_distribution_change(runs, data_dir):
    rows = cli.main(
        [
            "--data-dir",
            data_dir,
            "explain",
            "--run-dir",
            str(runs / "bahdanau"),
            "--max-sentences",
            "16",
        ]
    )
    assert set(rows) == {"model's attention", "uniform attention", "permute attention"}
    assert rows["model's attention"]["tvd"] == 0.0
    for name in ("uniform attention", "permute attention"):
        assert 0.0 < rows[name]["tvd"] <= 1.0
    sharpness = rows["model's attention"]["sharpness"]
    assert sharpness["steps"] > 0
    for key in ("entropy", "max_weight", "on_last_token"):
        assert 0.0 <= sharpness[key] <= 1.0
    saved = json.loads((runs / "bahdanau" / "explain.json").read_text())
    assert saved["model's attention"]["sharpness"] == sharpness


def test_beam_settings_choose_on_val_and_score_the_choice_on_test(runs, data_dir):
    bench = load_script("benchmarks/beam_settings.py")
    config, rows, best, tests = bench.main(
        [
            "--run",
            str(runs / "bahdanau"),
            "--data-dir",
            data_dir,
            "--widths",
            "2",
            "--penalties",
            "0.6,1.0",
            "--test-splits",
            "test_2016_flickr",
            "--max-sentences",
            "12",
            "--no-write",
        ]
    )
    assert config["attention"] == "bahdanau"
    assert [(r["method"], r["width"], r["penalty"]) for r in rows] == [
        ("greedy", 1, None),
        ("beam", 2, 0.6),
        ("beam", 2, 1.0),
    ]
    assert best is max(rows, key=lambda r: r["bleu_lc_tok"])
    assert list(tests) == ["test_2016_flickr"]
    assert 0.0 <= tests["test_2016_flickr"]["bleu_lc_tok"] <= 100.0
    report = bench.build_report(config, rows, best, tests, "val", 12)
    assert report.count("| yes |") == 1
    assert "| test_2016_flickr |" in report


def test_checkpoint_average_chooses_on_val_and_scores_the_choice_on_test(runs, data_dir):
    assert averaging.saved_epochs(runs / "bahdanau") == [1]
    assert averaging.saved_epochs(runs / "none") == []  # trained without --keep-epochs
    bench = load_script("benchmarks/checkpoint_average.py")
    argv = ["--run", str(runs / "bahdanau"), "--data-dir", data_dir, "--last", "1"]
    argv += ["--test-splits", "test_2016_flickr", "--max-sentences", "12", "--no-write"]
    config, rows, best, tests = bench.main(argv)
    assert config["attention"] == "bahdanau"
    assert [r["epochs"] for r in rows] == [None, [1]]
    assert best is rows[1]
    # One epoch: the run's model (best validation loss, after the EMA swap) and
    # the saved epoch are the same weights, so they translate alike.
    assert rows[0]["val"]["bleu_lc_tok"] == rows[1]["val"]["bleu_lc_tok"]
    assert rows[0]["val"]["chrf"] == rows[1]["val"]["chrf"]
    assert sorted(tests) == sorted(
        (name, "test_2016_flickr", method)
        for name in (bench.REFERENCE, "epoch 1 alone")
        for method in ("greedy", "beam")
    )
    with pytest.raises(ValueError, match="last 2 epochs"):
        bench.main(argv[:5] + ["2"] + argv[6:])


def test_conditional_with_a_luong_decoder_fails_before_reading_data(tmp_path):
    argv = ["--data-dir", str(tmp_path / "nowhere"), "train", "--attention", "luong-general"]
    with pytest.raises(SystemExit, match="--conditional is a Bahdanau decoder"):
        cli.main(argv + ["--conditional", "--run-dir", str(tmp_path / "run")])
    assert not (tmp_path / "run").exists()


def test_incomplete_run_folder_names_missing_files(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(FileNotFoundError) as info:
        load_run(tmp_path)
    message = str(info.value)
    for name in ("model.keras", "source_vocab", "target_vocab"):
        assert name in message
    assert "config.json," not in message.split("missing")[1].split(".")[0]


def test_killed_run_resumes_from_saved_epoch(tmp_path, data_dir):
    run_dir = tmp_path / "run"
    command = [
        sys.executable,
        "-m",
        "keras_attention.translation",
        "--data-dir",
        data_dir,
        "train",
        "--preset",
        "tiny",
        "--max-train-examples",
        "200",
        "--epochs",
        "3",
        "--run-dir",
        str(run_dir),
        *RECIPE,
        "--tie-embeddings",
        "--keep-epochs",
        # The preset's conditional decoder: its second cell's weights and
        # moments must come back from the backup too.
    ]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    history = run_dir / "history.csv"
    deadline = time.time() + 600
    # Kill it as soon as the first epoch is on record (and backed up).
    while time.time() < deadline and process.poll() is None:
        if history.exists() and len(history.read_text().splitlines()) >= 2:
            break
        time.sleep(0.2)
    assert process.poll() is None, "the run ended before it could be killed"
    process.send_signal(signal.SIGKILL)
    process.wait()
    epochs_before = len(history.read_text().splitlines()) - 1
    assert 1 <= epochs_before < 3
    assert (run_dir / "backup").exists()

    subprocess.run(command, env=env, check=True, capture_output=True)
    with open(history) as f:
        epochs = [int(r["epoch"]) for r in csv.DictReader(f)]
    # The resumed run continues at the next epoch instead of starting over.
    assert epochs == list(range(3))
    # ...and its learning rate continues the cosine schedule from that epoch.
    with open(history) as f:
        rates = [float(r["learning_rate"]) for r in csv.DictReader(f)]
    lr = 3e-3  # the tiny preset
    expected = [0.05 * lr + 0.5 * 0.95 * lr * (1 + math.cos(math.pi * e / 3)) for e in range(3)]
    assert rates == pytest.approx(expected, rel=1e-5)
    assert not (run_dir / "backup").exists()
    # Every epoch's weights were kept, across the kill.
    assert averaging.saved_epochs(run_dir) == [1, 2, 3]
    translator, config = load_run(run_dir)
    assert config["conditional"] is True and config["decoder_init"] == "mean"
    assert translator.model.get_layer("decoder").conditional
    assert "encoder_mean" in {layer.name for layer in translator.generator.encoder_model.layers}
    _check_average(run_dir, tmp_path / "averaged")


def _check_average(run_dir, out_dir):
    """`average --last 2` writes a run whose weights are the mean of epochs 2 and 3."""
    cli.main(["average", "--run-dir", str(run_dir), "--last", "2", "--out-dir", str(out_dir)])
    translator, config = load_run(out_dir)
    assert config["averaged_epochs"] == [2, 3]
    reference = keras.saving.load_model(run_dir / "model.keras", compile=False)
    epochs = []
    for epoch in (2, 3):
        reference.load_weights(averaging.epoch_weight_path(run_dir, epoch))
        epochs.append([np.asarray(v.numpy(), np.float64) for v in reference.weights])
    for i, variable in enumerate(translator.model.weights):
        expected = (epochs[0][i] + epochs[1][i]) / 2
        np.testing.assert_allclose(variable.numpy(), expected, rtol=1e-6, atol=1e-7)
    assert any(not np.allclose(a, b) for a, b in zip(*epochs, strict=True))
    decoded = evaluation.decode_corpus(translator, ["A dog runs."], progress=False)
    assert len(decoded["text"]) == 1
    command = ["average", "--run-dir", str(run_dir), "--last"]
    with pytest.raises(SystemExit, match="^average: Cannot average the last 4 epochs"):
        cli.main(command + ["4", "--out-dir", str(out_dir)])
    with pytest.raises(SystemExit, match="must differ"):
        cli.main(command + ["1", "--out-dir", str(run_dir)])


# ------------------------------------------------------------ the example


def test_example_hands_the_old_command_lines_to_the_package(runs, tmp_path, capsys):
    example = load_script(EXAMPLE)
    found = example.main(["status", "--run-dir", str(runs / "bahdanau")])
    assert found.state == run_folders.FINISHED
    assert capsys.readouterr().out.startswith("finished: ")
    argv = ["--data-dir", str(tmp_path / "nowhere"), "train", "--attention", "luong-general"]
    with pytest.raises(SystemExit, match="--conditional is a Bahdanau decoder"):
        example.main(argv + ["--conditional", "--run-dir", str(tmp_path / "run")])
    assert not (tmp_path / "run").exists()


def test_example_runs_top_to_bottom_into_a_run_folder_and_an_export(data_dir, tmp_path):
    out = tmp_path / "example"
    argv = ["--data-dir", data_dir, "--train-pairs", "200", "--epochs", "1"]
    results = load_script(EXAMPLE).main(argv + ["--test-sentences", "4", "--out-dir", str(out)])
    assert set(results) == {"greedy", "beam"}
    for scores in results.values():
        assert 0.0 <= scores["bleu"] <= 100.0
        assert scores["bleu_signature"].startswith("nrefs:1")
    assert run_folders.translator_run_status(out).state == run_folders.FINISHED
    translator, config = load_run(out)
    assert config["attention"] == "bahdanau" and translator.has_attention
    assert translator.generator.decoder.conditional
    manifest = json.loads((out / "export" / "export.json").read_text())
    assert list(manifest["tflite"]) == ["float32"]
    assert (out / "export" / manifest["saved_model"]["path"] / "saved_model.pb").exists()
    outputs = cli.main(["translate", "--run-dir", str(out), "--method", "greedy", "A dog runs."])
    assert len(outputs) == 1
