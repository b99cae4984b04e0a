"""How sharp a monotonic G2P model's soft alignments are: why hard decoding works.

For each run given (trained with `--attention monotonic`), decodes every
tenth word of `cmudict-0.7b.train-dev-1-21` greedily with the expected
(soft) alignment and prints, over all output steps: the share of steps that
put more than 0.9 of their weight on one letter, the median of the largest
weight, and the share of steps whose weights sum to less than 0.5 (the
alignment has run past the last letter). Hard decoding picks one letter per
step, so it agrees with soft decoding where the soft weights are already
one-hot. Takes under a minute per run on a 2-core CPU.

    python benchmarks/g2p_monotonic_sharpness.py runs/g2p_lesson/monotonic_seed0 \\
        runs/g2p_lesson/monotonic_noise0_seed0
"""

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
import _report  # noqa: E402


def sharpness(g2p, run, words, batch_size=128):
    model, vocab, _ = g2p.load_run(run)
    generator = g2p.make_generator(model, "soft")
    largest, total = [], []
    for begin in range(0, len(words), batch_size):
        chunk = words[begin : begin + batch_size]
        sources = [vocab.encode_word(w) for w in chunk]
        source = keras.utils.pad_sequences(sources, padding="post")  # (B, S), 0-padded
        out = generator.greedy(source)
        attention = np.asarray(out["attention"])  # (B, L, S)
        lengths = np.asarray(out["lengths"])
        for row, n in zip(attention, lengths, strict=True):
            largest.extend(row[:n].max(-1))
            total.extend(row[:n].sum(-1))
    largest, total = np.array(largest), np.array(total)
    return {
        "steps": len(largest),
        "one_hot": 100 * float((largest > 0.9).mean()),
        "median_largest": float(np.median(largest)),
        "leaked": 100 * float((total < 0.5).mean()),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("runs", nargs="+", help="run folders of monotonic models")
    parser.add_argument("--data-dir", default=os.path.join("..", "shared", "data", "cmudict"))
    parser.add_argument("--every", type=int, default=10, help="score every N-th dev word")
    args = parser.parse_args(argv)
    g2p = _report.load_g2p_example()
    dev = g2p.read_split(args.data_dir, "cmudict-0.7b.train-dev-1-21")
    words = sorted(dev)[:: args.every]
    print(
        f"{len(words)} dev words, soft greedy decoding\n\n"
        "| run | steps | largest weight > 0.9 | median largest weight | weights sum < 0.5 |\n"
        "|---|---:|---:|---:|---:|"
    )
    results = {}
    for run in args.runs:
        r = results[run] = sharpness(g2p, run, words)
        print(
            f"| {run} | {r['steps']:,} | {r['one_hot']:.1f} % | {r['median_largest']:.3f} "
            f"| {r['leaked']:.1f} % |"
        )
    return results


if __name__ == "__main__":
    main()
