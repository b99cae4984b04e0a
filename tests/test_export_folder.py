"""`keras_attention.export.folder.export_folder`: a SavedModel and TFLite
variants in one folder, with the caller's manifest, written whole or not at
all, and never over a folder that is not an export."""

import json
import re

import numpy as np
import pytest
import tensorflow as tf
from ai_edge_litert.interpreter import Interpreter
from test_seq2seq_generator import LENGTHS
from test_seq2seq_generator import case

from keras_attention.export import export_folder
from keras_attention.export import folder as export_folder_module
from keras_attention.export.folder import check_export_folder

pytestmark = pytest.mark.tensorflow

NAME = "bahdanau_gru"
APP = {"task": "a test", "vocabulary": ["<pad>", "a", "b"]}


def files(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """(the case, its export folder, the returned manifest), float32 and int8;
    the lines it reported are in `REPORTED`."""
    c = case(NAME)
    out = tmp_path_factory.mktemp("folder") / "export"
    manifest = export_folder(
        c.generator,
        out,
        "demo",
        variants=("float32", "int8"),
        beam_width=2,
        manifest=APP,
        report=REPORTED.append,
    )
    return c, out, manifest


REPORTED = []


def test_the_folder_holds_the_saved_model_the_variants_and_the_manifest(exported):
    _, out, manifest = exported
    tflite = [f for f in files(out) if f.startswith("tflite/")]
    assert tflite == [
        "tflite/demo.json",
        "tflite/demo_float32.json",
        "tflite/demo_float32.tflite",
        "tflite/demo_int8.json",
        "tflite/demo_int8.tflite",
    ]
    assert (out / "saved_model" / "saved_model.pb").is_file()
    assert json.loads((out / "tflite" / "demo.json").read_text()) == manifest


def test_the_report_has_a_line_per_model_with_its_final_path_and_size(exported):
    _, out, _ = exported
    pattern = r"(SavedModel|TFLite float32|TFLite int8): (\S+) \((?:([0-9.]+) MB, )?[0-9]+ s\)"
    lines = [re.fullmatch(pattern, line) for line in REPORTED]
    assert all(lines), REPORTED
    assert [m[1] for m in lines] == ["SavedModel", "TFLite float32", "TFLite int8"]
    assert [m[2] for m in lines] == [
        str(out / "saved_model"),
        str(out / "tflite" / "demo_float32.tflite"),
        str(out / "tflite" / "demo_int8.tflite"),
    ]
    for m in lines[1:]:  # the sizes of the files as they lie in the final folder
        size = (out / "tflite" / m[2].split("/")[-1]).stat().st_size / 1e6
        assert m[3] == f"{size:.2f}"


def test_the_manifest_is_the_callers_plus_the_models_and_their_signatures(exported):
    c, out, manifest = exported
    own = json.loads((out / "tflite" / "demo_float32.json").read_text())
    assert {k: manifest[k] for k in APP} == APP
    assert manifest["models"] == {"float32": "demo_float32.tflite", "int8": "demo_int8.tflite"}
    assert manifest["saved_model"] == "saved_model"
    assert (manifest["beam_width"], manifest["source_length"]) == (2, None)
    assert manifest["signatures"] == own["signatures"]
    assert {"generate", "generate_beam"} <= set(manifest["signatures"])
    assert manifest["max_source_length"] == c.generator.max_source_length
    assert manifest["max_output_length"] == c.generator.max_output_length
    # The ids and sizes an app checks its input against, the generator's own.
    assert (manifest["pad_id"], manifest["start_id"], manifest["end_id"]) == (
        0,
        c.generator.start_id,
        c.generator.end_id,
    )
    assert manifest["target_vocab_size"] == c.generator.target_vocabulary_size
    assert manifest["source_vocab_size"] == c.generator.source_vocabulary_size
    assert own["start_id"] == manifest["start_id"] and own["end_id"] == manifest["end_id"]


def test_the_models_decode_as_the_generator(exported):
    c, out, manifest = exported
    generate = Interpreter(
        model_path=str(out / "tflite" / manifest["models"]["float32"])
    ).get_signature_runner("generate")
    served = tf.saved_model.load(str(out / "saved_model")).signatures["serving_default"]
    for row in range(len(LENGTHS)):
        source = np.asarray(c.single(row))
        keras_out = c.generator.greedy(source)
        n = int(np.asarray(keras_out["lengths"])[0])
        expected = np.asarray(keras_out["tokens"])[0, :n]
        lite = generate(source=source)
        np.testing.assert_array_equal(lite["tokens"][0, : int(lite["lengths"][0])], expected)
        saved = served(source=tf.constant(source))
        np.testing.assert_array_equal(saved["tokens"].numpy()[0, :n], expected)


def test_a_new_export_replaces_an_earlier_one_whole(exported, tmp_path):
    c, earlier, _ = exported
    out = tmp_path / "export"
    export_folder(c.generator, out, "demo", variants=("float32",), manifest=APP)
    export_folder(c.generator, out, "demo", variants=(), manifest=APP)
    assert [f for f in files(out) if f.startswith("tflite/")] == ["tflite/demo.json"]
    assert json.loads((out / "tflite" / "demo.json").read_text())["models"] == {}
    assert "signatures" not in json.loads((out / "tflite" / "demo.json").read_text())
    assert files(earlier)  # another folder: untouched


def test_a_failed_export_leaves_the_earlier_one(exported, tmp_path, monkeypatch):
    c, _, _ = exported
    out = tmp_path / "export"
    export_folder(c.generator, out, "demo", variants=(), manifest=APP)
    before = {f: (out / f).read_bytes() for f in files(out)}

    def fails(*args, **kwargs):
        raise RuntimeError("converter failed")

    monkeypatch.setattr(export_folder_module, "write_tflite", fails)
    with pytest.raises(RuntimeError, match="converter failed"):
        export_folder(c.generator, out, "demo", variants=("float32",), manifest=APP)
    assert {f: (out / f).read_bytes() for f in files(out)} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export"]  # no staging left


def test_a_folder_holding_other_files_is_refused_unchanged(exported, tmp_path):
    c, _, _ = exported
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.txt").write_text("mine\n")
    (project / "tflite").mkdir()
    with pytest.raises(
        ValueError,
        match=rf"^The export folder {project} holds notes\.txt, which an export never writes; ",
    ):
        export_folder(c.generator, project, "demo", variants=())
    assert files(project) == ["notes.txt"]
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match=r"^The export folder .*file is a file\.$"):
        check_export_folder(tmp_path / "file")


@pytest.mark.parametrize(
    "options, message",
    [
        ({"variants": ("float64",)}, "Expected a subset of ('float32', 'float16', 'int8')"),
        ({"name": "sub/demo"}, "Invalid value for argument `name`. Expected a file name"),
        ({"name": ""}, "Invalid value for argument `name`. Expected a file name"),
        ({"manifest": {"models": {}, "task": "x"}}, "The keys ['models'] are written by"),
        ({"beam_width": 0}, "beam_width"),
        ({"source_length": 0}, "source_length"),
    ],
)
def test_bad_arguments_are_refused_before_anything_is_written(exported, tmp_path, options, message):
    c, _, _ = exported
    options = {"name": "demo", "variants": (), **options}
    out = tmp_path / "export"
    with pytest.raises(ValueError, match=re.escape(message)):
        export_folder(c.generator, out, **options)
    assert not out.exists()
