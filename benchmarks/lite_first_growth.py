"""Python LiteRT: the first call at a source longer than any before it.

LiteRT's default CPU path (the XNNPACK delegate, Python LiteRT 2.3.0) answers
wrong now and then on an interpreter's first call at a new largest source
length, when the model's search loop (a `WHILE`) carries tensors sized by
the source: the loop's body is resized then, and that call reads memory
nobody wrote (all-0 tokens with a NaN log-probability, or another
sentence). `export_tflite` pads the search's state to a static width
(`keras_attention.export.tflite.StaticWidth`), so the body never resizes.

Builds `--models` small attention models (an embedding, a bidirectional GRU,
`BahdanauDecoder` over `BahdanauAttention`; random weights, then a few SGD
steps on random ids, a different seed each) and converts each three ways:

- `growing state (reproducer)`: the minimal graph that meets the defect,
  kept as a regression check on LiteRT: the generator's own
  `greedy_graph` over the unpadded state, frozen and converted as
  `export_tflite` does (the export of earlier releases);
- `dynamic export`: `export_tflite` with a dynamic source length;
- `static export`: `export_tflite(..., source_length=6)`, sources padded
  with id 0 (the page's model).

Each growth call: an interpreter of a random model is made
(`Interpreter(model_path=..., num_threads=1)`, the default path), called once
at a source of 4 tokens, then at 6 (the growth call); `--live` interpreters
stay alive (0: each is freed as the next is made, which makes the defect
about 20 times as frequent as with 8 alive). Each call's outputs are
compared with those of the same source on a fresh interpreter without
delegate, alone (the reference): tokens and lengths equal, log-probabilities
within 1e-4.

    python benchmarks/lite_first_growth.py --write

Prints a table; `--write` records it in docs/benchmarks.md with the command,
the machine and the date. About 3 minutes on a 2-core CPU with the default
counts; `--calls 100000` about 15 minutes.
"""

import argparse
import os
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _report  # noqa: E402

TITLE = "Python LiteRT: the first call at a new largest source length"
VOCAB = 20
LENGTHS = (4, 6)
MAX_LENGTH = 6


def build_model(seed):
    """A small trained attention model (random weights, 4 SGD steps)."""
    from keras_attention import BahdanauAttention
    from keras_attention import BahdanauDecoder

    source = keras.Input((None,), dtype="int32")
    target = keras.Input((None,), dtype="int32")
    x = keras.layers.Embedding(VOCAB, 8, mask_zero=True)(source)
    memory = keras.layers.Bidirectional(keras.layers.GRU(8, return_sequences=True))(x)
    y = keras.layers.Embedding(VOCAB, 8, mask_zero=True)(target)
    outputs, _, _ = BahdanauDecoder(16, BahdanauAttention(8))(y, memory)
    model = keras.Model([source, target], keras.layers.Dense(VOCAB)(outputs))
    rng = np.random.default_rng(seed)
    model.set_weights([rng.uniform(-0.8, 0.8, w.shape).astype("float32") for w in model.weights])
    ids = rng.integers(3, VOCAB, size=(16, 6)).astype("int32")
    ids[::3, 4:] = 0
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=0)
    model.compile(optimizer="sgd", loss=loss)
    keras.utils.set_random_seed(seed)
    model.fit([ids, ids[:, :5]], ids[:, 1:], epochs=2, batch_size=8, verbose=0)
    return model


KINDS = ("growing state (reproducer)", "dynamic export", "static export")


def export_models(count, folder, kinds=KINDS):
    """{kind: [.tflite path of each model]} for `kinds`."""
    from keras_attention import Seq2SeqGenerator
    from keras_attention.export import export_tflite

    options = {"dynamic export": {}, "static export": {"source_length": MAX_LENGTH}}
    paths = {kind: [] for kind in kinds}
    for seed in range(count):
        generator = Seq2SeqGenerator.from_model(build_model(seed), 1, VOCAB - 1)
        for kind in kinds:
            path = os.path.join(folder, f"{kind.split()[0]}_{seed}.tflite")
            if kind == KINDS[0]:
                write_reproducer(generator, path)
            else:  # the default output bound, as an app's model
                export_tflite(generator, path, **options[kind])
            paths[kind].append(path)
        print(f"exported {seed + 1}/{count}", end="\r", flush=True)
    print()
    return paths


def write_reproducer(generator, path, source_length=None):
    """The search graph that meets the defect: greedy search over the
    generator's state as `encode` gives it, (1, S, ...) tensors carried by
    the loop, the weights frozen as `export_tflite` freezes them. With
    `source_length` N, the static export of earlier releases (the page's):
    a (1, N) source cut to its real positions inside, static outputs."""
    import tensorflow as tf

    from keras_attention.export import tflite

    def generate(source):
        if source_length is None:
            result = generator.greedy_graph(source, MAX_LENGTH, empty_columns=False)
            return {k: result[k] for k in tflite.GENERATE_OUTPUTS}
        real = source[:, : tf.maximum(tflite.real_length(source), 1)]
        result = generator.greedy_graph(real, None, empty_columns=False)
        rows = generator.resolve_max_length(source_length, None)
        return tflite._static_rows(result, tflite.GENERATE_OUTPUTS, rows, source_length)

    frozen = [(v, tf.constant(v.numpy())) for v in generator.variables()]
    spec = tf.TensorSpec([1, source_length], tf.int32, name="source")
    with keras.StatelessScope(state_mapping=frozen):
        function = tf.function(generate, input_signature=[spec], autograph=False)
        concrete = function.get_concrete_function()
    module = tf.Module()
    module.generate = concrete
    converter = tf.lite.TFLiteConverter.from_concrete_functions([concrete], module)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    with open(path, "wb") as f:
        f.write(converter.convert())


def sources(seed, width):
    """The short and the long source of one model, ids of its vocabulary,
    padded with 0 to `width` positions when the model's length is static."""
    rng = np.random.default_rng(seed)
    out = {}
    for n in LENGTHS:
        ids = rng.integers(3, VOCAB, (1, n)).astype("int32")
        out[n] = ids if width is None else np.pad(ids, [(0, 0), (0, width - n)])
    return out


def _runner(interpreter):
    """`generate`, or the reproducer's one signature."""
    names = list(interpreter.get_signature_list())
    return interpreter.get_signature_runner("generate" if "generate" in names else names[0])


def reference_outputs(path, by_length):
    """The outputs of each source on a fresh interpreter without delegate
    (one call per interpreter: nothing grows)."""
    from ai_edge_litert.interpreter import Interpreter
    from ai_edge_litert.interpreter import OpResolverType

    plain = OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    reference = {}
    for n, source in by_length.items():
        interpreter = Interpreter(model_path=path, experimental_op_resolver_type=plain)
        generate = _runner(interpreter)
        reference[n] = {k: v.copy() for k, v in generate(source=source).items()}
    return reference


def same(outputs, reference):
    """Tokens and lengths equal, log-probabilities within 1e-4 (NaN is wrong)."""
    return (
        np.array_equal(outputs["tokens"], reference["tokens"])
        and np.array_equal(outputs["lengths"], reference["lengths"])
        and np.allclose(outputs["log_probs"], reference["log_probs"], atol=1e-4)
    )


def run_growth(paths, calls, live, seed):
    """[first calls wrong, growth calls wrong, calls] and examples, for
    `calls` interpreters of random models among `paths`."""
    from ai_edge_litert.interpreter import Interpreter

    width = MAX_LENGTH if "static" in paths[0] else None
    by_model = [sources(seed + 100 + m, width) for m in range(len(paths))]
    reference = [reference_outputs(p, by_model[m]) for m, p in enumerate(paths)]
    short, long = LENGTHS
    rng = np.random.default_rng(seed)
    alive = []
    first_wrong = growth_wrong = 0
    examples = []
    for _ in range(calls):
        m = int(rng.integers(len(paths)))
        # Made while the previous one is still held here (freed right after):
        # with `live` 0, its memory is the next interpreter's.
        interpreter = Interpreter(model_path=paths[m], num_threads=1)
        alive.append(interpreter)
        if len(alive) > live:
            alive.pop(0)
        generate = _runner(interpreter)
        first_wrong += not same(generate(source=by_model[m][short]), reference[m][short])
        outputs = generate(source=by_model[m][long])
        if not same(outputs, reference[m][long]):
            growth_wrong += 1
            if len(examples) < 2:
                examples.append(
                    f"{outputs['tokens'][0].tolist()} (log-prob {outputs['log_probs'][0]:.3g}) "
                    f"for {reference[m][long]['tokens'][0].tolist()}"
                )
    return (first_wrong, growth_wrong, calls), examples


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=_report.positive_int, default=4)
    parser.add_argument(
        "--calls", type=_report.positive_int, default=20000, help="growth calls per export"
    )
    parser.add_argument(
        "--reproducer-calls",
        type=_report.positive_int,
        default=5000,
        help="growth calls of the reproducer",
    )
    parser.add_argument("--live", type=int, default=0, help="interpreters kept alive")
    parser.add_argument(
        "--kinds",
        nargs="+",
        choices=KINDS,
        default=list(KINDS),
        metavar="KIND",
        help=f"the models to run, of {', '.join(map(repr, KINDS))}",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--write", action="store_true", help="record in docs/benchmarks.md")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    rows = {}
    with tempfile.TemporaryDirectory() as folder:
        paths = export_models(args.models, folder, args.kinds)
        for kind in args.kinds:
            calls = args.reproducer_calls if kind == KINDS[0] else args.calls
            rows[kind] = run_growth(paths[kind], calls, args.live, args.seed)
            print(kind, rows[kind][0], flush=True)
    alive = "each freed as the next is made" if args.live == 0 else f"{args.live} alive"
    lines = [
        f"{args.models} small trained attention models (embedding, bidirectional GRU, "
        "`BahdanauDecoder` with `BahdanauAttention`), greedy search inside the model. Each "
        "interpreter (LiteRT's default CPU path, the XNNPACK delegate; "
        f"{alive}) is called at a source of {LENGTHS[0]} tokens, then at {LENGTHS[1]} "
        "(the growth call). A call is wrong when its tokens, length or log-probability "
        "differ from those of the same source on a fresh interpreter without delegate. "
        "The reproducer is the search over the state as `encode` gives it (the export of "
        "earlier releases); `export_tflite` pads that state to a static width.",
        "",
        "| model | wrong of first calls | wrong of growth calls |",
        "|---|---:|---:|",
    ]
    examples = []
    for kind, ((first, growth, calls), seen) in rows.items():
        lines.append(f"| {kind} | {first:,} of {calls:,} | {growth:,} of {calls:,} |")
        examples += [f"{kind}: {e}" for e in seen]
    lines += ["", "Wrong tokens seen:" if examples else "No call went wrong."]
    lines += [f"- {e}" for e in examples]
    lines += ["", f"{time.perf_counter() - started:.0f} s in all.  ", *_report.footer_lines()]
    body = "\n".join(lines)
    print("\n" + body)
    if args.write:
        _report.write_section(TITLE, body)
    return rows


if __name__ == "__main__":
    main()
