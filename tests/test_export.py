"""Export: the SavedModel and the builtin-only TFLite models translate like Keras.

One small model (random weights, vocabularies learned from 2,000 training
pairs) is written as a run folder and exported once for the whole module; the
other decoders are exported in the slow tests.
"""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf
from _data_paths import multi30k_dir
from _scripts import load_script

from keras_attention.export import tflite_operators
from keras_attention.export import tflite_subgraph_operators
from keras_attention.training.run_folder import CONFIG_FILE
from keras_attention.translation import SubwordTokenizer
from keras_attention.translation import export
from keras_attention.translation import load_multi30k
from keras_attention.translation.lite import TFLITE_CONFIG_FILE
from keras_attention.translation.lite import VARIANTS
from keras_attention.translation.lite import tflite_filename
from keras_attention.translation.lite import tflite_files
from keras_attention.translation.model import build_translator
from keras_attention.translation.translator import MODEL_FILE
from keras_attention.translation.translator import SOURCE_VOCAB
from keras_attention.translation.translator import TARGET_VOCAB
from keras_attention.translation.translator import load_run

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "tflite_translate.py"
N_SENTENCES = 100  # ≥ 99 % identical outputs allows one near-tie flip
MIN_AGREEMENT = 0.99


def _load_example():
    return load_script("examples/tflite_translate.py")


def _before_end(tokens, end_id):
    """A row of output ids up to the first END (excluded)."""
    tokens = [int(t) for t in tokens]
    return tokens[: tokens.index(end_id)] if end_id in tokens else tokens


def _agreement(a, b):
    assert len(a) == len(b)
    return sum(x == y for x, y in zip(a, b, strict=True)) / len(a)


@pytest.fixture(scope="module")
def corpus():
    folder = multi30k_dir()
    if not (folder / "train.en.gz").exists():
        pytest.fail(f"Multi30k is not in {folder} (see tests/_data_paths.py)")
    return load_multi30k(("train", "val"), folder)


def _write_run(
    folder, corpus, attention, tie_embeddings=False, conditional=False, decoder_init="final"
):
    """A run folder as `translate_en_fr.py train` writes it, with random weights."""
    keras.utils.set_random_seed(0)
    train = corpus["train"]
    source = SubwordTokenizer.build(train.en[:2000], vocab_size=600, lower_case=True)
    target = SubwordTokenizer.build(train.fr[:2000], vocab_size=600, lower_case=True)
    model = build_translator(
        source.vocab_size,
        target.vocab_size,
        attention=attention,
        embedding_dim=16,
        units=32,
        dropout=0.0,
        tie_embeddings=tie_embeddings,
        seed=0,
        conditional=conditional,
        decoder_init=decoder_init,
    )
    folder.mkdir(parents=True)
    model.save(folder / MODEL_FILE)
    source.save(folder / SOURCE_VOCAB)
    target.save(folder / TARGET_VOCAB)
    config = {"attention": attention, "embedding_dim": 16, "units": 32}
    (folder / CONFIG_FILE).write_text(json.dumps(config))
    return folder


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, corpus):
    return _write_run(tmp_path_factory.mktemp("run") / "bahdanau", corpus, "bahdanau")


@pytest.fixture(scope="module")
def exported_and_report(tmp_path_factory, run_dir):
    """(export folder, manifest), and the lines the export reported."""
    out = tmp_path_factory.mktemp("export")
    # One request of N_SENTENCES: more than the default bound (MAX_BATCH, 64).
    lines = []
    manifest = export.export_run(run_dir, out, max_batch=N_SENTENCES, report=lines.append)
    return (out, manifest), lines


@pytest.fixture(scope="module")
def exported(exported_and_report):
    return exported_and_report[0]


@pytest.fixture(scope="module")
def translator(run_dir):
    return load_run(run_dir)[0]


@pytest.fixture(scope="module")
def sentences(corpus):
    return corpus["val"].en[:N_SENTENCES]


@pytest.fixture(scope="module")
def keras_outputs(translator, sentences):
    """Keras greedy search on the whole batch: ids before END, log-probs.

    The reference of the SavedModel, which decodes the same batch (same
    padding, same `max_length`).
    """
    greedy = tf.function(
        translator.greedy_graph, input_signature=[tf.TensorSpec([None, None], tf.int32)]
    )
    result = greedy(translator.tokenize_source(sentences))
    end = translator.target_tokenizer.end_id
    tokens = [_before_end(row, end) for row in result["tokens"].numpy()]
    return tokens, result["log_probs"].numpy()


def _keras_one_by_one(translator, sentences):
    """Keras greedy search one sentence at a time, as the TFLite model runs:
    the default `max_length` (2 S + 10) depends on the source length."""
    greedy = tf.function(
        translator.greedy_graph, input_signature=[tf.TensorSpec([1, None], tf.int32)]
    )
    end = translator.target_tokenizer.end_id
    return [
        _before_end(greedy(translator.tokenize_source([s]))["tokens"].numpy()[0], end)
        for s in sentences
    ]


@pytest.fixture(scope="module")
def keras_single_outputs(translator, sentences):
    return _keras_one_by_one(translator, sentences)


@pytest.fixture(scope="module")
def example():
    return _load_example()


def _lite(exported, example, variant="float32"):
    out, _ = exported
    return example.LiteTranslator(out / export.TFLITE_DIR, variant)


# ------------------------------------------------------------------- files


def test_the_report_has_a_line_per_model_with_its_final_path_and_size(exported_and_report):
    (out, manifest), lines = exported_and_report
    assert lines[0].startswith(f"SavedModel: {out / 'saved_model' / '1'} (")
    assert len(lines) == 1 + len(manifest["tflite"])
    for line, (variant, info) in zip(lines[1:], manifest["tflite"].items(), strict=True):
        path = out / info["path"]
        assert path.is_file()  # the final path, not the staging folder's
        assert line.startswith(f"TFLite {variant}: {path} ({info['bytes'] / 1e6:.2f} MB, ")
        assert line.endswith(" s)")


def test_export_writes_the_documented_files(exported, translator):
    out, manifest = exported
    assert (out / "saved_model" / "1" / "saved_model.pb").exists()
    assert (out / "saved_model" / "1" / "variables").is_dir()
    folder = out / export.TFLITE_DIR
    for variant in VARIANTS:
        assert (folder / f"translator_{variant}.tflite").stat().st_size > 0
    # what --help lists is what is written, no more, no less
    assert sorted(p.name for p in folder.iterdir()) == sorted(tflite_files())
    assert json.loads((out / export.MANIFEST_FILE).read_text()) == manifest
    config = json.loads((folder / TFLITE_CONFIG_FILE).read_text())
    assert config["reserved_tokens"] == ["[PAD]", "[UNK]", "[START]", "[END]"]
    assert (config["pad_id"], config["unk_id"], config["start_id"], config["end_id"]) == (
        0,
        1,
        2,
        3,
    )
    for side, tokenizer in (
        ("source", translator.source_tokenizer),
        ("target", translator.target_tokenizer),
    ):
        assert config[side]["lower_case"] is True
        assert config[side]["normalization"] == "NFKC"
        vocab = (folder / config[side]["vocab_file"]).read_text(encoding="utf-8")
        assert vocab.splitlines() == list(tokenizer.vocab)
    assert config["decode_state"]["recurrent"] == ["h"]
    assert set(config["decode_state"]["names"]) == {
        "h",
        "memory",
        "memory_mask",
        "processed_keys",
    }


EXPORT_JSON_KEYS = [
    "format_version",
    "run_dir",
    "attention",
    "exported",
    "tensorflow",
    "keras",
    "max_length",
    "source_length",
    "tflite_beam",
    "run",
    "saved_model",
    "tflite",
]
TRANSLATOR_JSON_KEYS = [
    "attention",
    "decode_state",
    "end_id",
    "format_version",
    "longer_sources",
    "max_bytes_per_word",
    "max_length",
    "max_length_rule",
    "max_output_length",
    "max_source_length",
    "models",
    "pad_id",
    "pre_tokenization",
    "reserved_tokens",
    "signatures",
    "source",
    "source_length",
    "source_length_rule",
    "source_vocabulary_size",
    "start_id",
    "suffix_indicator",
    "target",
    "target_vocabulary_size",
    "token_ids",
    "unk_id",
    "unknown_token",
]


def test_the_export_folder_keeps_its_layout_and_manifest_keys(exported):
    """The folder that web/, examples/tflite_translate.py and TensorFlow
    Serving read: its entries, file names and manifest keys, as they were
    before `export_folder` wrote it."""
    out, manifest = exported
    assert sorted(p.name for p in out.iterdir()) == ["export.json", "saved_model", "tflite"]
    assert sorted(p.name for p in (out / "saved_model").iterdir()) == ["1"]
    assert sorted(p.name for p in (out / "tflite").iterdir()) == [
        "source_vocab.txt",
        "target_vocab.txt",
        "translator.json",
        "translator_float16.tflite",
        "translator_float32.tflite",
        "translator_int8.tflite",
    ]
    assert list(manifest) == EXPORT_JSON_KEYS
    assert list(manifest["saved_model"]) == [
        "path",
        "signatures",
        "beam_width",
        "length_penalty",
        "max_batch",
    ]
    assert manifest["saved_model"]["path"] == "saved_model/1"
    assert {v: list(info) for v, info in manifest["tflite"].items()} == {
        v: ["path", "bytes"] for v in ("float32", "float16", "int8")
    }
    assert manifest["tflite"]["int8"]["path"] == "tflite/translator_int8.tflite"
    config = json.loads((out / "tflite" / "translator.json").read_text())
    assert sorted(config) == TRANSLATOR_JSON_KEYS
    assert sorted(config["signatures"]) == ["decode_step", "encode", "translate"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_tflite_model_has_builtin_operators_only(exported, variant):
    out, _ = exported
    ops = tflite_operators(out / export.TFLITE_DIR / tflite_filename(variant))
    custom = [name for name in ops if name.startswith("CUSTOM") or "Flex" in name]
    assert not custom, f"non-builtin operators: {custom}"
    # The weights are constants (no resource variable) and the loop is inside.
    assert not {"VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE"} & set(ops)
    assert "WHILE" in ops


# Operators that compute a shape at run time. In the greedy loop's body they made
# every later tensor dynamically shaped, and float16 `translate` about 1.2x as
# slow as float32 (docs/export.md).
RUN_TIME_SHAPE_OPERATORS = {"SHAPE", "BROADCAST_TO", "RANGE", "PACK", "FILL"}


@pytest.mark.parametrize("variant", ("float32", "float16"))
def test_greedy_loop_body_computes_no_shapes(exported, variant):
    out, _ = exported
    path = out / export.TFLITE_DIR / tflite_filename(variant)
    subgraphs = tflite_subgraph_operators(path)
    # The greedy body is the loop body that picks the best token: a top-1
    # (`TOPK_V2`; Keras' argmax on TensorFlow adds a BitwiseAnd, not builtin).
    bodies = {name: ops for name, ops in subgraphs.items() if "TOPK_V2" in ops}
    assert len(bodies) == 1, sorted(subgraphs)
    ((name, ops),) = bodies.items()
    assert "FULLY_CONNECTED" in ops and "SOFTMAX" in ops, (name, ops)
    found = RUN_TIME_SHAPE_OPERATORS & set(ops)
    assert not found, f"{name} computes shapes at run time: {sorted(found)}"
    # The per-subgraph listing adds up to the whole-model one.
    total = {}
    for counts in subgraphs.values():
        for op, n in counts.items():
            total[op] = total.get(op, 0) + n
    assert total == tflite_operators(path)


def test_operator_listing_flags_custom_operators(tmp_path):
    # A model with a Flex op, so that the builtin-only check can fail at all.
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def lower(text):
        return tf.strings.lower(text)

    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        [lower.get_concrete_function()], lower
    )
    converter.target_spec.supported_ops = [
        tf.lite.OpsSet.TFLITE_BUILTINS,
        tf.lite.OpsSet.SELECT_TF_OPS,
    ]
    ops = tflite_operators(converter.convert())
    assert "CUSTOM:FlexStringLower" in ops


# ------------------------------------------------------------- equivalence


def test_tflite_float32_gives_the_keras_greedy_output(
    exported, example, sentences, keras_single_outputs, translator
):
    lite = _lite(exported, example)
    lite.warm_up(max(len(lite.source.tokenize(s)) for s in sentences))  # as main() does
    ids = translator.tokenize_source(sentences).numpy()
    lite_tokens = []
    for row, sentence in zip(ids, sentences, strict=True):
        source = [int(i) for i in row if i]
        assert source == lite.source.tokenize(sentence)
        lite_tokens.append(lite.translate_ids(source)[0])
    assert _agreement(lite_tokens, keras_single_outputs) >= MIN_AGREEMENT


def test_warm_up_runs_every_signature_at_the_longest_source(exported, example):
    lite = _lite(exported, example)
    lite.warm_up(9)
    for signature in ("translate", "encode"):
        runner = lite.interpreter.get_signature_runner(signature)
        assert runner.get_input_details()["source_ids"]["shape"].tolist() == [1, 9]
    memory = lite.interpreter.get_signature_runner("decode_step").get_input_details()["memory"]
    assert memory["shape"].tolist()[:2] == [1, 9]
    tokens, _ = lite.translate_ids(lite.source.tokenize("A dog runs."))
    assert tokens == _lite(exported, example).translate_ids(lite.source.tokenize("A dog runs."))[0]


def test_tflite_first_step_logits_match_keras(exported, example, translator, sentences):
    lite = _lite(exported, example)
    start = translator.target_tokenizer.start_id

    @tf.function(input_signature=[tf.TensorSpec([1, None], tf.int32)])
    def first_step(source_ids):
        logits, weights, _ = translator.step(tf.constant([start]), translator.encode(source_ids))
        return logits, weights

    for sentence in sentences[:5]:
        source = lite.source.tokenize(sentence)
        logits, weights, _ = lite.decode_step(start, lite.encode(source))
        expected_logits, expected_weights = first_step(tf.constant([source], tf.int32))
        np.testing.assert_allclose(logits, expected_logits.numpy()[0], atol=1e-4, rtol=0)
        np.testing.assert_allclose(weights, expected_weights.numpy()[0], atol=1e-5, rtol=0)


def test_app_loop_over_decode_step_equals_translate_signature(exported, example, sentences):
    lite = _lite(exported, example)
    for sentence in sentences[:10]:
        ids = lite.source.tokenize(sentence)
        tokens, attention = lite.translate_ids(ids)
        loop_tokens, loop_attention = lite.translate_ids_app_loop(ids)
        assert loop_tokens == tokens
        np.testing.assert_allclose(loop_attention, attention, atol=1e-5)


def test_tied_conditional_translator_exports_with_builtin_operators_and_keras_outputs(
    tmp_path, corpus, example, sentences
):
    # The presets tie the output layer to the target embedding: one matrix
    # read by a gather and by the logits' matmul inside the loop. Their
    # decoder is the conditional one: two cells in the loop. Its first state
    # here reads the masked mean of the memory (decoder_init="mean").
    run = _write_run(
        tmp_path / "tied",
        corpus,
        "bahdanau",
        tie_embeddings=True,
        conditional=True,
        decoder_init="mean",
    )
    export.export_run(run, tmp_path / "out", variants=("float32",), saved_model=False)
    path = tmp_path / "out" / export.TFLITE_DIR / tflite_filename("float32")
    ops = tflite_operators(path)
    assert not [name for name in ops if name.startswith("CUSTOM") or "Flex" in name]
    assert not {"VAR_HANDLE", "READ_VARIABLE"} & set(ops)
    translator = load_run(run)[0]
    lite = example.LiteTranslator(tmp_path / "out" / export.TFLITE_DIR, "float32")
    start = translator.target_tokenizer.start_id
    for sentence in sentences[:3]:
        source = lite.source.tokenize(sentence)
        logits, _, _ = lite.decode_step(start, lite.encode(source))
        expected, _, _ = translator.step(
            tf.constant([start]), translator.encode(tf.constant([source], tf.int32))
        )
        np.testing.assert_allclose(logits, expected.numpy()[0], atol=1e-4, rtol=0)
    assert (
        _agreement(
            [lite.translate_ids(lite.source.tokenize(s))[0] for s in sentences[:5]],
            _keras_one_by_one(translator, sentences[:5]),
        )
        >= MIN_AGREEMENT
    )


@pytest.mark.parametrize("variant", ["float16", "int8"])
def test_quantized_variants_run_and_are_smaller(exported, example, sentences, variant):
    out, manifest = exported
    sizes = {v: info["bytes"] for v, info in manifest["tflite"].items()}
    assert sizes[variant] < sizes["float32"]
    if variant == "int8":
        assert sizes["int8"] < sizes["float16"]
    lite = _lite(exported, example, variant)
    vocab_size = len(lite.target.vocab)
    for sentence in sentences[:5]:
        source = lite.source.tokenize(sentence)
        tokens, attention = lite.translate_ids(source)
        assert all(0 <= t < vocab_size for t in tokens)
        assert attention.shape == (len(tokens), len(source))
        np.testing.assert_allclose(attention.sum(-1), 1.0, atol=1e-3)


_SAVED_MODEL_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import tensorflow as tf
    import tensorflow_text  # registers the tokenizer ops

    model = tf.saved_model.load(sys.argv[1])
    sentences = tf.constant(json.loads(sys.argv[2]))
    greedy = model.signatures["serving_default"](sentences=sentences)
    beam = model.signatures["beam"](sentences=sentences[:3])
    try:  # one sentence more than the export's max_batch
        model.signatures["serving_default"](sentences=tf.concat([sentences, [""]], 0))
        refused = None
    except tf.errors.InvalidArgumentError as error:
        refused = error.message
    assert "keras_attention" not in sys.modules
    print(json.dumps({
        "signatures": sorted(model.signatures),
        "translation": [t.decode("utf-8") for t in greedy["translation"].numpy()],
        "tokens": greedy["tokens"].numpy().tolist(),
        "log_probs": greedy["log_probs"].numpy().tolist(),
        "attention_shape": list(greedy["attention"].shape),
        "beam_translation": [t.decode("utf-8") for t in beam["translation"].numpy()],
        "beam_scores": beam["scores"].numpy().tolist(),
        "refused": refused,
    }))
    """
)


def test_saved_model_translates_without_keras_attention(
    exported, sentences, keras_outputs, translator, tmp_path
):
    out, _ = exported
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    process = subprocess.run(
        [
            sys.executable,
            "-c",
            _SAVED_MODEL_SCRIPT,
            str(out / "saved_model" / "1"),
            json.dumps(list(sentences)),
        ],
        cwd=tmp_path,  # not the repository, whose package folder would be importable
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert process.returncode == 0, process.stderr[-3000:]
    result = json.loads(process.stdout.strip().splitlines()[-1])
    assert result["signatures"] == ["beam", "serving_default"]
    end = translator.target_tokenizer.end_id
    tokens = [_before_end(row, end) for row in result["tokens"]]
    keras_tokens, keras_log_probs = keras_outputs
    assert _agreement(tokens, keras_tokens) >= MIN_AGREEMENT
    same = [i for i in range(len(tokens)) if tokens[i] == keras_tokens[i]]
    np.testing.assert_allclose(
        np.array(result["log_probs"])[same], keras_log_probs[same], rtol=1e-5, atol=1e-4
    )
    # The text output is the target tokenizer's detokenization of the ids.
    expected = translator.detokenize(np.array(result["tokens"], np.int32))
    assert result["translation"] == expected
    assert result["attention_shape"][0] == len(sentences)
    assert len(result["beam_translation"]) == 3
    assert all(np.isfinite(result["beam_scores"]))
    # The bound on a request's batch holds in the loaded SavedModel.
    assert f"sentences, more than max_batch={N_SENTENCES}: split it" in result["refused"]


# ---------------------------------------------------------- the example app


@pytest.mark.parametrize("side", ["source", "target"])
def test_example_tokenizer_gives_the_subword_tokenizer_ids(
    exported, example, corpus, translator, side
):
    out, _ = exported
    mine = example.WordpieceTokenizer.from_export(out / export.TFLITE_DIR, side)
    if side == "source":
        tokenizer, lines = translator.source_tokenizer, corpus["val"].en[:300]
    else:
        tokenizer, lines = translator.target_tokenizer, corpus["val"].fr[:300]
    lines = list(lines) + [
        "",
        "  \u00a0 ",
        "L’ÉTÉ, à 5$ + 3^2 «oui» — ΟΔΟΣ İstanbul ＡＢＣ ﬁn 日本",
        "a" * 120,
    ]
    expected = tokenizer.tokenize(tf.constant(lines)).to_list()
    assert [mine.tokenize(line) for line in lines] == expected


def test_example_detokenizer_matches_subword_tokenizer(exported, example, translator):
    out, _ = exported
    mine = example.WordpieceTokenizer.from_export(out / export.TFLITE_DIR, "target")
    tokenizer = translator.target_tokenizer
    ids = np.random.default_rng(0).integers(0, tokenizer.vocab_size + 3, (200, 12))
    expected = [t.decode("utf-8") for t in tokenizer.detokenize(ids.astype(np.int32)).numpy()]
    assert [mine.detokenize(row) for row in ids] == expected


def test_example_runs_without_tensorflow(exported, tmp_path):
    out, _ = exported
    code = textwrap.dedent(
        f"""
        import runpy, sys
        sys.argv = ["tflite_translate.py", {str(out / "tflite")!r}, "A dog runs.", "Hello!"]
        runpy.run_path({str(EXAMPLE)!r}, run_name="__main__")
        heavy = {{"tensorflow", "keras", "tensorflow_text", "keras_attention"}}
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in heavy)
        assert not loaded, loaded
        """
    )
    process = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert process.returncode == 0, process.stderr[-3000:]
    assert len(process.stdout.strip().splitlines()) == 2


# ------------------------------------------------------------------ errors


def test_incomplete_run_folder_fails_with_the_clear_error(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match="incomplete: missing model.keras"):
        export.export_run(tmp_path / "run", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_cli_reports_an_incomplete_run_folder(tmp_path, capsys):
    assert export.main([str(tmp_path), str(tmp_path / "out")]) == 2
    assert "is incomplete: missing model.keras" in capsys.readouterr().err


def test_cli_help_describes_the_files(capsys):
    with pytest.raises(SystemExit) as info:
        export.main(["--help"])
    assert info.value.code == 0
    text = capsys.readouterr().out
    assert text.startswith("usage: python -m keras_attention.translation.export")
    for name in tflite_files():
        assert f"\n  {name} " in text, name
    assert "translator_int8.tflite" in text


def test_unknown_variant_is_rejected(tmp_path):
    with pytest.raises(ValueError, match="Expected a subset of"):
        export.export_run(tmp_path, tmp_path / "out", variants=("int4",))


# ------------------------------------------------------ the other decoders


@pytest.mark.slow
@pytest.mark.parametrize("attention", ["luong-general", "none"])
def test_other_decoders_convert_and_match_keras(tmp_path, corpus, example, attention):
    run = _write_run(tmp_path / attention, corpus, attention)
    translator = load_run(run)[0]
    export.export_run(run, tmp_path / "out", variants=("float32",), saved_model=False)
    lite = example.LiteTranslator(tmp_path / "out" / export.TFLITE_DIR)
    ops = tflite_operators(tmp_path / "out" / "tflite" / "translator_float32.tflite")
    assert not [name for name in ops if name.startswith("CUSTOM")]
    sentences = corpus["val"].en[:20]
    expected = _keras_one_by_one(translator, sentences)
    got = []
    for sentence in sentences:
        source = lite.source.tokenize(sentence)
        got.append(lite.translate_ids(source)[0])
        assert lite.translate_ids_app_loop(source)[0] == lite.translate_ids(source)[0]
    assert _agreement(got, expected) >= 0.95  # 1 flip in 20
