"""`export_folder`: a generator's SavedModel and TFLite models in one folder,
with the manifest an app reads.

    OUT/
      saved_model/                   `export_saved_model`: greedy and beam signatures
      tflite/NAME_VARIANT.tflite     one per variant (float32, float16, int8), as `export_tflite`
      tflite/NAME_VARIANT.json       that model's own manifest
      tflite/NAME.json               the caller's manifest, with the models and their signatures

The folder is written whole or not at all (`atomic.replaced_folder`): a
process killed at any instant leaves the earlier export or the new one. A
folder holding anything else than an export's files is refused, unchanged.

`FolderFiles` is the hook for a caller's own files: the translator's export
(`keras_attention.translation.export`) writes its folder through
`export_folder` with a text-in SavedModel, its vocabularies and its manifests.
"""

import os
import time
from pathlib import Path

from keras_attention.arguments.validation import check_positive_int
from keras_attention.export.backend import check_tensorflow_backend
from keras_attention.export.saved_model import export_saved_model
from keras_attention.export.tflite import VARIANTS
from keras_attention.export.tflite import LiteGenerator
from keras_attention.export.tflite import write_model_manifest
from keras_attention.export.tflite import write_tflite
from keras_attention.files.atomic import replaced_folder
from keras_attention.files.atomic import write_json
from keras_attention.generation.search_defaults import BEAM_WIDTH
from keras_attention.generation.search_defaults import LENGTH_PENALTY
from keras_attention.generation.search_defaults import check_beam_width
from keras_attention.generation.search_defaults import check_max_length

SAVED_MODEL_DIR = "saved_model"
TFLITE_DIR = "tflite"
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
    hold nothing else. No link is followed: a folder that is a symbolic link,
    or one whose `names` are, is refused (an export writes no link, and would
    otherwise carry the files of the link's target into the new export).

    Args:
        out_dir: the folder an export is about to replace.
        names: the entries an export writes there.
    """
    out_dir = Path(out_dir)
    if out_dir.is_symlink():
        raise ValueError(_link_message(out_dir, "The export folder"))
    if out_dir.exists() and not out_dir.is_dir():
        raise ValueError(f"The export folder {out_dir} is a file.")
    if not out_dir.exists():
        return
    for name in names:
        if (out_dir / name).is_symlink():
            raise ValueError(_link_message(out_dir / name, "In the export folder,"))
    foreign = sorted(p.name for p in out_dir.iterdir() if p.name not in set(names))
    if foreign:
        raise ValueError(
            f"The export folder {out_dir} holds {', '.join(foreign[:5])}"
            f"{' ...' if len(foreign) > 5 else ''}, which an export never writes; an "
            "export replaces its folder whole. Nothing was changed. Export into a new "
            "or empty folder, or an earlier export."
        )


def _link_message(path, what):
    return (
        f"{what} {path} is a symbolic link (to {os.readlink(path)}); an export replaces "
        "its folder whole and never writes through a link. Nothing was changed. Export "
        "into a real folder (the link's target, or a new one)."
    )


class FolderFiles:
    """What `export_folder` writes where: the generic layout, and the hook for
    a caller's own files.

    `export_folder` writes the SavedModel, converts the TFLite variants of one
    `LiteGenerator` (traced once for all of them) and writes `tflite/NAME.json`;
    it asks this object each time where a file goes and what it holds. This
    class gives the layout of the module docstring. A caller whose folder
    holds files of its own subclasses it and passes an instance as `files`:
    the translator's export (`keras_attention.translation.export.RunFiles`)
    writes its text-in SavedModel in `saved_model/VERSION`, no manifest per
    model, its vocabularies and `translator.json` beside the models, and
    `export.json` at the top.

    Attributes:
        entries: the names directly under the folder that an export writes;
            a folder holding anything else is refused (`check_export_folder`).
        model_manifests: write each model's own manifest,
            `tflite/NAME_VARIANT.json` (`tflite.write_model_manifest`).
    """

    entries = (SAVED_MODEL_DIR, TFLITE_DIR)
    model_manifests = True

    def kept(self, out_dir):
        """The paths of an earlier export in `out_dir` (relative to it) that
        the new one keeps when it writes none of that name: none."""
        return []

    def write_saved_model(self, generator, folder, **search):
        """Writes the SavedModel into `folder` (the folder being written);
        returns its path relative to `folder`, or None for no SavedModel.

        Args:
            generator: the generator of `export_folder`.
            folder: the new folder's temporary copy.
            **search: `max_length`, `beam_width` and `length_penalty`.
        """
        export_saved_model(generator, folder / SAVED_MODEL_DIR, **search)
        return SAVED_MODEL_DIR

    def lite_generator(self, generator, **options):
        """The `LiteGenerator` every TFLite variant is converted from.

        Args:
            generator: the generator of `export_folder`.
            **options: `max_length`, `beam_width`, `length_penalty` and
                `source_length`.
        """
        return LiteGenerator(generator, **options)

    def write_files(self, folder, manifest, lite):
        """Writes the caller's own files into `folder` once the models are
        written; returns the dict to write to `tflite/NAME.json`, or None
        for no such file.

        Args:
            folder: the new folder's temporary copy.
            manifest: `export_folder`'s manifest of what it wrote (the
                caller's `manifest` with `WRITTEN_KEYS`).
            lite: the `LiteGenerator` of the models; None without variants.
        """
        return manifest


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
    max_length=None,
    files=None,
):
    """Exports a generator as a SavedModel and TFLite variants into `out_dir`.

    Writes `saved_model/` (`export_saved_model`), `tflite/NAME_VARIANT.tflite`
    and its `.json` (`export_tflite`, with `generate_beam`) for each variant,
    and `tflite/NAME.json`: `manifest` plus `beam_width`, `length_penalty`,
    `source_length`, `models` ({variant: file name}), `saved_model` (its
    folder, relative to `out_dir`), the generator's `pad_id` (0),
    `start_id`, `end_id`, `source_vocab_size` and `target_vocab_size` (None
    when unknown) and, when there is a variant, the TFLite `signatures`,
    `max_source_length` and `max_output_length`. The variants are converted
    from one `LiteGenerator`, traced once.

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
        max_length: the most output tokens, END included, of every search;
            None for min(2·S + 10, generator.max_output_length).
        files: None (the layout above), or a `FolderFiles` whose methods say
            where the SavedModel goes and what it serves, how the TFLite
            functions are traced, and which files of its own the caller adds
            (the translator's export).

    Returns:
        The manifest written to `tflite/NAME.json` (the one `files` returns).

    Raises:
        ValueError: an unknown variant, a `name` with a folder in it, a
            `manifest` holding a key of `WRITTEN_KEYS`, a `beam_width`,
            `max_length` or `source_length` out of bounds, or an `out_dir`
            that holds something else than an export (named; nothing is
            changed).
    """
    check_tensorflow_backend("The export of a folder")
    files = files or FolderFiles()
    variants = check_variants(variants)
    manifest = _checked_manifest(name, manifest)
    check_beam_width(beam_width, getattr(generator, "target_vocabulary_size", None))
    max_length = check_max_length(max_length)
    check_positive_int("source_length", source_length, allow_none=True)
    out_dir = Path(out_dir)
    check_export_folder(out_dir, files.entries)
    manifest.update(beam_width=beam_width, length_penalty=length_penalty)
    manifest.update(source_length=source_length, models={}, saved_model=None)
    manifest.update(pad_id=0, start_id=int(generator.start_id), end_id=int(generator.end_id))
    for key in ("source", "target"):  # None for sources of features
        size = getattr(generator, f"{key}_vocabulary_size", None)
        manifest[f"{key}_vocab_size"] = None if size is None else int(size)
    search = {"max_length": max_length, "beam_width": beam_width, "length_penalty": length_penalty}
    report = report or (lambda line: None)
    return _write_folder(
        generator, files, out_dir, name, variants, source_length, search, manifest, report
    )


def _write_folder(
    generator, files, out_dir, name, variants, source_length, search, manifest, report
):
    """The folder of `export_folder`, written whole or not at all, with its
    checked arguments; returns the manifest written."""
    with replaced_folder(out_dir, keep=files.kept(out_dir)) as staging:
        started = time.perf_counter()
        manifest["saved_model"] = files.write_saved_model(generator, staging, **search)
        if manifest["saved_model"] is not None:
            seconds = time.perf_counter() - started
            report(written_line("SavedModel", out_dir / manifest["saved_model"], seconds))
        lite = None
        for variant in variants:
            started, file = time.perf_counter(), f"{name}_{variant}.tflite"
            if lite is None:  # traced once, for every variant (its time is the first's)
                lite = files.lite_generator(generator, source_length=source_length, **search)
            path = write_tflite(lite, staging / TFLITE_DIR / file, variant)
            if files.model_manifests:
                write_model_manifest(lite, path, variant)
            manifest["models"][variant] = file
            seconds = time.perf_counter() - started
            size = path.stat().st_size
            report(written_line(f"TFLite {variant}", out_dir / TFLITE_DIR / file, seconds, size))
        if lite is not None:
            written = lite.manifest()
            for key in ("signatures", "max_source_length", "max_output_length"):
                manifest[key] = written.get(key)
        manifest = files.write_files(staging, manifest, lite)
        if manifest is not None:
            (staging / TFLITE_DIR).mkdir(exist_ok=True)
            write_json(staging / TFLITE_DIR / f"{name}.json", manifest)
    return manifest


def _checked_manifest(name, manifest):
    """A copy of the caller's `manifest`, once `name` is a file name and no
    key of the manifest is one the export writes (`WRITTEN_KEYS`)."""
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
    return manifest


def written_line(what, path, seconds, size=None):
    """The line an export's `report` gets for one model written, at its
    final path: "SavedModel: PATH (12 s)", "TFLite int8: PATH (1.23 MB, 20 s)"
    (`size` in bytes)."""
    size = "" if size is None else f"{size / 1e6:.2f} MB, "
    return f"{what}: {path} ({size}{seconds:.0f} s)"
