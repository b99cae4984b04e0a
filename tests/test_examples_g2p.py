"""The G2P example: its CMUdict reader, its batches, and a tiny end-to-end run
(its scoring is `keras_attention.scoring.error_rates`, tests/test_error_rates.py)."""

import collections
import csv
import io
import json
import os
import shutil
from pathlib import Path

import keras
import numpy as np
import pytest
from _data_paths import require_cmudict
from _scripts import ROOT
from _scripts import load_script

from keras_attention.generation import EnsembleGenerator

pytestmark = pytest.mark.tensorflow

DATA = ROOT.parent / "shared" / "data" / "cmudict"
# Skips without CMUdict, fails under CI=true (where the data must be there).
needs_data = pytest.mark.usefixtures("cmudict")


@pytest.fixture
def cmudict():
    return require_cmudict()


@pytest.fixture(scope="module")
def g2p():
    return load_script("examples/g2p_cmudict.py")


def test_the_example_is_a_recipe_of_at_most_600_lines():
    # Its data, vocabulary, model recipe and scoring against the published
    # table; the run, the schedule, ensembles and export are the library's.
    lines = (ROOT / "examples" / "g2p_cmudict.py").read_text().count("\n")
    assert lines <= 600, f"examples/g2p_cmudict.py has {lines} lines"


def write(path, text, newline="\r\n"):
    path.write_bytes(text.replace("\n", newline).encode("ascii"))
    return path


# ------------------------------------------------------------------ reader


@pytest.mark.parametrize("newline", ["\r\n", "\n"])
def test_reader_keeps_every_pronunciation_in_file_order(g2p, tmp_path, newline):
    path = write(
        tmp_path / "dict",
        "'BOUT  B AW T\nREAD  R IY D\nREAD  R EH D\nREAD  R IY D\nX  EH K S\n",
        newline,
    )
    lexicon = g2p.read_cmudict(str(path))
    assert lexicon == {
        "'BOUT": [("B", "AW", "T")],
        "READ": [("R", "IY", "D"), ("R", "EH", "D")],  # the repeated line once
        "X": [("EH", "K", "S")],
    }
    assert list(lexicon) == ["'BOUT", "READ", "X"]


@pytest.mark.parametrize(
    "line",
    ["READ R IY D", "READ  ", "  R IY D", "READ\tR IY D", "READ  R IY D\tX", ""],
)
def test_a_malformed_line_is_an_error_naming_file_and_line(g2p, tmp_path, line):
    path = write(tmp_path / "bad", f"A  AH\nB  B IY\n{line}\nC  S IY\n")
    with pytest.raises(ValueError, match=rf"^line 3 of {path}: expected 'WORD  PH PH \.\.\.'"):
        g2p.read_cmudict(str(path))


def test_a_non_ascii_line_is_an_error_naming_file_and_line(g2p, tmp_path):
    path = tmp_path / "latin1"
    path.write_bytes(b"A  AH\r\nCAF\xc9  K AE F EY\r\n")
    with pytest.raises(ValueError, match=rf"^line 2 of {path} is not valid UTF-8 \(byte 0xc9"):
        g2p.read_cmudict(str(path))
    path.write_bytes("A  AH\nB  B IY\nCAFÉ  K AE F EY\n".encode())  # UTF-8, not ASCII
    with pytest.raises(ValueError, match=rf"^line 3 of {path}: expected .* in ASCII"):
        g2p.read_cmudict(str(path))


def test_a_missing_file_is_an_error_naming_it(g2p, tmp_path):
    missing = tmp_path / "cmudict-0.7b.test"
    with pytest.raises(FileNotFoundError, match=str(missing)):
        g2p.read_cmudict(str(missing))
    with pytest.raises(FileNotFoundError, match="cmudict-0.7b.test"):
        g2p.read_split(str(tmp_path), "cmudict-0.7b.test")


def test_an_altered_file_fails_the_hash_check_naming_it(g2p, tmp_path):
    path = write(tmp_path / "cmudict-0.7b.test", "A  AH\n")
    with pytest.raises(ValueError, match=rf"{path}: sha256 [0-9a-f]{{64}} differs"):
        g2p.read_split(str(tmp_path), "cmudict-0.7b.test")
    import hashlib

    expected = hashlib.sha256(path.read_bytes()).hexdigest()
    assert g2p.read_cmudict(str(path), expected) == {"A": [("AH",)]}


@needs_data
def test_the_standard_split_has_the_sizes_of_its_readme(g2p):
    # Figures from the data's README: 106,794 training and 11,994 test words,
    # 12,855 test lines, 801 test words on several lines, 39 phones, A-Z and '.
    train = g2p.read_split(str(DATA), "cmudict-0.7b.train")
    test = g2p.read_split(str(DATA), "cmudict-0.7b.test")
    assert (len(train), len(test)) == (106_794, 11_994)
    lines = (DATA / "cmudict-0.7b.test").read_bytes().decode("ascii").splitlines()
    assert len(lines) == 12_855
    words = collections.Counter(line.split("  ")[0] for line in lines)
    assert sum(n > 1 for n in words.values()) == 801
    # Some lines repeat (stress marks removed): each pronunciation is kept once.
    assert sum(len(p) for p in test.values()) == len(set(lines)) < len(lines)
    assert not set(train) & set(test)
    vocab = g2p.Vocabulary.from_lexicon(train)
    assert "".join(vocab.graphemes[1:]) == "'ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    assert len(vocab.phones) == 3 + 39


# ------------------------------------------------------------------ batches


def batched(g2p, pairs):
    """The example's training batches of `pairs`, two at a time."""
    return g2p.training.length_bucketed_dataset(pairs, 2, 0, g2p.START, g2p.END)


def test_batches_pair_start_phones_with_phones_end(g2p):
    vocab = g2p.Vocabulary(["<pad>", "A", "B"], g2p.PHONE_SPECIALS + ["AH", "B"])
    pairs = [([1], [3]), ([1, 2], [3, 4]), ([2, 2, 1], [4, 4, 3]), ([2], [4])]
    batches = [((s.numpy(), d.numpy()), t.numpy()) for (s, d), t in batched(g2p, pairs)]
    assert sum(len(b[1]) for b in batches) == 4
    for (source, decoder_input), target in batches:
        for row in range(len(source)):
            n = int((target[row] > 0).sum())
            assert target[row, n - 1] == g2p.END and decoder_input[row, 0] == g2p.START
            np.testing.assert_array_equal(decoder_input[row, 1:n], target[row, : n - 1])
    assert vocab.decode_phones([3, 4, g2p.END, 3]) == ["AH", "B"]


# ---------------------------------------------------------------- schedule


def cosine(peak, floor, fraction):
    """The schedule written out: cos(pi * f) from 1 to -1 as f goes 0 to 1
    (`keras_attention.training.TimeBudget`, tests/test_time_budget.py)."""
    return floor + (peak - floor) * (1 + np.cos(np.pi * fraction)) / 2


def test_negative_intra_op_threads_is_refused(g2p, capsys):
    with pytest.raises(SystemExit):
        g2p.parse_args(["train", "--run-dir", "r", "--intra-op-threads", "-1"])
    assert "--intra-op-threads: expected 0 or more, got -1" in capsys.readouterr().err


# -------------------------------------------------- a tiny end-to-end run


@pytest.fixture(scope="module")
def run_dir(g2p, tmp_path_factory):
    if not (DATA / "cmudict-0.7b.train").exists():
        require_cmudict()
    run = tmp_path_factory.mktemp("g2p") / "run"
    g2p.main(["train", "--quick", "--data-dir", str(DATA), "--run-dir", str(run), "--verbose", "0"])
    return run


def pronounce(g2p, run_dir, words=(), stdin=""):
    args = g2p.parse_args(["pronounce", "--run-dir", str(run_dir), *words])
    out = io.StringIO()
    g2p.pronounce(args, stream=io.StringIO(stdin), out=out)
    return out.getvalue()


def test_pronounce_reads_stdin_keeps_blank_lines_and_ignores_case(g2p, run_dir):
    out = pronounce(g2p, run_dir, stdin="keras\n\nKERAS\n  \nKeRaS\n")
    lines = out.split("\n")
    assert len(lines) == 6 and lines[-1] == ""  # five lines in, five out
    assert lines[1] == lines[3] == ""
    assert lines[0] == lines[2] == lines[4]
    assert pronounce(g2p, run_dir, words=["Keras"]) == lines[0] + "\n"


def test_pronounce_gives_phones_of_the_vocabulary(g2p, run_dir):
    vocab = g2p.Vocabulary.from_json(json.loads((run_dir / "vocab.json").read_text()))
    out = pronounce(g2p, run_dir, words=["attention", "o'neil", "a"])
    lines = out.splitlines()
    assert len(lines) == 3
    for line in lines:
        assert set(line.split()) <= set(vocab.phones[3:])


@pytest.mark.parametrize(
    "words, stdin, where",
    [(["fine", "R2D2"], "", "argument 2"), ([], "ok\n\nwell-known\n", "line 3 of standard input")],
)
def test_pronounce_refuses_a_word_with_unknown_characters_naming_it(
    g2p, run_dir, words, stdin, where
):
    bad = words[-1] if words else "well-known"
    message = rf"^pronounce: {where}: The word '{bad.upper()}' has characters outside"
    with pytest.raises(SystemExit, match=message):
        pronounce(g2p, run_dir, words=words, stdin=stdin)


# `str.upper` folds the first three into ASCII ("STRASSE", "FISH", "IT") and
# not the fourth: one rule refuses every letter that is not ASCII.
@pytest.mark.parametrize("word", ["straße", "\ufb01sh", "\u0131t", "café", "Zoë"])
def test_pronounce_refuses_every_word_that_is_not_ascii_naming_the_character(g2p, run_dir, word):
    message = rf"^pronounce: argument 2: The word '{word}' has a character that is not ASCII"
    with pytest.raises(SystemExit, match=message):
        pronounce(g2p, run_dir, words=["fine", word])
    argv = ["evaluate", "--run-dir", str(run_dir), "--data-dir", str(DATA), "--verbose", "0"]
    with pytest.raises(SystemExit, match="has a character that is not ASCII"):
        g2p.main([*argv, "--alignments", word, "--limit", "1", "--beam-width", "0"])


def test_pronounce_refuses_a_word_longer_than_a_source_may_be(g2p, run_dir):
    long = "a" * 513
    message = (
        r"^pronounce: argument 2: The word 'A{40}'\.\.\. has 513 characters, more than the 512"
    )
    with pytest.raises(SystemExit, match=message):
        pronounce(g2p, run_dir, words=["fine", long])


def test_pronounce_from_the_command_line_prints_to_standard_output(g2p, run_dir, capsys):
    g2p.main(["pronounce", "--run-dir", str(run_dir), "keras", "a"])
    printed = capsys.readouterr().out
    assert printed == pronounce(g2p, run_dir, words=["keras", "a"]) and printed.count("\n") == 2


def test_evaluate_prints_scores_and_the_length_table(g2p, run_dir, tmp_path, capsys):
    plot = tmp_path / "by_length.png"
    result = g2p.main(
        [
            "evaluate",
            "--run-dir",
            str(run_dir),
            "--data-dir",
            str(DATA),
            "--limit",
            "60",
            "--beam-width",
            "3",
            "--plot",
            str(plot),
            "--verbose",
            "0",
        ]
    )
    out = capsys.readouterr().out
    for label in ("greedy", "beam 3"):
        s = result[label]
        assert s["words"] == 60
        assert f"{label}: WER {s['wer']:.2f} %" in out
        assert sum(row["words"] for row in s["by_length"]) == 60
    assert out.count("| letters | words | greedy WER / PER | beam 3 WER / PER |") == 1
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    saved = json.loads((run_dir / "eval_test.json").read_text())
    assert saved["greedy"]["wer"] == result["greedy"]["wer"]


def test_export_tflite_tokens_equal_keras_greedy(g2p, run_dir, tmp_path):
    from ai_edge_litert.interpreter import Interpreter

    from keras_attention import export

    out = tmp_path / "export"
    g2p.main(["export", "--run-dir", str(run_dir), str(out), "--variants", "float32,int8"])
    manifest = json.loads((out / "tflite" / "g2p.json").read_text())
    assert sorted(manifest["models"]) == ["float32", "int8"]
    assert manifest["graphemes"][1:] == list("'ABCDEFGHIJKLMNOPQRSTUVWXYZ")
    assert len(manifest["phones"]) == manifest["target_vocab_size"] == 42
    assert {"generate", "generate_beam"} <= set(manifest["signatures"])
    assert (out / "saved_model" / "saved_model.pb").exists()
    path = out / "tflite" / manifest["models"]["float32"]
    assert export.non_builtin_operators(path) == {}

    model, vocab, _ = g2p.load_run(str(run_dir))
    generator = g2p.make_generator(model)
    generate = Interpreter(model_path=str(path)).get_signature_runner("generate")
    test = g2p.read_split(str(DATA), "cmudict-0.7b.test")
    words = list(test)[::200]  # 60 words of every length
    nonempty = 0
    for word in words:
        ids = np.array([manifest["graphemes"].index(c) for c in word], "int32")[None]
        lite = generate(source=ids)
        keras_out = generator.greedy(ids)
        n = int(keras_out["lengths"][0])
        assert int(lite["lengths"][0]) == n, word
        np.testing.assert_array_equal(lite["tokens"][0, :n], np.asarray(keras_out["tokens"])[0, :n])
        nonempty += len(vocab.decode_phones(lite["tokens"][0])) > 0
    assert nonempty > len(words) // 2  # the parity is about real phones, not END alone


def test_export_refuses_a_folder_that_is_not_an_export(g2p, run_dir, tmp_path):
    (tmp_path / "notes.txt").write_text("mine\n")
    with pytest.raises(SystemExit, match=rf"^export: The export folder {tmp_path} holds notes"):
        g2p.main(["export", "--run-dir", str(run_dir), str(tmp_path), "--variants", ""])
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def test_help_of_every_command(g2p, capsys):
    for command in ("train", "evaluate", "pronounce", "export"):
        with pytest.raises(SystemExit) as exit_info:
            g2p.parse_args([command, "--help"])
        assert exit_info.value.code == 0
        assert "--run-dir" in capsys.readouterr().out


def test_resuming_a_finished_run_trains_no_more(g2p, run_dir, capsys):
    before = (run_dir / "progress.json").read_text()
    g2p.main(["train", "--quick", "--data-dir", str(DATA), "--run-dir", str(run_dir)])
    assert "has finished training" in capsys.readouterr().out
    assert (run_dir / "progress.json").read_text() == before


def test_resuming_with_another_recipe_is_refused(g2p, run_dir):
    with pytest.raises(SystemExit, match=r"other options: dropout 0\.5 \(the run has 0\.2\)"):
        g2p.main(
            ["train", "--quick", "--data-dir", str(DATA), "--run-dir", str(run_dir)]
            + ["--dropout", "0.5"]
        )


def test_a_run_of_an_older_recipe_without_label_smoothing_resumes(g2p, run_dir, tmp_path, capsys):
    run = tmp_path / "old"
    shutil.copytree(run_dir, run)
    config = json.loads((run / "config.json").read_text())
    assert config.pop("label_smoothing") == 0.1  # today's default
    (run / "config.json").write_text(json.dumps(config))  # as written before the option
    # Such a run trained without smoothing: it resumes with ε = 0, not the default.
    with pytest.raises(
        SystemExit, match=r"other options: label_smoothing 0\.1 \(the run has 0\.0\)"
    ):
        g2p.main(["train", "--quick", "--data-dir", str(DATA), "--run-dir", str(run)])
    g2p.main(
        ["train", "--quick", "--data-dir", str(DATA), "--run-dir", str(run)]
        + ["--label-smoothing", "0"]
    )
    assert "has finished training" in capsys.readouterr().out


@pytest.mark.parametrize("epsilon", ["1", "-0.1", "x"])
def test_label_smoothing_outside_0_to_1_is_refused(g2p, epsilon, capsys):
    with pytest.raises(SystemExit):
        g2p.parse_args(["train", "--run-dir", "r", "--label-smoothing", epsilon])
    assert "--label-smoothing" in capsys.readouterr().err


@needs_data
def test_label_smoothing_is_the_loss_the_model_trains_and_keeps(g2p, tmp_path):
    run = tmp_path / "smoothed"
    g2p.main(
        ["train", "--quick", "--data-dir", str(DATA), "--run-dir", str(run), "--verbose", "0"]
        + ["--epochs", "1", "--label-smoothing", "0.2"]
    )
    assert json.loads((run / "config.json").read_text())["label_smoothing"] == 0.2
    model, vocab, _ = g2p.load_run(str(run))  # the loss comes back from model.keras
    lexicon = g2p.read_split(str(DATA), "cmudict-0.7b.test")
    words = list(lexicon)[::1999][:6]
    pairs = g2p.training_pairs({w: lexicon[w] for w in words}, vocab)
    batches = g2p.training.length_bucketed_dataset(pairs, len(pairs), 0, g2p.START, g2p.END)
    (source, phones_in), target = next(iter(batches))
    assert np.any(target.numpy() == 0)  # words of several lengths: padded targets
    logits = model([source, phones_in], training=False)
    loss = float(model.loss(target, logits))
    # float64 reference: (1 − ε)·(−log p_y) + ε·mean_k(−log p_k) over the real phones.
    z = np.asarray(logits, np.float64)
    log_p = z - z.max(-1, keepdims=True)
    log_p -= np.log(np.exp(log_p).sum(-1, keepdims=True))
    y = target.numpy()
    real = y != 0
    token = -0.8 * np.take_along_axis(log_p, y[..., None], -1)[..., 0] - 0.2 * log_p.mean(-1)
    np.testing.assert_allclose(loss, token[real].mean(), rtol=1e-5)
    assert abs(loss - token.mean()) > 1e-3  # the padding would change it


def test_no_machine_paths_or_private_modules(g2p):
    source = Path(g2p.__file__).read_text()
    assert "keras_attention.translation" not in source
    assert "keras_attention._" not in source and "/work" not in source
    assert os.path.basename(g2p.__file__) == "g2p_cmudict.py"


@needs_data
def test_training_resumes_after_a_kill_from_the_last_epoch(g2p, tmp_path, monkeypatch):
    run = tmp_path / "run"
    argv = ["train", "--quick", "--data-dir", str(DATA), "--run-dir", str(run), "--verbose", "0"]
    original = g2p.training.TimeBudget.on_epoch_end

    def killed_after_epoch_4(self, epoch, logs=None):
        original(self, epoch, logs)
        if epoch + 1 == 4:
            raise KeyboardInterrupt  # as a kill would, after the epoch's backup

    monkeypatch.setattr(g2p.training.TimeBudget, "on_epoch_end", killed_after_epoch_4)
    with pytest.raises(KeyboardInterrupt):
        g2p.main(argv)
    monkeypatch.undo()
    model = g2p.main(argv)
    progress = json.loads((run / "progress.json").read_text())
    assert [e["epoch"] for e in progress["epochs"]] == list(range(1, 13))
    with open(run / "history.csv") as f:
        logged = [int(row["epoch"]) for row in csv.DictReader(f)]
    assert logged == list(range(12))  # epochs 5 to 12 after the restart, none twice
    batches = 12 * -(-330 // 32)  # 12 epochs of the 330 quick pronunciations
    assert int(model.optimizer.iterations.numpy()) == batches
    # The 12 epochs end long before the 60-minute budget: the rate decayed
    # over them, resumed where it was, and is near the floor (peak / 30) at
    # the last step it was set (batch 10 of 11 of the last epoch: step 131).
    rates = [e["learning_rate"] for e in progress["epochs"]]
    assert np.all(np.diff(rates[1:]) < 0)
    peak = 5e-3
    np.testing.assert_allclose(rates[-1], cosine(peak, peak / 30, 131 / 132), rtol=1e-4)


# --------------------------------------------------------------- ensembles


def _perturbed_generator(g2p, run_dir, seed):
    """The quick run's model with noise added to every weight: another model, same vocabulary."""
    model, _, _ = g2p.load_run(str(run_dir))
    rng = np.random.default_rng(seed)
    for v in model.weights:
        value = v.numpy()
        v.assign(value + rng.normal(0.0, 0.05, value.shape).astype(value.dtype))
    return g2p.make_generator(model)


def _word_batch(g2p, run_dir, count=12):
    _, vocab, _ = g2p.load_run(str(run_dir))
    test = g2p.read_split(str(DATA), "cmudict-0.7b.test")
    words = list(test)[::997][:count]
    sources = [vocab.encode_word(w) for w in words]
    return keras.utils.pad_sequences(sources, padding="post")  # (B, S), padded with 0


def test_an_ensemble_of_one_model_twice_decodes_as_that_model(g2p, run_dir):
    model, _, _ = g2p.load_run(str(run_dir))
    generator = g2p.make_generator(model)
    ensemble = EnsembleGenerator([generator, g2p.make_generator(g2p.load_run(str(run_dir))[0])])
    source = _word_batch(g2p, run_dir)
    alone, together = generator.greedy(source), ensemble.greedy(source)
    np.testing.assert_array_equal(together["tokens"], alone["tokens"])
    np.testing.assert_allclose(together["log_probs"], alone["log_probs"], atol=1e-4)
    np.testing.assert_allclose(together["attention"], alone["attention"], atol=1e-5)
    beam_alone = generator.beam(source, beam_width=3, length_penalty=0.6)
    beam_together = ensemble.beam(source, beam_width=3, length_penalty=0.6)
    np.testing.assert_array_equal(beam_together["tokens"], beam_alone["tokens"])


def test_ensemble_greedy_takes_the_best_mean_probability_at_every_step(g2p, run_dir):
    generators = [_perturbed_generator(g2p, run_dir, seed) for seed in (1, 2, 3)]
    ensemble = EnsembleGenerator(generators)
    source = _word_batch(g2p, run_dir)
    out = ensemble.greedy(source)
    tokens, lengths = out["tokens"], out["lengths"]
    # The reference: each model run teacher-forced along the ensemble's output,
    # the mean of its probabilities in float64.
    target_in = np.concatenate([np.full((len(source), 1), g2p.START), tokens[:, :-1]], axis=1)
    probs = []
    for generator in generators:
        logits = np.asarray(generator.teacher_forced_logits(source, target_in), np.float64)
        logits -= logits.max(axis=-1, keepdims=True)
        probs.append(np.exp(logits) / np.exp(logits).sum(axis=-1, keepdims=True))
    mean = np.mean(probs, axis=0)  # (B, L, V)
    disagreements = 0
    for b in range(len(source)):
        n = int(lengths[b])
        assert n > 0
        np.testing.assert_array_equal(mean[b, :n].argmax(axis=-1), tokens[b, :n])
        chosen = mean[b, np.arange(n), tokens[b, :n]]
        np.testing.assert_allclose(out["log_probs"][b], np.log(chosen).sum(), rtol=1e-4)
        # The models do not all agree, so the mean decides something.
        disagreements += sum(int((p[b, :n].argmax(axis=-1) != tokens[b, :n]).any()) for p in probs)
    assert disagreements > 0


def test_evaluate_an_ensemble_keeps_the_runs_own_scores(g2p, run_dir, tmp_path, capsys):
    second = tmp_path / "second"
    shutil.copytree(run_dir, second)
    argv = ["evaluate", "--run-dir", str(run_dir), "--data-dir", str(DATA), "--limit", "30"]
    single = g2p.main([*argv, "--beam-width", "0", "--verbose", "0"])
    before = (run_dir / "eval_test.json").read_text()
    both = g2p.main([*argv, "--beam-width", "2", "--verbose", "0", "--ensemble", str(second)])
    out = capsys.readouterr().out
    assert f"Evaluating {run_dir} + {second} on cmudict-0.7b.test (30 words)" in out
    # Two copies of one model decode as that model; the run's own scores stay.
    assert both["greedy"]["wer"] == single["greedy"]["wer"]
    assert both["runs"] == [str(run_dir), str(second)]
    assert (run_dir / "eval_test.json").read_text() == before
    saved = json.loads((run_dir / "eval_test_ensemble2.json").read_text())
    assert saved["beam 2"]["words"] == 30


def test_evaluate_refuses_an_ensemble_of_another_vocabulary_or_split(g2p, run_dir, tmp_path):
    other = tmp_path / "other"
    shutil.copytree(run_dir, other)
    vocab = json.loads((other / "vocab.json").read_text())
    key = "phones" if "phones" in vocab else next(iter(vocab))
    vocab[key][3], vocab[key][4] = vocab[key][4], vocab[key][3]
    (other / "vocab.json").write_text(json.dumps(vocab))
    argv = ["evaluate", "--run-dir", str(run_dir), "--data-dir", str(DATA), "--limit", "5"]
    with pytest.raises(SystemExit, match=rf"^{other} has another vocab.json than {run_dir}"):
        g2p.main([*argv, "--ensemble", str(other)])
    dev = tmp_path / "dev"
    shutil.copytree(run_dir, dev)
    config = json.loads((dev / "config.json").read_text())
    config["split"] = "dev"
    (dev / "config.json").write_text(json.dumps(config))
    with pytest.raises(SystemExit, match=rf"^{dev} was trained with split 'dev' and {run_dir}"):
        g2p.main([*argv, "--ensemble", str(dev)])
