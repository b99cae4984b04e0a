"""`export_folder`: a generator's SavedModel and TFLite models in one folder,
with the manifest an app reads.

    OUT/
      saved_model/                   `export_saved_model`: greedy and beam signatures
      tflite/NAME_VARIANT.tflite     `export_tflite`, one per variant (float32, float16, int8)
      tflite/NAME_VARIANT.json       that model's own manifest
      tflite/NAME.json               the caller's manifest, with the models and their signatures

The folder is written whole or not at all (`atomic.replaced_folder`): a
process killed at any instant leaves the earlier export or the new one. A
folder holding anything else than an export's files is refused, unchanged.
"""

import time
from pathlib import Path

from keras_attention.arguments.validation import check_positive_int
from keras_attention.export.backend import check_tensorflow_backend
from keras_attention.export.saved_model import export_saved_model
from keras_attention.export.tflite import export_tflite
from keras_attention.files.atomic import replaced_folder
from keras_attention.files.atomic import write_json
from keras_attention.generation.search_defaults import BEAM_WIDTH
from keras_attention.generation.search_defaults import LENGTH_PENALTY
from keras_attention.generation.search_defaults import check_beam_width

SAVED_MODEL_DIR = "saved_model"
TFLITE_DIR = "tflite"
# The TFLite variants: float32 weights, float16 weights, dynamic-range int8.
VARIANTS = ("float32", "float16", "int8")
# The keys of NAME.json that `export_folder` writes; a caller's manifest
# holds none of them.
WRITTEN_KEYS = (
    "beam_width",
    "length_penalty",
    "source_length",
    "models",
    "saved_model",
    "signatures",
    "max_source_length",
    "max_output_length",
    "pad_id",
    "start_id",
    "end_id",
    "source_vocab_size",
    "target_vocab_size",
)


def check_variants(variants):
    """`variants` as a tuple; `ValueError` unless it is a subset of `VARIANTS`.

    Args:
        variants: an iterable of variant names.
    """
    variants = tuple(variants)
    if any(v not in VARIANTS for v in variants):
        raise ValueError(
            f"Invalid value for argument `variants`. Expected a subset of {VARIANTS}. "
            f"Received: variants={variants!r}"
        )
    return variants


def check_export_folder(out_dir, names=(SAVED_MODEL_DIR, TFLITE_DIR)):
    """Raises `ValueError` unless `out_dir` is missing, empty or an export
    (it holds only `names`): an export replaces the folder whole, so it must
    hold nothing else.

    Args:
        out_dir: the folder an export is about to replace.
        names: the entries an export writes there.
    """
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise ValueError(f"The export folder {out_dir} is a file.")
    if not out_dir.exists():
        return
    foreign = sorted(p.name for p in out_dir.iterdir() if p.name not in set(names))
    if foreign:
        raise ValueError(
            f"The export folder {out_dir} holds {', '.join(foreign[:5])}"
            f"{' ...' if len(foreign) > 5 else ''}, which an export never writes; an "
            "export replaces its folder whole. Nothing was changed. Export into a new "
            "or empty folder, or an earlier export."
        )


def export_folder(
    generator,
    out_dir,
    name,
    variants=VARIANTS,
    beam_width=BEAM_WIDTH,
    length_penalty=LENGTH_PENALTY,
    source_length=None,
    manifest=None,
    report=None,
):
    """Exports a generator as a SavedModel and TFLite variants into `out_dir`.

    Writes `saved_model/` (`export_saved_model`), `tflite/NAME_VARIANT.tflite`
    and its `.json` (`export_tflite`, with `generate_beam`) for each variant,
    and `tflite/NAME.json`: `manifest` plus `beam_width`, `length_penalty`,
    `source_length`, `models` ({variant: file name}), `saved_model` (its
    folder, relative to `out_dir`), the generator's `pad_id` (0),
    `start_id`, `end_id`, `source_vocab_size` and `target_vocab_size` (None
    when unknown) and, when there is a variant, the TFLite `signatures`,
    `max_source_length` and `max_output_length`.

    Args:
        generator: a `Seq2SeqGenerator` (or an `EnsembleGenerator`).
        out_dir: the folder: new, empty or an earlier export (only
            `saved_model/` and `tflite/`), which is replaced whole.
        name: the file names' stem, e.g. "g2p".
        variants: a subset of `VARIANTS`; empty for the SavedModel alone.
        beam_width: the beam signatures' width.
        length_penalty: their GNMT length penalty.
        source_length: None (any length) or a static TFLite source length N
            (LiteRT.js needs one); the SavedModel keeps a dynamic one.
        manifest: a dict of what an app needs besides (vocabularies, ids,
            how to prepare the input), none of whose keys is in
            `WRITTEN_KEYS`.
        report: None (silent), or a function called with one line as each
            model is written (e.g. `print`: an export takes a minute or
            more): "SavedModel: OUT/saved_model (12 s)", then
            "TFLite VARIANT: OUT/tflite/FILE (1.23 MB, 20 s)" each. The
            folder appears at OUT when the last is written.

    Returns:
        The manifest written to `tflite/NAME.json`.

    Raises:
        ValueError: an unknown variant, a `name` with a folder in it, a
            `manifest` holding a key of `WRITTEN_KEYS`, a `beam_width` or
            `source_length` out of bounds, or an `out_dir` that holds
            something else than an export (named; nothing is changed).
    """
    check_tensorflow_backend("The export of a folder")
    variants = check_variants(variants)
    if not name or Path(name).name != name or name in (".", ".."):
        raise ValueError(
            "Invalid value for argument `name`. Expected a file name without a folder, "
            f"e.g. 'g2p'. Received: name={name!r}"
        )
    manifest = dict(manifest or {})
    taken = sorted(set(manifest) & set(WRITTEN_KEYS))
    if taken:
        raise ValueError(
            f"Invalid value for argument `manifest`. The keys {taken} are written by "
            f"the export. Received: manifest with keys {sorted(manifest)}"
        )
    check_beam_width(beam_width, getattr(generator, "target_vocabulary_size", None))
    check_positive_int("source_length", source_length, allow_none=True)
    out_dir = Path(out_dir)
    check_export_folder(out_dir)
    manifest.update(beam_width=beam_width, length_penalty=length_penalty)
    manifest.update(source_length=source_length, models={}, saved_model=SAVED_MODEL_DIR)
    manifest.update(pad_id=0, start_id=int(generator.start_id), end_id=int(generator.end_id))
    for key in ("source", "target"):  # None for sources of features
        size = getattr(generator, f"{key}_vocabulary_size", None)
        manifest[f"{key}_vocab_size"] = None if size is None else int(size)
    report = report or (lambda line: None)
    with replaced_folder(out_dir) as staging:
        started = time.perf_counter()
        export_saved_model(
            generator,
            staging / SAVED_MODEL_DIR,
            beam_width=beam_width,
            length_penalty=length_penalty,
        )
        report(written_line("SavedModel", out_dir / SAVED_MODEL_DIR, time.perf_counter() - started))
        (staging / TFLITE_DIR).mkdir()
        for variant in variants:
            started, file = time.perf_counter(), f"{name}_{variant}.tflite"
            written = export_tflite(
                generator,
                staging / TFLITE_DIR / file,
                quantization=None if variant == "float32" else variant,
                beam_width=beam_width,
                length_penalty=length_penalty,
                source_length=source_length,
            )
            manifest["models"][variant] = file
            manifest["signatures"] = written["signatures"]
            manifest["max_source_length"] = written.get("max_source_length")
            manifest["max_output_length"] = written.get("max_output_length")
            size = (staging / TFLITE_DIR / file).stat().st_size
            seconds = time.perf_counter() - started
            report(written_line(f"TFLite {variant}", out_dir / TFLITE_DIR / file, seconds, size))
        write_json(staging / TFLITE_DIR / f"{name}.json", manifest)
    return manifest


def written_line(what, path, seconds, size=None):
    """The line an export's `report` gets for one model written, at its
    final path: "SavedModel: PATH (12 s)", "TFLite int8: PATH (1.23 MB, 20 s)"
    (`size` in bytes)."""
    size = "" if size is None else f"{size / 1e6:.2f} MB, "
    return f"{what}: {path} ({size}{seconds:.0f} s)"
