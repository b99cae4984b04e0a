"""Exports a `.keras` model to builtin-only TFLite (and a SavedModel), from any backend.

    python -m keras_attention.export MODEL.keras OUT_DIR --start-id 1 --end-id 2 --variants int8

MODEL.keras is a functional teacher-forced model (inputs `[source,
target_in]`, one `BahdanauDecoder` or `LuongDecoder`, logits out), saved on any
Keras backend (TensorFlow, JAX, PyTorch) and in any policy (float32,
mixed_float16, mixed_bfloat16). The export itself runs on TensorFlow: started
with another `KERAS_BACKEND`, the command starts itself again with
`KERAS_BACKEND=tensorflow` (TensorFlow must be installed). It writes

    OUT_DIR/
      model.tflite, model.json                    float32, and its manifest
      model_float16.tflite, model_float16.json    float16 weights
      model_int8.tflite, model_int8.json          dynamic-range int8 weights
      saved_model/                                with --saved-model

the variants that --variants names (default: all three), each TFLite model
with `generate` (greedy), `generate_beam` (--beam-width, --length-penalty),
`encode` and `decode_step` (see `keras_attention.export.export_tflite`). The
options shared with the other export commands are
`keras_attention.export.add_export_arguments`'. `--quantization none float16
int8`, the spelling of earlier releases, still reads as `--variants
float32,float16,int8`. Layers of one's own must be registered
(`keras.saving.register_keras_serializable`) in a module that --import names.
"""

import argparse
import importlib
import os
import sys
from pathlib import Path

import keras

from keras_attention.backend import native_log
from keras_attention.export.arguments import add_export_arguments
from keras_attention.files.file_errors import check_can_write
from keras_attention.files.file_errors import end_command
from keras_attention.files.file_errors import file_error_message
from keras_attention.files.model_file import load_model
from keras_attention.files.reading import require_regular_file

PROG = "python -m keras_attention.export"
# The file of each variant in OUT_DIR.
MODEL_FILES = {
    "float32": "model.tflite",
    "float16": "model_float16.tflite",
    "int8": "model_int8.tflite",
}
# `--quantization`'s "none", the earlier spelling of the variant float32.
_EARLIER_SPELLING = {"none": "float32", "float16": "float16", "int8": "int8"}


def build_parser():
    """The parser of `python -m keras_attention.export`."""
    parser = argparse.ArgumentParser(
        prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("model", help="the .keras file")
    parser.add_argument("out_dir", help="the folder to write")
    parser.add_argument("--start-id", type=int, required=True, help="the id outputs start from")
    parser.add_argument("--end-id", type=int, required=True, help="the id that ends an output")
    add_export_arguments(parser)
    # Hidden: the documented spelling of earlier releases, read as --variants.
    parser.add_argument(
        "--quantization",
        nargs="+",
        choices=tuple(_EARLIER_SPELLING),
        help=argparse.SUPPRESS,
    )
    parser.add_argument("--saved-model", action="store_true", help="also write a SavedModel")
    parser.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="a module to import first, one that registers the model's own layers (repeatable)",
    )
    return parser


def parse_args(argv=None):
    """The options of `python -m keras_attention.export`."""
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(argv)
    if args.quantization is not None:
        if any(a == "--variants" or a.startswith("--variants=") for a in argv):
            parser.error("--quantization is the earlier spelling of --variants: give one")
        args.variants = [_EARLIER_SPELLING[q] for q in args.quantization]
    del args.quantization
    return args


def _on_tensorflow(argv):
    """Starts this command again with KERAS_BACKEND=tensorflow (the export
    traces TensorFlow graphs); returns its exit status."""
    import subprocess

    env = dict(os.environ, KERAS_BACKEND="tensorflow")
    return subprocess.call([sys.executable, "-m", "keras_attention.export", *argv], env=env)


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    if keras.backend.backend() != "tensorflow":
        return _on_tensorflow(argv)
    try:
        from keras_attention.export import LiteGenerator
        from keras_attention.export import export_saved_model
        from keras_attention.export.tflite import write_model_manifest
        from keras_attention.export.tflite import write_tflite
        from keras_attention.generation.seq2seq_generator import Seq2SeqGenerator

        for module in args.imports:
            importlib.import_module(module)
        path = Path(args.model)
        if not path.exists():
            raise FileNotFoundError(f"No model file at {str(path)!r}.")
        require_regular_file(path, "model file")  # a FIFO would hang the load
        check_can_write(args.out_dir)  # before minutes of tracing
        hint = "pass --import MODULE, the module that defines it"
        model = load_model(path, import_hint=hint, compile=False)
        generator = Seq2SeqGenerator.from_model(model, args.start_id, args.end_id)
        out_dir = Path(args.out_dir)
        search = {
            "max_length": args.max_length,
            "beam_width": args.beam_width,
            "length_penalty": args.length_penalty,
        }
        if args.variants:  # traced once, converted for each variant
            lite = LiteGenerator(generator, source_length=args.source_length, **search)
        for variant in args.variants:
            path = write_tflite(lite, out_dir / MODEL_FILES[variant], variant)
            write_model_manifest(lite, path, variant)
            print(f"wrote {path} and {path.with_suffix('.json').name}")
        if args.saved_model:
            export_saved_model(generator, out_dir / "saved_model", **search)
            print(f"wrote {out_dir / 'saved_model'}")
    except BrokenPipeError:
        raise  # `end_command` ends quietly
    except OSError as error:  # a full disk, a read-only file system: one line
        print(f"{PROG}: error: {file_error_message(error)}", file=sys.stderr)
        return 2
    except (ValueError, TypeError, ImportError) as error:
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        print(f"{PROG}: error: {first}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    # A failed export ends the process at once (see `end_command`).
    sys.exit(end_command(main, PROG, before_exit=(native_log.stop_filter,)))
