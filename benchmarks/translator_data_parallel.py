"""The translator's own training on 1, 2 and 4 JAX devices: tokens per second,
and the losses, which must agree.

Trains what `python -m keras_attention.translation train` trains on JAX: the
model, loss and optimizer of `training.compiled_model` for a preset, on its
Multi30k batches as `train` makes them there (`make_dataset(...,
fixed_shapes=True)`: one shape per length bucket), under
`keras.distribution.DataParallel` over N devices
(`keras_attention.training.distribution.data_parallel`). Each count runs in a process of
its own; on a machine without N accelerators, N host CPU devices
(`XLA_FLAGS=--xla_force_host_platform_device_count=N`), which share the same
cores: no speed-up is expected there, the point is that the translator runs
and that the losses agree.

The vocabularies are learned once, as `train` learns them, from the first
`--train-pairs` training pairs (default: all); then every process builds the
model from the same seed and reads the same first `--steps` global batches of
`--batch-size` pairs (the global batch, the same for every count). Two
untimed passes of `model.fit` over them come first: XLA compiles each batch
shape, and the table's losses are the first pass's (the loss of step 1, and
the mean over its steps, as Keras reports it). Then `--rounds` timed passes of
`model.fit` over the same batches; tokens per second count the real target
tokens, not the padding. The median round is reported.

    PYTHONPATH=. python benchmarks/translator_data_parallel.py --data-dir DIR --write
    PYTHONPATH=. python benchmarks/translator_data_parallel.py --data-dir DIR \\
        --devices 1,2 --preset tiny --steps 3 --rounds 1   # a check, about a minute

With the defaults (preset "default", all 29,000 pairs, 20 steps of 64 pairs,
2 rounds) it takes about 5 minutes on a quiet 2-core CPU. Prints a table;
`--write` records it in docs/benchmarks.md with the command, the machine and
the date.
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _report  # noqa: E402

SECTION = "Translator data-parallel training on JAX devices"


# ------------------------------------------------------- in one JAX process


def training_pairs(args):
    """The first `--train-pairs` training pairs that `train` keeps."""
    from keras_attention.translation import load_multi30k
    from keras_attention.translation.training import filter_long_pairs

    train = load_multi30k(("train",), args.data_dir)["train"]
    en, fr = filter_long_pairs(train.en, train.fr)
    return en[: args.train_pairs], fr[: args.train_pairs]


def learn_vocabularies(args, folder):
    """Learns the two vocabularies once, as `train` does, into `folder`."""
    from keras_attention.translation import training
    from keras_attention.translation.tokenizer import SubwordTokenizer

    vocab_size = training.PRESETS[args.preset]["vocab_size"]
    for sentences, name in zip(training_pairs(args), ("en", "fr"), strict=True):
        tokenizer = SubwordTokenizer.build(sentences, vocab_size=vocab_size, lower_case=True)
        tokenizer.save(os.path.join(folder, name))


def batches(args):
    """The tokenizers and the first `args.steps` global batches, as NumPy."""
    from keras_attention.translation import make_dataset
    from keras_attention.translation.tokenizer import SubwordTokenizer

    en, fr = training_pairs(args)
    tokenizers = [SubwordTokenizer.load(os.path.join(args.vocabularies, n)) for n in ("en", "fr")]
    dataset = make_dataset(
        en, fr, *tokenizers, batch_size=args.batch_size, seed=args.seed, fixed_shapes=True
    )
    data = list(dataset.take(args.steps).as_numpy_iterator())
    if len(data) < args.steps:
        raise SystemExit(
            f"--train-pairs {args.train_pairs} give {len(data)} batches of "
            f"{args.batch_size}, fewer than --steps {args.steps}"
        )
    return tokenizers, data


def running_loss():
    """A callback whose `means` are Keras' running mean of the loss after
    each step of an epoch."""
    import keras

    class RunningLoss(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.means = []

        def on_train_batch_end(self, batch, logs=None):
            self.means.append(float(logs["loss"]))

    return RunningLoss()


def worker(args):
    """{"devices", "speeds" (tokens/s a round), "losses" (the first pass's
    step 1 and mean),
    "shapes" (distinct batch shapes), "tokens" (a pass's real target tokens)}."""
    import keras
    import numpy as np
    import tensorflow as tf

    from keras_attention.training import distribution
    from keras_attention.translation import training

    devices = len(keras.distribution.list_devices())
    if args.batch_size % devices:
        raise SystemExit(f"--batch-size {args.batch_size} does not divide by {devices} devices")
    config = dict(training.PRESETS[args.preset], attention="bahdanau", input_feeding=True)
    tokenizers, data = batches(args)
    tokens = int(sum(np.count_nonzero(y) for _, y in data))
    # Every batch with its sample weights, ones, as `pad_dataset` gives them
    # under `train --distribution`.
    data = [(tuple(x), y, np.ones(y.shape, "float32")) for x, y in data]
    ids = tf.TensorSpec((None, None), tf.int32)
    signature = ((ids, ids), ids, tf.TensorSpec((None, None), tf.float32))
    dataset = tf.data.Dataset.from_generator(lambda: iter(data), output_signature=signature)
    dataset = dataset.apply(tf.data.experimental.assert_cardinality(len(data)))
    with distribution.data_parallel(devices).scope():
        keras.utils.set_random_seed(args.seed)
        model = training.compiled_model(config, *tokenizers, seed=args.seed)
        # Untimed: XLA compiles each shape (the first step's twice: its
        # arguments are not yet placed on the devices). Keras' running mean
        # of the first pass: the loss of step 1, then the pass's mean.
        running = running_loss()
        model.fit(dataset, epochs=1, shuffle=False, verbose=0, callbacks=[running])
        model.fit(dataset, epochs=1, shuffle=False, verbose=0)
        speeds = []
        for _ in range(args.rounds):
            started = time.perf_counter()
            model.fit(dataset, epochs=1, shuffle=False, verbose=0)
            speeds.append(tokens / (time.perf_counter() - started))
            print(f"  {devices} devices: {speeds[-1]:,.0f} tokens/s", flush=True)
    shapes = sorted({x[0].shape for x, _, _ in data})
    return {
        "devices": devices,
        "speeds": speeds,
        "losses": [running.means[0], running.means[-1]],
        "shapes": shapes,
        "tokens": tokens,
    }


# ----------------------------------------------------------------- the driver


def run_worker(argv, count):
    env = dict(
        os.environ,
        KERAS_BACKEND="jax",
        XLA_FLAGS=f"--xla_force_host_platform_device_count={count}",
    )
    command = [sys.executable, os.path.abspath(__file__), *argv, "--worker"]
    completed = subprocess.run(command, env=env, stdout=subprocess.PIPE, text=True)
    lines = completed.stdout.strip().splitlines()
    for line in lines[:-1]:
        print(line)
    if completed.returncode != 0 or not lines:
        return {"failed": f"exit status {completed.returncode}"}
    return json.loads(lines[-1])


def forwarded(argv):
    """The options a worker gets: all but --write and --devices."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == "--devices":
            skip = True
        elif not (a == "--write" or a.startswith("--devices=")):
            out.append(a)
    return out


def table(results):
    lines = [
        "| JAX devices | tokens/s (median) | rounds | × 1 device | loss, step 1 | mean loss |",
        "|---:|---:|---|---:|---:|---:|",
    ]
    base = None
    for count, result in results.items():
        if "failed" in result:
            lines.append(f"| {count} | failed: {result['failed']} | | | | |")
            continue
        median = statistics.median(result["speeds"])
        base = base or median
        rounds = ", ".join(f"{v:,.0f}" for v in result["speeds"])
        first, mean = result["losses"]
        lines.append(
            f"| {count} | {median:,.0f} | {rounds} | {median / base:.2f}× "
            f"| {first:.6f} | {mean:.6f} |"
        )
    return "\n".join(lines)


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--devices", default="1,2,4", help="device counts, comma-separated")
    parser.add_argument("--data-dir", help="folder with the Multi30k .gz files")
    parser.add_argument("--preset", choices=("default", "tiny"), default="default")
    parser.add_argument(
        "--train-pairs",
        type=_report.positive_int,
        help="the first N training pairs (default: all, as train)",
    )
    parser.add_argument("--batch-size", type=_report.positive_int, default=64, help="global")
    parser.add_argument("--steps", type=_report.positive_int, default=20, help="batches a pass")
    parser.add_argument("--rounds", type=_report.positive_int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--write", action="store_true", help="record it in docs/benchmarks.md")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--vocabularies", help=argparse.SUPPRESS)  # the driver's folder
    return parser.parse_args(argv)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args)), flush=True)
        return 0
    started = time.perf_counter()
    results = {}
    with tempfile.TemporaryDirectory() as folder:
        print("Learning the vocabularies", flush=True)
        learn_vocabularies(args, folder)
        for count in _report.int_list(args.devices):
            print(f"JAX, {count} devices", flush=True)
            results[count] = run_worker([*forwarded(argv), "--vocabularies", folder], count)
    wall = time.perf_counter() - started
    done = [r for r in results.values() if "failed" not in r]
    shapes = f"{len(done[0]['shapes'])} batch shapes" if done else "—"
    report = table(results)
    print()
    print(report)
    print(f"\nWall time: {wall:.0f} s")
    if args.write:
        pairs = f"the first {args.train_pairs:,}" if args.train_pairs else "all the"
        what = (
            f"The translator of `train --preset {args.preset}` (`training.compiled_model`: "
            f"its model, smoothed cross-entropy and Adam), vocabularies learned from "
            f"{pairs} Multi30k training pairs, the first {args.steps} global "
            f"batches of {args.batch_size} pairs as `train` makes them on JAX "
            f"(`fixed_shapes=True`: {shapes}), the same in every process. "
            "`keras.distribution.DataParallel` over N devices, each count in a process of "
            "its own; the losses are those of the first of two untimed passes (step 1 and "
            f"the mean of the pass, from the same initial weights), the speeds those of "
            f"{args.rounds} timed "
            "passes of `fit` over the same batches (real target tokens per second). "
            "Without as many accelerators the devices are host CPU devices "
            "(`XLA_FLAGS=--xla_force_host_platform_device_count=N`) sharing the same "
            "cores: no speed-up is expected; the point is that it runs and that the "
            "losses agree."
        )
        body = "\n\n".join(
            [
                f"Command: `{_report.command_line()}`  \n"
                f"Machine: {_report.machine_description()}; {_report.versions()}  \n"
                f"Date: {_report.today()}, revision {_report.git_revision()}; "
                f"wall time {wall:.0f} s.",
                what,
                report,
            ]
        )
        path = _report.write_section(SECTION, body)
        print(f"Wrote the table to {os.path.relpath(path)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
