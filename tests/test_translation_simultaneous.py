"""The translator, simultaneous: `train --policy`, `evaluate` with AP, AL and
DAL, `translate` with its trace. The flags and the model are tested without
data; a tiny run of each learned policy (wait-k over a range of k, MILk) is
trained on a few hundred pairs for one epoch and read by every command."""

import json
import math

import keras
import numpy as np
import pytest
from _data_paths import require_multi30k

from keras_attention.attention.bahdanau_attention import BahdanauAttention
from keras_attention.attention.monotonic_infinite_lookback_attention import (
    MonotonicInfiniteLookbackAttention,
)
from keras_attention.attention.wait_k_attention import WaitKAttention
from keras_attention.generation.seq2seq_generator import Seq2SeqGenerator
from keras_attention.generation.simultaneous_generator import SimultaneousGenerator
from keras_attention.translation import SubwordTokenizer
from keras_attention.translation import cli
from keras_attention.translation import commands
from keras_attention.translation import evaluation
from keras_attention.translation import load_multi30k
from keras_attention.translation.model import build_translator
from keras_attention.translation.translator import Translator
from keras_attention.translation.translator import load_run

VOCAB = ["[PAD]", "[UNK]", "[START]", "[END]", "a", "dog", "runs", "un", "chien", "court", "."]

TINY = ["--preset", "tiny", "--max-train-examples", "200", "--epochs", "1"]
POLICY_FLAGS = {"wait-k": ["--policy", "wait-k", "--wait-k", "1:3"], "milk": ["--policy", "milk"]}
SPLIT = "test_2016_flickr"


# ----------------------------------------------------------- the flags


def _train(tmp_path, *flags):
    argv = ["--data-dir", str(tmp_path / "nowhere"), "train", *flags]
    return cli.main(argv + ["--run-dir", str(tmp_path / "run")])


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--wait-k", "3"], "--wait-k sets the streaming model"),
        (["--encoder-layers", "2"], "--encoder-layers sets the streaming model"),
        (["--policy", "milk", "--wait-k", "3"], "--wait-k is the schedule of --policy wait-k"),
        (["--policy", "wait-k"], "--policy wait-k needs --wait-k"),
        (["--policy", "milk", "--attention", "luong-general"], "Bahdanau"),
        (["--policy", "consecutive", "--decoder-init", "mean"], "--decoder-init"),
    ],
)
def test_train_refuses_a_policy_flag_that_contradicts_another(tmp_path, flags, message):
    with pytest.raises(SystemExit, match=message):
        _train(tmp_path, *flags)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("value", ["0", "-1", "3:2", "0:3", "a", "1:2:3", ""])
def test_train_refuses_a_wait_k_that_is_no_k_or_range(tmp_path, value, capsys):
    with pytest.raises(SystemExit) as info:
        _train(tmp_path, "--policy", "wait-k", "--wait-k", value)
    assert info.value.code == 2
    assert "--wait-k: expected a k of 1 or more" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("value", "parsed"), [("3", 3), ("1:7", [1, 7]), ("2:2", [2, 2])])
def test_train_reads_a_wait_k_or_a_range(value, parsed):
    args = cli.parse_args(["train", "--policy", "wait-k", "--wait-k", value])
    assert args.wait_k == parsed


@pytest.mark.parametrize("value", ["0", "1,0", "x", ","])
def test_evaluate_refuses_a_wait_k_list_with_no_k(value, capsys):
    with pytest.raises(SystemExit):
        cli.parse_args(["evaluate", "--wait-k", value])
    assert "--wait-k: expected comma-separated ks" in capsys.readouterr().err


def test_the_offline_defaults_are_unchanged():
    args = cli.parse_args(["train"])
    assert (args.policy, args.wait_k, args.encoder_layers) == (None, None, None)
    model = build_translator(11, 11, embedding_dim=4, units=8, dropout=0.0)
    assert isinstance(model.get_layer("encoder"), keras.layers.Bidirectional)
    assert type(model.get_layer("decoder").attention) is BahdanauAttention
    assert "bridge" in {layer.name for layer in model.layers}


# ----------------------------------------------------------- the model


@pytest.mark.parametrize(
    ("policy", "wait_k", "attention"),
    [
        ("consecutive", None, BahdanauAttention),
        ("wait-k", 2, WaitKAttention),
        ("wait-k", [1, 3], WaitKAttention),
        ("milk", None, MonotonicInfiniteLookbackAttention),
    ],
)
def test_a_policy_builds_a_model_that_streams(policy, wait_k, attention):
    keras.utils.set_random_seed(0)
    model = build_translator(
        13, 11, embedding_dim=4, units=8, dropout=0.0, policy=policy, wait_k=wait_k, seed=0
    )
    grus = [layer for layer in model.layers if isinstance(layer, keras.layers.GRU)]
    assert [layer.name for layer in grus] == ["encoder_1", "encoder_2"]
    assert "bridge" not in {layer.name for layer in model.layers}
    layer = model.get_layer("decoder").attention
    assert type(layer) is attention
    if policy == "wait-k":
        k, training_k = (2, None) if wait_k == 2 else (3, (1, 3))
        assert (layer.k, layer.training_k) == (k, training_k)
    # The generator refuses a memory that reads later tokens and a first
    # state bridged from the source: it accepts this one.
    SimultaneousGenerator(Seq2SeqGenerator.from_model(model, 2, 3), max_source_length=8)


def test_the_encoder_layers_are_a_setting():
    model = build_translator(13, 11, embedding_dim=4, units=8, policy="milk", encoder_layers=3)
    grus = [layer.name for layer in model.layers if isinstance(layer, keras.layers.GRU)]
    assert grus == ["encoder_1", "encoder_2", "encoder_3"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"policy": "wait-k", "wait_k": 0}, "wait_k"),
        ({"policy": "wait-k", "wait_k": [3, 2]}, "low <= high"),
        ({"policy": "wait-k", "wait_k": None}, "wait_k"),
        ({"policy": "milk", "wait_k": 2}, "wait_k"),
        ({"policy": "wait-ish"}, "policy"),
        ({"policy": "milk", "attention": "luong-dot"}, "Bahdanau"),
        ({"policy": "milk", "decoder_init": "mean"}, "decoder_init"),
        ({"wait_k": 2}, "policy=None"),
    ],
)
def test_build_translator_refuses_a_policy_option_that_names_no_model(options, message):
    with pytest.raises(ValueError, match=message):
        build_translator(13, 11, embedding_dim=4, units=8, **options)


# ------------------------------------------------------------ delays, trace


def _milk_translator():
    """A `Translator` of an untrained MILk model over `VOCAB`, in hard mode."""
    keras.utils.set_random_seed(3)
    tokenizer = SubwordTokenizer(VOCAB, lower_case=True)
    size = tokenizer.vocab_size
    model = build_translator(size, size, embedding_dim=4, units=8, dropout=0.0, policy="milk")
    translator = Translator(model, tokenizer, tokenizer)
    translator.policy = "milk"
    translator.generator.decoder.attention.mode = "hard"
    return translator


MILK_SOURCES = ["a dog runs .", "un chien court a dog", "a a dog . runs un", "chien . a"]


def test_milk_delays_are_the_streaming_decoders():
    translator = _milk_translator()
    decoded = evaluation.decode_corpus(translator, MILK_SOURCES, progress=False)
    delays, _, _ = evaluation.simultaneous_latency(translator, decoded)
    streaming = translator.simultaneous_generator(max_source_length=8)
    for i, source in enumerate(decoded["source_tokens"]):
        assert delays[i] == streaming.translate(source).delays
    # Some writes came before the source ended.
    assert any(min(g) < len(s) for g, s in zip(delays, decoded["source_tokens"], strict=True))


@pytest.mark.parametrize(
    ("policy", "k", "expected"), [("wait-k", 2, (2, 3, 3)), ("consecutive", None, (3, 3, 3))]
)
def test_schedule_delays_are_wait_k(policy, k, expected):
    assert evaluation.schedule_delays(policy, 3, 3, k) == expected


def test_the_streaming_bound_holds_back_a_policy_that_stays_on_early_tokens():
    # Greedy's bound 2n + 10 on n tokens read: write t needs t - 1 < 2n + 10.
    expected = tuple(min(8, max(1, (t - 11) // 2 + 1)) for t in range(1, 31))
    assert evaluation.bounded_delays((1,) * 30, 8, 512) == expected
    assert expected[11:15] == (1, 2, 2, 3)
    wait_2 = evaluation.schedule_delays("wait-k", 8, 30, 2)
    assert evaluation.bounded_delays(wait_2, 8, 512) == wait_2  # never held back


def test_the_trace_reads_before_each_write_and_reads_the_rest_after_end():
    trace = evaluation.trace_text(["a", "dog", "runs", "."], ["un", "[END]"], (2, 2))
    assert trace == "R:a R:dog W:un W:[END] R:runs R:."


def test_the_results_table_adds_latency_for_a_simultaneous_run():
    row = {"bleu": 1.0, "chrf": 2.0, "bleu_lc_tok": 3.0, "AP": 0.5, "AL": 2.25, "DAL": 3.0}
    table = commands.results_table({"t/greedy/wait-2": row})
    assert table.splitlines()[0].endswith("| AP | AL | DAL |")
    assert table.splitlines()[2] == "| t/greedy/wait-2 | 1.0 | 2.0 | 3.0 | 0.500 | 2.25 | 3.00 |"
    plain = {key: row[key] for key in ("bleu", "chrf", "bleu_lc_tok")}
    assert "AP" not in commands.results_table({"t/greedy": plain})


# ------------------------------------------------- a tiny run of each policy


@pytest.fixture(scope="module")
def data_dir():
    return require_multi30k()


@pytest.fixture(scope="module")
def runs(tmp_path_factory, data_dir):
    root = tmp_path_factory.mktemp("simultaneous")
    for policy, flags in POLICY_FLAGS.items():
        cli.main(["--data-dir", data_dir, "train", *TINY, *flags, "--run-dir", str(root / policy)])
    return root


@pytest.fixture(scope="module")
def sentences(data_dir):
    """Three short sentences of the test split: a streaming decoder steps
    through each one eagerly, a tiny model's output runs to its bound."""
    english = list(load_multi30k([SPLIT], data_dir)[SPLIT].en[:40])
    return sorted(english, key=len)[:3]


def test_train_records_the_policy_and_load_run_decodes_with_it(runs):
    config = json.loads((runs / "wait-k" / "config.json").read_text())
    assert (config["policy"], config["wait_k"], config["encoder_layers"]) == ("wait-k", [1, 3], 2)
    assert config["decoder_init"] is None
    translator, _ = load_run(runs / "wait-k")
    assert translator.policy == "wait-k" and translator.wait_k == 3  # the range's high
    assert translator.generator.decoder.attention.training_k == (1, 3)
    translator, config = load_run(runs / "milk")
    assert config["policy"] == "milk" and "wait_k" in config and config["wait_k"] is None
    assert translator.generator.decoder.attention.mode == "hard"


def _written(translator, decoded, i):
    """The tokens written for sentence i, END included when written."""
    written = len(decoded["written_attention"][i])
    return tuple((decoded["tokens"][i] + [translator.target_tokenizer.end_id])[:written])


@pytest.mark.parametrize(("policy", "k"), [("wait-k", 2), ("milk", None)])
def test_offline_decoding_gives_the_streaming_tokens_and_delays(runs, sentences, policy, k):
    translator, _ = load_run(runs / policy)
    if k is not None:
        translator.wait_k = k
    decoded = evaluation.decode_corpus(translator, sentences, progress=False)
    delays, latencies, _ = evaluation.simultaneous_latency(translator, decoded)
    streaming = translator.simultaneous_generator()
    for i, source in enumerate(decoded["source_tokens"]):
        result = streaming.translate(source)
        assert _written(translator, decoded, i) == result.tokens
        assert delays[i] == result.delays
        assert latencies[i] == result.latency


def _strict_json(path):
    def refuse(constant):
        raise ValueError(f"{path} holds {constant}, which is not JSON")

    return json.loads(path.read_text(), parse_constant=refuse)


def test_evaluate_reports_bleu_beside_ap_al_dal_for_each_k(runs, data_dir, tmp_path, capsys):
    argv = ["--data-dir", data_dir, "evaluate", "--run-dir", str(runs / "wait-k")]
    argv += ["--splits", SPLIT, "--max-sentences", "6", "--heatmaps", "0"]
    results = cli.main(argv + ["--wait-k", "1,2", "--out-dir", str(tmp_path)])
    assert list(results) == [f"{SPLIT}/greedy/wait-1", f"{SPLIT}/greedy/wait-2"]
    saved = _strict_json(tmp_path / "results.json")
    assert saved == json.loads(json.dumps(results))
    data = load_multi30k([SPLIT], data_dir)[SPLIT].head(6)
    translator, _ = load_run(runs / "wait-k")
    for k in (1, 2):
        scores = results[f"{SPLIT}/greedy/wait-{k}"]
        assert (scores["policy"], scores["k"]) == ("wait-k", k)
        # The latency of the outputs, recomputed from the wait-k formula.
        translator.wait_k = k
        decoded = evaluation.decode_corpus(translator, data.en, progress=False)
        ap = []
        for weights, source in zip(
            decoded["written_attention"], decoded["source_tokens"], strict=True
        ):
            written, length = len(weights), len(source)
            ap.append(sum(min(k + t, length) for t in range(written)) / (length * written))
        assert scores["AP"] == pytest.approx(float(np.mean(ap)), rel=1e-12)
        assert 0.0 < scores["AP"] <= 1.0 and scores["DAL"] >= scores["AL"] - 1e-9
        hyps = (tmp_path / f"{SPLIT}.greedy.wait-{k}.fr").read_text().splitlines()
        assert hyps == evaluation.detokenize_output(decoded["text"])
        assert (tmp_path / f"attention.{SPLIT}.wait-{k}.0.png").stat().st_size > 0
    table = capsys.readouterr().out
    assert f"| {SPLIT}/greedy/wait-2 |" in table and "| AP | AL | DAL |" in table


def test_evaluate_a_milk_run_reports_its_one_setting(runs, data_dir, tmp_path):
    argv = ["--data-dir", data_dir, "evaluate", "--run-dir", str(runs / "milk")]
    argv += ["--splits", SPLIT, "--max-sentences", "4", "--heatmaps", ""]
    results = cli.main(argv + ["--out-dir", str(tmp_path)])
    scores = results[f"{SPLIT}/greedy/milk"]
    assert list(results) == [f"{SPLIT}/greedy/milk"] and scores["k"] is None
    assert all(math.isfinite(scores[name]) for name in ("AP", "AL", "DAL"))


@pytest.mark.parametrize(
    ("policy", "flags", "message"),
    [
        ("wait-k", ["--methods", "greedy,beam"], "a beam would revise tokens already written"),
        ("milk", ["--wait-k", "2"], "--wait-k sets the k of a run trained with --policy wait-k"),
    ],
)
def test_evaluate_refuses_what_a_simultaneous_run_has_not(runs, tmp_path, policy, flags, message):
    argv = ["--data-dir", str(tmp_path / "nowhere"), "evaluate", "--run-dir", str(runs / policy)]
    with pytest.raises(SystemExit, match=message):
        cli.main(argv + flags + ["--out-dir", str(tmp_path / "eval")])
    assert not (tmp_path / "eval").exists()


@pytest.mark.parametrize("policy", ["wait-k", "milk"])
def test_translate_prints_each_translation_and_its_trace(runs, sentences, policy, capsys):
    outputs = cli.main(["translate", "--run-dir", str(runs / policy), *sentences[:2]])
    lines = capsys.readouterr().out.splitlines()[-4:]
    assert [lines[0], lines[2]] == outputs
    translator, _ = load_run(runs / policy)
    decoded = evaluation.decode_corpus(translator, sentences[:2], progress=False)
    for i, trace in enumerate((lines[1], lines[3])):
        assert trace.startswith("  trace (AP ")
        actions = trace.split("): ", 1)[1].split(" ")
        assert sum(a.startswith("R:") for a in actions) == len(decoded["source_tokens"][i])
        assert sum(a.startswith("W:") for a in actions) == len(decoded["written_attention"][i])
    with pytest.raises(SystemExit, match="a beam would revise"):
        cli.main(["translate", "--run-dir", str(runs / policy), "--method", "beam", "a dog"])
