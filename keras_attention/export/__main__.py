"""Exports a `.keras` model to builtin-only TFLite (and a SavedModel), from any backend.

    python -m keras_attention.export MODEL.keras OUT_DIR --start-id 1 --end-id 2

MODEL.keras is a functional teacher-forced model (inputs `[source,
target_in]`, one `BahdanauDecoder` or `LuongDecoder`, logits out), saved on any
Keras backend (TensorFlow, JAX, PyTorch) and in any policy (float32,
mixed_float16, mixed_bfloat16). The export itself runs on TensorFlow: started
with another `KERAS_BACKEND`, the command starts itself again with
`KERAS_BACKEND=tensorflow` (TensorFlow must be installed). It writes

    OUT_DIR/
      model.tflite, model.json                    float32, and its manifest
      model_float16.tflite, model_float16.json    with --quantization float16
      model_int8.tflite, model_int8.json          with --quantization int8
      saved_model/                                with --saved-model

each TFLite model with `generate` (greedy), `encode`, `decode_step`, and
`generate_beam` with --beam-width (see `keras_attention.export.export_tflite`).
Layers of one's own must be registered
(`keras.saving.register_keras_serializable`) in a module that --import names.
"""

import argparse
import importlib
import os
import sys
from pathlib import Path

import keras

PROG = "python -m keras_attention.export"


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("model", help="the .keras file")
    parser.add_argument("out_dir", help="the folder to write")
    parser.add_argument("--start-id", type=int, required=True, help="the id outputs start from")
    parser.add_argument("--end-id", type=int, required=True, help="the id that ends an output")
    parser.add_argument(
        "--quantization",
        nargs="+",
        default=["none"],
        choices=("none", "float16", "int8"),
        help="the TFLite variants to write (default: none, float32 weights)",
    )
    parser.add_argument(
        "--beam-width", type=int, help="add `generate_beam` with this width (default: no beam)"
    )
    parser.add_argument(
        "--max-length", type=int, help="most output tokens, END included (default: 2 * S + 10)"
    )
    parser.add_argument(
        "--source-length",
        type=int,
        help="a static source length, sources padded to it (LiteRT.js; default: dynamic)",
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
    return parser.parse_args(argv)


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
        from keras_attention.export import export_saved_model
        from keras_attention.export import export_tflite
        from keras_attention.generation.seq2seq_generator import Seq2SeqGenerator

        for module in args.imports:
            importlib.import_module(module)
        path = Path(args.model)
        if not path.is_file():
            raise FileNotFoundError(f"No model file at {str(path)!r}.")
        model = keras.saving.load_model(path, compile=False)
        generator = Seq2SeqGenerator.from_model(model, args.start_id, args.end_id)
        out_dir = Path(args.out_dir)
        options = {"max_length": args.max_length}
        for quantization in args.quantization:
            name = "model.tflite" if quantization == "none" else f"model_{quantization}.tflite"
            export_tflite(
                generator,
                out_dir / name,
                quantization=None if quantization == "none" else quantization,
                beam_width=args.beam_width,
                source_length=args.source_length,
                **options,
            )
            print(f"wrote {out_dir / name} and {Path(name).with_suffix('.json')}")
        if args.saved_model:
            if args.beam_width is not None:
                options["beam_width"] = args.beam_width
            export_saved_model(generator, out_dir / "saved_model", **options)
            print(f"wrote {out_dir / 'saved_model'}")
    except (OSError, ValueError, TypeError, ImportError) as error:
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        print(f"{PROG}: error: {first}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
