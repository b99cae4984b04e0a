"""Exports a training run: a SavedModel for servers, builtin-only TFLite for phones.

    python -m keras_attention.translation.export RUN_DIR OUT_DIR

writes

    OUT_DIR/
      export.json                     what was exported, from which run, with what settings
      saved_model/1/                  TensorFlow Serving layout (model name / version)
      tflite/                         the TFLite models, vocabularies and translator.json
                                      (listed at the end of --help)

The SavedModel is text in, text out (`serving_default`: greedy, `beam`): a
batch of English sentences in, French ones out, tokenizers inside the graph.
A sentence longer than `max_source_length` source tokens (512) is truncated
to it, and the output `truncated` says so; an empty or blank sentence gives an
empty translation. Loading needs TensorFlow and `import tensorflow_text`, not
keras_attention.

The TFLite models are ids in, ids out, builtin ops only, batch 1:
`translate` (the greedy loop inside the model), `encode` and `decode_step`
(for an app's own loop). Tokenization happens in the app, from the vocabulary
files and `translator.json` (`examples/tflite_translate.py` is a pure-Python
version).

The folder is the generic export's (`keras_attention.export.export_folder`:
the TFLite conversion, the report, written whole or not at all), with the
translator's own files through its hook (`RunFiles`): the text-in SavedModel
(`keras_attention.translation.serving`), the vocabularies and
`translator.json` (`keras_attention.translation.lite`), and `export.json`.
The command line is the library's export options
(`keras_attention.export.add_export_arguments`) and the translator's own.
"""

import argparse
import dataclasses
import datetime
import sys
from pathlib import Path

import keras
import tensorflow as tf

from keras_attention.arguments.validation import check_positive_int
from keras_attention.backend import native_log
from keras_attention.export.arguments import add_export_arguments
from keras_attention.export.backend import BackendError
from keras_attention.export.backend import check_tensorflow_backend
from keras_attention.export.folder import SAVED_MODEL_DIR
from keras_attention.export.folder import TFLITE_DIR
from keras_attention.export.folder import FolderFiles
from keras_attention.export.folder import check_export_folder
from keras_attention.export.folder import check_variants
from keras_attention.export.folder import export_folder
from keras_attention.export.saved_model import SIGNATURES
from keras_attention.files.atomic import write_json
from keras_attention.files.file_errors import check_can_write
from keras_attention.files.file_errors import end_command
from keras_attention.generation.search_defaults import BEAM_WIDTH
from keras_attention.generation.search_defaults import LENGTH_PENALTY
from keras_attention.generation.search_defaults import MAX_BATCH
from keras_attention.generation.search_defaults import BeamSettings
from keras_attention.generation.search_defaults import check_beam_width
from keras_attention.generation.search_defaults import check_max_length
from keras_attention.generation.search_defaults import check_penalty
from keras_attention.translation import runs
from keras_attention.translation.lite import TFLITE_CONFIG_FILE
from keras_attention.translation.lite import TFLITE_NAME
from keras_attention.translation.lite import VARIANTS
from keras_attention.translation.lite import lite_translator
from keras_attention.translation.lite import tflite_config
from keras_attention.translation.lite import tflite_filename
from keras_attention.translation.lite import tflite_files
from keras_attention.translation.lite import write_vocabularies
from keras_attention.translation.serving import export_translator_saved_model
from keras_attention.translation.translator import load_run

# `lite`'s file names are importable from here too.
__all__ = [
    "MANIFEST_FILE",
    "SAVED_MODEL_DIR",
    "TFLITE_CONFIG_FILE",
    "TFLITE_DIR",
    "VARIANTS",
    "RunFiles",
    "add_run_export_arguments",
    "export_run",
    "main",
    "run_export",
    "tflite_filename",
]

MANIFEST_FILE = "export.json"
_FORMAT_VERSION = 1


def export_run(
    run_dir,
    out_dir,
    variants=VARIANTS,
    max_length=None,
    beam_width=BEAM_WIDTH,
    length_penalty=LENGTH_PENALTY,
    saved_model=True,
    version=1,
    source_length=None,
    tflite_beam=False,
    max_batch=MAX_BATCH,
    report=None,
):
    """Exports a training run's model as a SavedModel and TFLite variants.

    Written whole or not at all by `export_folder` (a kill leaves the earlier
    export or the new one, never a mix); the SavedModel versions other than
    `version` of an earlier export are kept (TensorFlow Serving serves the
    newest).

    Args:
        run_dir: a finished training run.
        out_dir: the output folder: new, empty, or an earlier export (it
            holds only `export.json`, `saved_model/`, `tflite/`), which is
            replaced. A folder holding anything else is refused.
        variants: the TFLite variants, a subset of `VARIANTS`; empty for none.
        max_length: int, the most output tokens (END included), or None for
            `2 * S + 10` (S: source length).
        beam_width: the beam width of the SavedModel's `beam` signature, at
            most `MAX_BEAM_WIDTH` (64) and the target vocabulary.
        length_penalty: its GNMT length penalty.
        saved_model: bool, write the SavedModel.
        version: int, the SavedModel's version folder (TensorFlow Serving).
        source_length: None, or a static TFLite source length N (the app
            pads with id 0 to N; LiteRT.js needs it).
        tflite_beam: bool, add `translate_beam` (beam search with
            `beam_width` and `length_penalty`) to the TFLite models.
        max_batch: the most sentences in one SavedModel request.
        report: None, or a function called with one line as each model is
            written (`export_folder`'s).

    Returns:
        The manifest dict, also written to `out_dir/export.json`.

    Raises:
        FileNotFoundError: the run folder is incomplete (from `load_run`).
        ValueError: an argument out of its bounds (named), or an `out_dir`
            that holds something else than an export.
    """
    check_tensorflow_backend("The export of a run")
    settings = _Settings(
        check_variants(variants),
        max_length,
        beam_width,
        length_penalty,
        saved_model,
        version,
        source_length,
        tflite_beam,
        max_batch,
    )
    check_export_folder(out_dir, RunFiles.entries)  # before the run is loaded
    translator, config = load_run(run_dir)
    translator.check_beam_width(beam_width)
    files = RunFiles(translator, config, run_dir, settings)
    export_folder(
        translator.generator,
        out_dir,
        TFLITE_NAME,
        variants=settings.variants,
        beam_width=settings.beam_width,
        length_penalty=settings.length_penalty,
        source_length=settings.source_length,
        max_length=settings.max_length,
        report=report,
        files=files,
    )
    return files.manifest


@dataclasses.dataclass
class _Settings:
    """The options of `export_run` that shape the files, checked."""

    variants: tuple
    max_length: int | None
    beam_width: int
    length_penalty: float
    saved_model: bool
    version: int
    source_length: int | None
    tflite_beam: bool
    max_batch: int

    def __post_init__(self):
        self.max_length = check_max_length(self.max_length)
        check_beam_width(self.beam_width)
        self.length_penalty = check_penalty("length_penalty", self.length_penalty)
        check_positive_int("source_length", self.source_length, allow_none=True)
        check_positive_int("max_batch", self.max_batch)


class RunFiles(FolderFiles):
    """The translator's files in `export_folder`'s folder (the module docstring).

    `saved_model/VERSION` holds the text-in SavedModel (the other versions of
    an earlier export are kept); `tflite/` the models without a manifest
    each, the vocabularies and `translator.json`; `export.json` what was
    exported, which `manifest` holds once the folder is written.

    Args:
        translator: the run's `Translator`.
        config: the run's config.json.
        run_dir: the run folder.
        settings: the checked options of `export_run`.
    """

    entries = (MANIFEST_FILE, SAVED_MODEL_DIR, TFLITE_DIR)
    model_manifests = False

    def __init__(self, translator, config, run_dir, settings):
        self.translator = translator
        self.settings = settings
        self.manifest = {
            "format_version": _FORMAT_VERSION,
            "run_dir": str(Path(run_dir).resolve()),
            "attention": config.get("attention"),
            "exported": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "tensorflow": tf.__version__,
            "keras": keras.__version__,
            "max_length": settings.max_length,
            "source_length": settings.source_length,
            "tflite_beam": settings.tflite_beam,
            # An unfinished or running run's model is its best epoch so far.
            "run": runs.export_state(run_dir),
        }

    def kept(self, out_dir):
        """The SavedModel versions of an earlier export in `out_dir` that this
        one does not write, as paths relative to `out_dir`."""
        folder = Path(out_dir) / SAVED_MODEL_DIR
        if not folder.is_dir():
            return []
        return [
            f"{SAVED_MODEL_DIR}/{p.name}"
            for p in folder.iterdir()
            if not (self.settings.saved_model and p.name == str(self.settings.version))
        ]

    def write_saved_model(self, generator, folder, **search):
        """The text-in SavedModel in `saved_model/VERSION`, unless
        `saved_model` is False."""
        settings = self.settings
        if not settings.saved_model:
            return None
        path = Path(SAVED_MODEL_DIR) / str(settings.version)
        export_translator_saved_model(
            self.translator,
            folder / path,
            settings.max_length,
            settings.beam_width,
            settings.length_penalty,
            settings.max_batch,
        )
        self.manifest["saved_model"] = {
            "path": str(path),
            "signatures": list(SIGNATURES),
            "beam_width": settings.beam_width,
            "length_penalty": settings.length_penalty,
            "max_batch": settings.max_batch,
        }
        return str(path)

    def lite_generator(self, generator, beam_width, length_penalty, **options):
        """`lite_translator`: `translate` and, with `tflite_beam`, `translate_beam`."""
        beam = None
        if self.settings.tflite_beam:
            beam = BeamSettings(beam_width, length_penalty)
        return lite_translator(self.translator, beam=beam, **options)

    def write_files(self, folder, manifest, lite):
        """The vocabularies beside the models and `export.json`; returns the
        dict of `translator.json` (None without a model)."""
        if lite is not None:
            write_vocabularies(self.translator, folder / TFLITE_DIR)
            self.manifest["tflite"] = {
                variant: {
                    "path": f"{TFLITE_DIR}/{file}",
                    "bytes": (folder / TFLITE_DIR / file).stat().st_size,
                }
                for variant, file in manifest["models"].items()
            }
        write_json(folder / MANIFEST_FILE, self.manifest)
        if lite is None:
            return None
        return tflite_config(
            self.translator, lite, tuple(manifest["models"]), self.manifest["attention"]
        )


PROG = "python -m keras_attention.translation.export"


def add_run_export_arguments(parser):
    """Adds the export's arguments and help to `parser`: the library's
    export options (`keras_attention.export.add_export_arguments`) and the
    translator's own, which `parse_args` reads and the translator's `export`
    command (`keras_attention.translation.cli`) too.

    Args:
        parser: an `argparse.ArgumentParser` (or a subcommand's), made with
            `formatter_class=argparse.RawDescriptionHelpFormatter` so that
            the help keeps this module's layout.
    """
    parser.description = __doc__
    parser.epilog = "OUT_DIR/tflite/ holds:\n\n" + "".join(
        f"  {name:<28}{note}\n" for name, note in tflite_files().items()
    )
    parser.add_argument(
        "run_dir", help="a finished training run (python -m keras_attention.translation train)"
    )
    parser.add_argument("out_dir", help="output folder")
    add_export_arguments(parser)
    parser.add_argument(
        "--tflite-beam",
        action="store_true",
        help="add `translate_beam` (--beam-width, --length-penalty) to the TFLite models",
    )
    parser.add_argument(
        "--max-batch",
        type=int,
        default=MAX_BATCH,
        help="the most sentences in one SavedModel request; more are refused",
    )
    parser.add_argument("--no-saved-model", action="store_true", help="TFLite only")
    parser.add_argument("--version", type=int, default=1, help="SavedModel version folder")
    return parser


def build_parser():
    """The parser of `python -m keras_attention.translation.export`."""
    parser = argparse.ArgumentParser(
        prog=PROG, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    return add_run_export_arguments(parser)


def parse_args(argv=None):
    """The options of `python -m keras_attention.translation.export`."""
    return build_parser().parse_args(argv)


def run_export(args):
    """Runs `export_run` with the options `add_run_export_arguments` parsed
    and prints where the files went; returns the exit status: 0, or 2 after
    one line `error: ...` on standard error. An output folder that cannot be
    written raises its `OSError` first, before the run is loaded
    (`keras_attention.files.file_errors.check_can_write`)."""
    options = {
        "run_dir": args.run_dir,
        "out_dir": args.out_dir,
        "variants": tuple(args.variants),
        "max_length": args.max_length,
        "beam_width": args.beam_width,
        "length_penalty": args.length_penalty,
        "saved_model": not args.no_saved_model,
        "version": args.version,
        "source_length": args.source_length,
        "tflite_beam": args.tflite_beam,
        "max_batch": args.max_batch,
        "report": print,
    }
    check_can_write(args.out_dir)  # a read-only place, said before the run is loaded
    try:
        export_run(**options)
    except (FileNotFoundError, ValueError, BackendError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"export manifest: {Path(options['out_dir']) / MANIFEST_FILE}")
    return 0


def main(argv=None):
    """`python -m keras_attention.translation.export`: the exit status."""
    return run_export(parse_args(argv))


if __name__ == "__main__":  # a file's error in one line, then the process ends at once
    sys.exit(end_command(main, "error", before_exit=(native_log.stop_filter,)))
