"""The simultaneous decoder on Python LiteRT: time per read and per write, and
agreement with Keras.

Builds an attention model of the translator's sizes with random weights (an
embedding of `--embedding`, a unidirectional GRU of `--units`,
`BahdanauDecoder` of `--units` over the policy's attention, vocabularies of
`--vocabulary`; with random weights END rarely wins, so the outputs run to
the stream's bound, 2n + 10 for the n tokens read, and exercise it;
`--end-bias` adds a bias to END's logit), for each policy (wait-3 over
`BahdanauAttention`, hard MILk, plain `BahdanauAttention` = consecutive),
exports it with `export_simultaneous_tflite` (width `--width`), and decodes
`--sources` random sources of 5 to 20 tokens twice: with the Keras `SimultaneousGenerator` and
with `SimultaneousLite` (the default interpreter: XNNPACK). Counts the
sources whose tokens or read/write trace differ, and times each `read` and
`write` call of the model (the median and the 95th percentile, in ms).

    python benchmarks/streaming_lite.py --write

Prints a table; `--write` records it in docs/benchmarks.md with the command,
the machine and the date. About 18 minutes on a 2-core CPU shared with a training run,
with the defaults; most of it is the Keras side.
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

from keras_attention import BahdanauAttention  # noqa: E402
from keras_attention import BahdanauDecoder  # noqa: E402
from keras_attention import MonotonicInfiniteLookbackAttention  # noqa: E402
from keras_attention import WaitKAttention  # noqa: E402
from keras_attention.export import export_simultaneous_tflite  # noqa: E402
from keras_attention.generation.seq2seq_generator import Seq2SeqGenerator  # noqa: E402
from keras_attention.generation.simultaneous_generator import SimultaneousGenerator  # noqa: E402
from keras_attention.runtime.streaming import SimultaneousLite  # noqa: E402

START, END = 1, 2
POLICIES = ("wait-3", "milk", "consecutive")


def build_model(policy, args, seed=0):
    keras.utils.set_random_seed(seed)
    source = keras.Input((None,), dtype="int32")
    target_in = keras.Input((None,), dtype="int32")
    embedded = keras.layers.Embedding(args.vocabulary, args.embedding, mask_zero=True)(source)
    memory = keras.layers.GRU(args.units, return_sequences=True)(embedded)
    target = keras.layers.Embedding(args.vocabulary, args.embedding, mask_zero=True)(target_in)
    if policy == "wait-3":
        attention = WaitKAttention(BahdanauAttention(args.units), k=3)
    elif policy == "milk":
        attention = MonotonicInfiniteLookbackAttention(args.units, mode="hard")
    else:
        attention = BahdanauAttention(args.units)
    outputs, _, _ = BahdanauDecoder(args.units, attention=attention)(target, memory)
    init = keras.initializers.RandomNormal(stddev=0.5)  # logits of a few units
    readout = keras.layers.Dense(args.vocabulary, kernel_initializer=init)
    model = keras.Model([source, target_in], readout(outputs))
    bias = np.zeros(args.vocabulary, "float32")
    bias[END] = args.end_bias
    readout.bias.assign(bias)
    return model


class TimedLite(SimultaneousLite):
    """`SimultaneousLite` with the time of each model call kept."""

    def reset(self):
        super().reset()
        self.times = getattr(self, "times", {"read": [], "write": []})

    def read(self, token):
        begin = time.perf_counter()
        accepted = super().read(token)
        self.times["read"].append(time.perf_counter() - begin)
        return accepted

    def write(self):
        begin = time.perf_counter()
        token = super().write()
        self.times["write"].append(time.perf_counter() - begin)
        return token


def run(policy, args, folder):
    generator = Seq2SeqGenerator.from_model(build_model(policy, args), START, END)
    simultaneous = SimultaneousGenerator(generator, max_source_length=args.width)
    path = os.path.join(folder, f"{policy}.tflite")
    export_simultaneous_tflite(simultaneous, path)
    lite = TimedLite(path)
    rng = np.random.default_rng(1)
    differ = 0
    writes_before_end = 0
    for _ in range(args.sources):
        source = [int(t) for t in rng.integers(3, args.vocabulary, size=rng.integers(5, 21))]
        expected = simultaneous.translate(source)
        tokens, actions = lite.translate(source)
        differ += (tokens, actions) != (expected.tokens, expected.actions)
        writes_before_end += "W" in expected.actions.rstrip("W")
    ms = {k: 1000 * np.asarray(v) for k, v in lite.times.items()}
    return {
        "policy": policy,
        "differ": differ,
        "early": writes_before_end,
        "size": os.path.getsize(path) / 1e6,
        **{f"{k}_median": float(np.median(v)) for k, v in ms.items()},
        **{f"{k}_p95": float(np.percentile(v, 95)) for k, v in ms.items()},
        "calls": {k: len(v) for k, v in ms.items()},
    }


TITLE = "The simultaneous decoder on Python LiteRT: time per read and per write"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sources", type=int, default=200)
    parser.add_argument("--width", type=int, default=64, help="max_source_length W")
    parser.add_argument("--vocabulary", type=int, default=8000)
    parser.add_argument("--embedding", type=int, default=256)
    parser.add_argument("--units", type=int, default=256)
    parser.add_argument("--end-bias", type=float, default=0.0)
    parser.add_argument("--policies", nargs="+", default=list(POLICIES), choices=POLICIES)
    parser.add_argument("--write", action="store_true", help="record in docs/benchmarks.md")
    args = parser.parse_args()
    started = time.perf_counter()
    lines = [
        f"Random weights at the translator's sizes: vocabulary {args.vocabulary}, embedding "
        f"{args.embedding}, a unidirectional GRU and `BahdanauDecoder` of {args.units}, the "
        f"stream's width W {args.width}; {args.sources} random sources of 5 to 20 tokens, "
        "decoded by the Keras `SimultaneousGenerator` and by the exported model "
        "(`export_simultaneous_tflite`, float32) through `SimultaneousLite` on Python LiteRT "
        "(its default CPU path). A source differs when its tokens or its read/write trace "
        "differ. Each `read` re-encodes the tokens read; with random weights END rarely "
        "wins, so most outputs run to the stream's bound (2n + 10).",
        "",
        "| policy | model MB | sources differing from Keras | sources with a write "
        "before the end | read ms median / p95 | write ms median / p95 | calls |",
        "|---|---|---|---|---|---|---|",
    ]
    print("\n".join(lines), flush=True)
    with tempfile.TemporaryDirectory() as folder:
        for policy in args.policies:
            r = run(policy, args, folder)
            row = (
                f"| {r['policy']} | {r['size']:.1f} | {r['differ']} of {args.sources} | "
                f"{r['early']} | {r['read_median']:.2f} / {r['read_p95']:.2f} | "
                f"{r['write_median']:.2f} / {r['write_p95']:.2f} | "
                f"{r['calls']['read']} reads, {r['calls']['write']} writes |"
            )
            print(row, flush=True)
            lines.append(row)
    lines += ["", f"{time.perf_counter() - started:.0f} s in all.  ", *_report.footer_lines()]
    if args.write:
        _report.write_section(TITLE, "\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
