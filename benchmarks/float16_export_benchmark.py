"""Float16 export: the converter's float16 option against the package's.

The converter's float16 option (`target_spec.supported_types = [tf.float16]`)
left some weights of the search loop outside the loop body, as values the
`WHILE` copies at every step; `keras_attention.export.float16` writes the
float16 weights into the float32 conversion instead (see docs/export.md). This
measures both on a model of the translator's shape with random weights and
biases (vocabularies `--vocab`, embedding `--embedding`, a bidirectional GRU
encoder of `--embedding` per direction, `BahdanauDecoder(--units)`), exported with a
static source length: the values each search loop carries, the file sizes,
and the median time of `generate` and `generate_beam` on one thread, the
models alternated call by call, in Python LiteRT and (with `--browser`) on
the page's runtime, LiteRT.js in headless Chromium. Random weights never
emit END early, so every call decodes the same number of tokens (the bound
2·S + 10 of a source of S = `--words` ids).

    python benchmarks/float16_export_benchmark.py --browser --write
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from ai_edge_litert import schema_py_generated as schema  # noqa: E402
from ai_edge_litert.interpreter import Interpreter  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, str(ROOT / "tests"))

import _report  # noqa: E402
import browser_kernel_benchmark as kernel  # noqa: E402

from keras_attention import BahdanauAttention  # noqa: E402
from keras_attention import BahdanauDecoder  # noqa: E402
from keras_attention import Seq2SeqGenerator  # noqa: E402
from keras_attention.export import LiteGenerator  # noqa: E402
from keras_attention.export import convert  # noqa: E402

SECTION = "Float16 export: weights inside the loops"
SIGNATURES = ("generate", "generate_beam")
VARIANTS = ("float32", "float16, converter's option", "float16, this package")


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--vocab", type=_report.positive_int, default=8000)
    p.add_argument("--embedding", type=_report.positive_int, default=128)
    p.add_argument("--units", type=_report.positive_int, default=256)
    p.add_argument("--source-length", type=_report.positive_int, default=64)
    p.add_argument("--words", type=_report.positive_int, default=20, help="real source ids")
    p.add_argument("--beam-width", type=_report.positive_int, default=4)
    p.add_argument("--repeats", type=_report.positive_int, default=30)
    p.add_argument("--browser", action="store_true", help="time LiteRT.js in Chromium too")
    p.add_argument("--chromium", default="/usr/bin/chromium")
    p.add_argument("--write", action="store_true", help="write docs/benchmarks.md")
    args = p.parse_args(argv)
    if args.words > args.source_length:
        p.error(f"--words {args.words} is more than --source-length {args.source_length}")
    return args


def random_generator(vocab, embedding, units, seed=0):
    keras.utils.set_random_seed(seed)
    source = keras.Input((None,), dtype="int32")
    target_in = keras.Input((None,), dtype="int32")
    x = keras.layers.Embedding(vocab, embedding, mask_zero=True)(source)  # (B, S, E)
    memory = keras.layers.Bidirectional(keras.layers.GRU(embedding, return_sequences=True))(x)
    y = keras.layers.Embedding(vocab, embedding, mask_zero=True)(target_in)  # (B, T, E)
    outputs, _, _ = BahdanauDecoder(units, BahdanauAttention(units))(y, memory)
    model = keras.Model([source, target_in], keras.layers.Dense(vocab)(outputs))
    # Keras starts biases at zero and the converter drops a zero bias; a
    # trained model has biases, and LiteRT.js is sensitive to their type.
    rng = np.random.default_rng(seed)
    for weight in model.weights:
        if "bias" in weight.path:
            weight.assign(rng.normal(size=weight.shape).astype("float32") / 10)
    return Seq2SeqGenerator.from_model(model, start_id=1, end_id=2)


def converter_float16(lite):
    """The converter's own float16 option, as the export used it before."""
    converter = tf.lite.TFLiteConverter.from_concrete_functions(lite.concrete_functions(), lite)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.target_spec.supported_types = [tf.float16]
    return converter.convert()


def carried_values(data):
    """{signature: values its search `WHILE` carries (the loop with the most)}."""
    model = schema.ModelT.InitFromPackedBuf(bytearray(data), 0)
    names = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
    out = {}
    for subgraph in model.subgraphs:
        name = (subgraph.name or b"").decode()
        if name not in SIGNATURES:
            continue
        counts = [
            len(op.inputs)
            for op in subgraph.operators
            if names[
                max(
                    model.operatorCodes[op.opcodeIndex].builtinCode,
                    model.operatorCodes[op.opcodeIndex].deprecatedBuiltinCode,
                )
            ]
            == "WHILE"
        ]
        out[name] = max(counts)
    return out


def python_ms(paths, source, repeats):
    """{(file, signature): [ms]}: every model and signature in turn, `repeats` rounds."""
    runners = {
        (p, s): Interpreter(model_path=str(p), num_threads=1).get_signature_runner(s)
        for p in paths
        for s in SIGNATURES
    }
    lengths = {key: int(run(source=source)["lengths"][0]) for key, run in runners.items()}
    times = {key: [] for key in runners}
    for _ in range(repeats):
        for key, run in runners.items():
            started = time.perf_counter()
            run(source=source)
            times[key].append(1e3 * (time.perf_counter() - started))
    return times, lengths


def main(argv=None):
    args = parse_args(argv)
    load = os.getloadavg()[0]
    generator = random_generator(args.vocab, args.embedding, args.units)
    lite = LiteGenerator(generator, beam_width=args.beam_width, source_length=args.source_length)
    models = {
        VARIANTS[0]: convert(lite),
        VARIANTS[1]: converter_float16(lite),
        VARIANTS[2]: convert(lite, "float16"),
    }
    source = np.zeros((1, args.source_length), np.int32)
    source[0, : args.words] = np.random.default_rng(1).integers(3, args.vocab, args.words)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        folder = tmp / "page"
        folder.mkdir()
        files = {}
        for i, (variant, data) in enumerate(models.items()):
            files[variant] = folder / f"model_{i}.tflite"
            files[variant].write_bytes(data)
        python, lengths = python_ms(list(files.values()), source, args.repeats)
        page = None
        if args.browser:
            kernel.kernel_page(folder)
            page = kernel.browser_ms(
                folder,
                [f.name for f in files.values()],
                source,
                args.repeats,
                args.chromium,
                tmp,
                signatures=list(SIGNATURES),
                input_name="source",
                dtype="int32",
            )
    tokens = sorted(set(lengths.values()))
    lines = [
        "A model of the translator's shape with random weights and biases "
        f"(vocabularies {args.vocab:,}, embedding {args.embedding}, "
        f"GRU encoder of {args.embedding} per direction, "
        f"`BahdanauDecoder({args.units})`), exported with the static source length "
        f"{args.source_length}; a source of {args.words} ids, decoded to "
        f"{' / '.join(map(str, tokens))} tokens (beam width {args.beam_width}). Median ms per "
        f"call over {args.repeats} calls per model and signature, the models alternated, one "
        "thread: Python LiteRT (`ai_edge_litert`)"
        + (", then LiteRT.js (`wasm`, headless Chromium)." if page else "."),
        "",
        "| variant | values the search loop carries (greedy / beam) | file (MB) "
        "| Python greedy ms | Python beam ms"
        + (
            " | page greedy ms | page beam ms | page / Python greedy | page / Python beam |"
            if page
            else " |"
        ),
        "|---|---|---:|---:|---:" + ("|---:|---:|---:|---:|" if page else "|"),
    ]
    for variant, path in files.items():
        carried = carried_values(models[variant])
        py = [statistics.median(python[path, s]) for s in SIGNATURES]
        row = (
            f"| {variant} | {carried['generate']} / {carried['generate_beam']} "
            f"| {len(models[variant]) / 1e6:.2f} | {py[0]:.1f} | {py[1]:.1f} |"
        )
        if page:
            pg = [statistics.median(page[f"{path.name} {s}"]) for s in SIGNATURES]
            row += f" {pg[0]:.1f} | {pg[1]:.1f} | {pg[0] / py[0]:.2f}× | {pg[1] / py[1]:.2f}× |"
        lines.append(row)
    lines += ["", f"Load average {load:.1f} at the start (2 cores).  ", *_report.footer_lines()]
    body = "\n".join(lines)
    print(body)
    if args.write:
        print(f"\nWrote {_report.write_section(SECTION, body)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
