"""Training throughput of the attentional decoders against Keras built-ins.

Measures target tokens per second (real tokens: padding is not counted) in
`model.fit` training steps on random data, after warm-up, for encoder-decoder
models that differ only in the decoder:

- "Keras GRU + AdditiveAttention" (the reference): the model a Keras user
  builds today from built-ins, a `GRU` decoder (return_sequences) with
  `keras.layers.AdditiveAttention` applied after it (query = decoder outputs,
  value = encoder outputs), concatenated with the decoder outputs;
- "BahdanauDecoder": `BahdanauDecoder(256, BahdanauAttention(256))`, attention
  inside the recurrence;
- "LuongDecoder general": `LuongDecoder(256, LuongAttention("general"))`, with
  and without input feeding;
- "Keras GRU, no attention": the reference without its attention, for scale.

Every model has the same encoder (embedding 256, a bidirectional GRU with 128
units per direction, so the memory has 256 features, the decoder's size, and
`AdditiveAttention` needs no projection), passes the encoder's final state
(forward and backward halves, 256) as the decoder's initial state, and ends in
a Dense over a vocabulary of 8,000. Batch 64, source length 16, target length
18; each sequence has a random length between half and all of its maximum,
padded with 0 (masked).

The models are timed in interleaved rounds (every model once per round), and
the median over the rounds is reported, with ratios to the reference in the
same run. With `--profile`, variants of the Bahdanau model locate its cost.

Takes about 4 minutes on a 2-core CPU with the defaults. Prints a table and
writes it to docs/benchmarks.md (section "Decoder training throughput")
unless `--no-write`.

    python benchmarks/decoder_speed.py
    python benchmarks/decoder_speed.py --jit both
    python benchmarks/decoder_speed.py --backends tensorflow,jax,torch

With `--backends`, each Keras backend trains the reference and the decoders in
a process of its own (`KERAS_BACKEND`), one after the other, with XLA where the
backend compiles by default (JAX: `jit_compile=True`; PyTorch: eager;
TensorFlow: `--jit`), and the table gives every model's speed as a ratio to
the TensorFlow reference of the same run (section "Decoder training
throughput by backend"). About 4 minutes per backend.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# Each model traces its own training function; TensorFlow would call that
# "retracing" and warn once per model.
tf.get_logger().setLevel("ERROR")

import _report  # noqa: E402

from keras_attention import BahdanauAttention  # noqa: E402
from keras_attention import BahdanauDecoder  # noqa: E402
from keras_attention import LuongAttention  # noqa: E402
from keras_attention import LuongDecoder  # noqa: E402

REFERENCE = "Keras GRU + AdditiveAttention"
SECTION = "Decoder training throughput"
BACKEND_SECTION = "Decoder training throughput by backend"
BACKENDS = ("tensorflow", "jax", "torch")
# The backend's own compiled training step: XLA on JAX; PyTorch runs eagerly
# (torch.compile of a recurrent loop is not what Keras users get by default).
BACKEND_JIT = {"jax": True, "torch": False}


# ------------------------------------------------------------------- models


def _encoder(args):
    """Inputs, memory (B, T_src, 2·enc_units) and the initial state (B, units)."""
    source = keras.Input((None,), dtype="int32", name="source")
    target_in = keras.Input((None,), dtype="int32", name="target_in")
    embedded = keras.layers.Embedding(args.vocab, args.embedding_dim, mask_zero=True)(source)
    memory, forward, backward = keras.layers.Bidirectional(
        keras.layers.GRU(args.units // 2, return_sequences=True, return_state=True)
    )(embedded)  # (B, T_src, units), (B, units / 2), (B, units / 2)
    state = keras.layers.Concatenate()([forward, backward])  # (B, units)
    target = keras.layers.Embedding(args.vocab, args.embedding_dim, mask_zero=True)(
        target_in
    )  # (B, T_tgt, E)
    return (source, target_in), memory, state, target


def builtin_model(args, attention=True):
    inputs, memory, state, target = _encoder(args)
    outputs = keras.layers.GRU(args.units, return_sequences=True)(
        target, initial_state=state
    )  # (B, T_tgt, units)
    if attention:
        context = keras.layers.AdditiveAttention()([outputs, memory])  # (B, T, units)
        outputs = keras.layers.Concatenate()([outputs, context])  # (B, T, 2·units)
    logits = keras.layers.Dense(args.vocab)(outputs)  # (B, T_tgt, V)
    return keras.Model(inputs, logits)


def decoder_model(args, decoder):
    inputs, memory, state, target = _encoder(args)
    outputs, _, _ = decoder(target, memory, initial_state=state)
    logits = keras.layers.Dense(args.vocab)(outputs)  # (B, T_tgt, V)
    return keras.Model(inputs, logits)


def bahdanau_model(args, attention=None):
    attention = attention or BahdanauAttention(args.units)
    return decoder_model(args, BahdanauDecoder(args.units, attention))


def luong_model(args, input_feeding):
    decoder = LuongDecoder(args.units, LuongAttention("general"), input_feeding=input_feeding)
    return decoder_model(args, decoder)


MODELS = {
    REFERENCE: lambda args: builtin_model(args, attention=True),
    "BahdanauDecoder": bahdanau_model,
    "LuongDecoder general, input feeding": lambda args: luong_model(args, True),
    "LuongDecoder general, no input feeding": lambda args: luong_model(args, False),
    "Keras GRU, no attention": lambda args: builtin_model(args, attention=False),
}


# ------------------------------------------------------------------ timing


def random_batches(args, rng, num_batches):
    """Padded random token batches and the number of real target tokens."""
    n = num_batches * args.batch_size

    def padded(length):
        tokens = rng.integers(1, args.vocab, size=(n, length)).astype("int32")
        lengths = rng.integers(length // 2, length + 1, size=(n, 1))
        return np.where(np.arange(length)[None, :] < lengths, tokens, 0)

    source = padded(args.source_length)
    target = padded(args.target_length + 1)
    target_in, target_out = target[:, :-1], target[:, 1:]
    target_out = np.where(target_in > 0, target_out, 0)
    # The decoder input carries the mask; its real positions are the real tokens.
    real = int((target_in > 0).sum())
    dataset = tf.data.Dataset.from_tensor_slices(((source, target_in), target_out))
    return dataset.batch(args.batch_size, drop_remainder=True), real


def compile_model(model, jit):
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=jit,
    )


def timed_fit(model, dataset):
    """Wall-clock and process CPU seconds of one `fit` over `dataset`."""
    wall, cpu = time.perf_counter(), time.process_time()
    model.fit(dataset, epochs=1, verbose=0, shuffle=False)
    return time.perf_counter() - wall, time.process_time() - cpu


def measure(args, builders, jit):
    """Tokens per wall second and per CPU second, every round, by model.

    The models are timed in interleaved rounds so that a slow spell of a shared
    machine hits all of them alike.
    """
    rng = np.random.default_rng(args.seed)
    warmup, _ = random_batches(args, rng, args.warmup)
    data, real_tokens = random_batches(args, rng, args.steps)
    data = data.cache()
    for _ in data:  # fill the cache: no input work inside the timings
        pass
    models = {}
    for name, build in builders.items():
        keras.utils.set_random_seed(args.seed)
        model = build(args)
        compile_model(model, jit)
        tick = time.perf_counter()
        timed_fit(model, warmup)  # traces (and compiles) the training step
        print(
            f"  built {name}: first steps {time.perf_counter() - tick:.0f} s",
            flush=True,
        )
        models[name] = model
    speeds = {name: {"wall": [], "cpu": []} for name in builders}
    for r in range(args.rounds):
        for name, model in models.items():
            wall, cpu = timed_fit(model, data)
            speeds[name]["wall"].append(real_tokens / wall)
            speeds[name]["cpu"].append(real_tokens / cpu)
        line = ", ".join(f"{n}: {s['wall'][-1]:,.0f}" for n, s in speeds.items())
        print(f"  round {r + 1}/{args.rounds} (tokens/s): {line}", flush=True)
    return speeds


# --------------------------------------------------------------- profiling


class _ConstantScore(BahdanauAttention):
    """Bahdanau attention whose scores are all 0: the loop without the score."""

    def build_score(self, query_dim, key_dim):
        pass  # no weights: none would get a gradient

    def precompute_keys(self, key):
        return key

    def score(self, query, processed_keys):
        batch = keras.ops.shape(query)[0]
        t_q = keras.ops.shape(query)[1]
        t_v = keras.ops.shape(processed_keys)[1]
        return keras.ops.zeros((batch, 1, t_q, t_v), dtype=self.compute_dtype)


PROFILE_VARIANTS = {
    "BahdanauDecoder, score replaced by zeros": lambda args: bahdanau_model(
        args, _ConstantScore(args.units)
    ),
}


# -------------------------------------------------------------------- main


def format_table(results, reference):
    """One row per model and jit setting; ratios to `reference` with the same jit."""
    lines = [
        "| model | jit | tokens/s (median) | rounds | × reference | × reference, CPU time |",
        "|---|---|---:|---|---:|---:|",
    ]
    for jit, speeds in results.items():
        base = statistics.median(speeds[reference]["wall"])
        base_cpu = statistics.median(speeds[reference]["cpu"])
        for name, values in speeds.items():
            median = statistics.median(values["wall"])
            median_cpu = statistics.median(values["cpu"])
            rounds = ", ".join(f"{v:,.0f}" for v in values["wall"])
            lines.append(
                f"| {name} | {'on' if jit else 'off'} | {median:,.0f} | {rounds} "
                f"| {median / base:.2f}× | {median_cpu / base_cpu:.2f}× |"
            )
    return "\n".join(lines)


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--steps", type=int, default=20, help="timed steps a round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=3, help="untimed first steps")
    parser.add_argument(
        "--jit",
        choices=("off", "on", "both"),
        default="off",
        help="compile the training step with XLA",
    )
    parser.add_argument(
        "--models",
        help="comma-separated subset of the models (the reference is always run)",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="also time variants of the Bahdanau model that locate its cost",
    )
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--source-length", type=int, default=16)
    parser.add_argument("--target-length", type=int, default=18)
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--embedding-dim", type=int, default=256)
    parser.add_argument("--units", type=int, default=256, help="decoder state")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-write", action="store_true", help="do not update docs/benchmarks.md")
    parser.add_argument(
        "--backends",
        help="comma-separated Keras backends among tensorflow, jax, torch: each in its own "
        "process, ratios to the TensorFlow reference",
    )
    parser.add_argument("--worker-json", help=argparse.SUPPRESS)  # one backend's results
    return parser.parse_args(argv)


def run_backends(args, argv):
    """Runs this script once per backend and returns {backend: speeds}."""
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    unknown = sorted(set(backends) - set(BACKENDS))
    if unknown:
        raise SystemExit(f"Unknown backend(s) {unknown}; choose from {BACKENDS}")
    if "tensorflow" not in backends:
        backends.insert(0, "tensorflow")  # the reference
    forwarded = []
    skip = False
    for a in argv:  # every option but --backends, --no-write and --jit
        if skip:
            skip = False
            continue
        if a in ("--backends", "--jit"):
            skip = True
            continue
        if a.startswith(("--backends=", "--jit=")) or a == "--no-write":
            continue
        forwarded.append(a)
    results = {}
    for backend in backends:
        with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
            out = f.name
        jit = args.jit if backend == "tensorflow" else ("on" if BACKEND_JIT[backend] else "off")
        if jit == "both":
            jit = "off"
        print(f"backend {backend} (jit {jit})", flush=True)
        env = dict(os.environ, KERAS_BACKEND=backend)
        command = [sys.executable, os.path.abspath(__file__), *forwarded]
        command += ["--jit", jit, "--no-write", "--worker-json", out]
        subprocess.run(command, env=env, check=True)
        with open(out, encoding="utf-8") as f:
            results[backend] = {"jit": jit == "on", "speeds": json.load(f)}
        os.remove(out)
    return results


def format_backend_table(results):
    """One row per backend and model; ratios to the TensorFlow reference."""
    base = statistics.median(results["tensorflow"]["speeds"][REFERENCE]["wall"])
    base_cpu = statistics.median(results["tensorflow"]["speeds"][REFERENCE]["cpu"])
    lines = [
        "| backend | model | jit | tokens/s (median) | rounds | × TF reference "
        "| × TF reference, CPU time |",
        "|---|---|---|---:|---|---:|---:|",
    ]
    for backend, result in results.items():
        for name, values in result["speeds"].items():
            median = statistics.median(values["wall"])
            median_cpu = statistics.median(values["cpu"])
            rounds = ", ".join(f"{v:,.0f}" for v in values["wall"])
            lines.append(
                f"| {backend} | {name} | {'on' if result['jit'] else 'off'} | {median:,.0f} "
                f"| {rounds} | {median / base:.2f}× | {median_cpu / base_cpu:.2f}× |"
            )
    return "\n".join(lines)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    if args.backends:
        started = time.perf_counter()
        results = run_backends(args, argv)
        table = format_backend_table(results)
        wall = time.perf_counter() - started
        print()
        print(table)
        if not args.no_write:
            body = "\n\n".join(
                [
                    f"Command: `{_report.command_line()}`  \n"
                    f"Machine: {_report.machine_description()}; {_report.versions()}  \n"
                    f"Date: {_report.today()}, revision {_report.git_revision()}; "
                    f"wall time {wall:.0f} s.",
                    "The models and data of the section above; each backend in a process "
                    "of its own, one after the other (`KERAS_BACKEND`), the models "
                    "interleaved within it; ratios to the TensorFlow reference "
                    f"({REFERENCE!r}) of this run.",
                    table,
                ]
            )
            path = _report.write_section(BACKEND_SECTION, body)
            print(f"Wrote the table to {os.path.relpath(path)}")
        return results
    builders = dict(MODELS)
    if args.models:
        wanted = {REFERENCE, *(n.strip() for n in args.models.split(","))}
        unknown = wanted - set(MODELS)
        if unknown:
            raise SystemExit(f"Unknown model(s) {sorted(unknown)}; see --help")
        builders = {n: b for n, b in MODELS.items() if n in wanted}
    if args.profile:
        builders.update(PROFILE_VARIANTS)
    jits = {"off": [False], "on": [True], "both": [False, True]}[args.jit]
    started = time.perf_counter()
    results = {}
    for jit in jits:
        print(f"jit_compile={jit}")
        results[jit] = measure(args, builders, jit)
        keras.backend.clear_session()
    wall = time.perf_counter() - started
    if args.worker_json:
        with open(args.worker_json, "w", encoding="utf-8") as f:
            json.dump(results[jits[0]], f)
        return results
    table = format_table(results, REFERENCE)
    print()
    print(table)
    print(f"\nWall time: {wall:.0f} s")
    if not args.no_write:
        body = "\n\n".join(
            [
                f"Command: `{_report.command_line()}`  \n"
                f"Machine: {_report.machine_description()}; "
                f"{_report.versions()}  \n"
                f"Date: {_report.today()}, revision {_report.git_revision()}; "
                f"wall time {wall:.0f} s.",
                f"Embedding {args.embedding_dim}, decoder {args.units}, encoder a "
                f"bidirectional GRU of {args.units // 2} per direction, vocabulary "
                f"{args.vocab:,}, batch {args.batch_size}, source length "
                f"{args.source_length}, target length {args.target_length} (random "
                "lengths from half to all, padding not counted). Target tokens per "
                "second in `model.fit` training steps after warm-up; "
                f"{args.rounds} interleaved rounds of {args.steps} steps, median; "
                f"ratios to {REFERENCE!r} in the same run.",
                table,
            ]
        )
        path = _report.write_section(SECTION, body)
        print(f"Wrote the table to {os.path.relpath(path)}")
    return results


if __name__ == "__main__":
    main()
