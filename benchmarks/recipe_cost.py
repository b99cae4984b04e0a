"""What label smoothing, the weight average, tied embeddings, a wider encoder and the conditional
decoder cost per training step.

Builds the translator of the default sizes (embedding 128, units 256, Bahdanau
attention) seven times: with and without `SmoothedSparseCrossentropy`'s smoothing
and Adam's moving average of the weights (`use_ema`), with the output layer
tied to the target embedding (`tie_embeddings=True`), tied with an encoder
of 256 units per direction instead of 128 (`encoder_units=256`), and tied with
the conditional decoder (`conditional=True`), and times
`model.fit` over the same padded random batches, the seven models interleaved in
each round (batches and timer from `decoder_speed.py`). CPU time of the process is
the measure: on a machine shared with other jobs it moves less than wall
time. Writes the "Training recipe cost" section of docs/benchmarks.md.

    python benchmarks/recipe_cost.py --steps 20 --rounds 3
"""

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _report  # noqa: E402
import decoder_speed  # noqa: E402

from keras_attention import SmoothedSparseCrossentropy  # noqa: E402
from keras_attention.translation.model import build_translator  # noqa: E402

# name -> (label smoothing, EMA momentum, tied embeddings, encoder units per
# direction (None: units / 2), conditional decoder); the first is the reference.
RECIPES = {
    "plain cross-entropy": (0.0, 0.0, False, None, False),
    "label smoothing 0.1": (0.1, 0.0, False, None, False),
    "EMA 0.999": (0.0, 0.999, False, None, False),
    "label smoothing 0.1 + EMA 0.999": (0.1, 0.999, False, None, False),
    "tied embeddings": (0.0, 0.0, True, None, False),
    "tied embeddings, encoder 256 per direction": (0.0, 0.0, True, 256, False),
    "tied embeddings, conditional decoder": (0.0, 0.0, True, None, True),
}
# The shapes `decoder_speed.random_batches` reads; vocabulary of the real run.
SHAPES = argparse.Namespace(batch_size=64, source_length=16, target_length=18, vocab=2900)


def _model(smoothing, momentum, tie_embeddings, encoder_units, conditional):
    keras.utils.set_random_seed(0)
    model = build_translator(
        SHAPES.vocab,
        SHAPES.vocab,
        tie_embeddings=tie_embeddings,
        encoder_units=encoder_units,
        conditional=conditional,
    )
    optimizer = keras.optimizers.Adam(
        1e-3, global_clipnorm=1.0, use_ema=bool(momentum), ema_momentum=momentum
    )
    model.compile(optimizer=optimizer, loss=SmoothedSparseCrossentropy(smoothing))
    return model


def measure(steps, rounds):
    data, _ = decoder_speed.random_batches(SHAPES, np.random.default_rng(0), steps)
    data = data.cache()
    models = {}
    for name, recipe in RECIPES.items():
        models[name] = _model(*recipe)
        models[name].fit(data.take(2), epochs=1, verbose=0)  # trace and warm up
    cpu = {name: [] for name in RECIPES}
    wall = {name: [] for name in RECIPES}
    for _ in range(rounds):
        for name, model in models.items():
            seconds, cpu_seconds = decoder_speed.timed_fit(model, data)
            wall[name].append(seconds)
            cpu[name].append(cpu_seconds)
    weights = {name: model.count_params() for name, model in models.items()}
    return cpu, wall, weights


def report(cpu, wall, weights, steps, rounds, load=None):
    reference = next(iter(RECIPES))
    ref_cpu = float(np.median(cpu[reference]))
    ref_wall = float(np.median(wall[reference]))
    lines = [
        f"Translator of the default sizes (Bahdanau, embedding 128, units 256), vocabulary "
        f"{SHAPES.vocab}, batch {SHAPES.batch_size}, source {SHAPES.source_length}, target "
        f"{SHAPES.target_length}, random tokens and lengths (half to all, padded). "
        f"`model.fit` over {steps} steps after warm-up, {rounds} interleaved rounds; "
        "medians, ratios to plain cross-entropy in the same run. The CPU-time ratio is "
        "the measure; wall time on a shared virtual machine moves in coarse steps.",
        "",
        "| recipe | weights | CPU s per step | × plain, CPU time | rounds (CPU s) "
        "| × plain, wall |",
        "|---|---:|---:|---:|---|---:|",
    ]
    for name in RECIPES:
        median_cpu = float(np.median(cpu[name]))
        median_wall = float(np.median(wall[name]))
        rounds_text = ", ".join(f"{v:.2f}" for v in cpu[name])
        lines.append(
            f"| {name} | {weights[name]:,} | {median_cpu / steps:.3f} | "
            f"{median_cpu / ref_cpu:.2f}× | "
            f"{rounds_text} | {median_wall / ref_wall:.2f}× |"
        )
    lines += [
        "",
        f"Command: `{_report.command_line()}`  ",
        f"Machine: {_report.machine_description()}"
        + (f", load average {load:.1f} at the start" if load is not None else "")
        + f"; {_report.versions()}  ",
        f"Date: {_report.today()}, revision {_report.git_revision()}",
    ]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=20, help="training steps per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.rounds < 1:
        parser.error("--steps and --rounds must be at least 1")
    load = os.getloadavg()[0]
    cpu, wall, weights = measure(args.steps, args.rounds)
    text = report(cpu, wall, weights, args.steps, args.rounds, load)
    print(text)
    if not args.no_write:
        print("written to", _report.write_section("Training recipe cost", text))


if __name__ == "__main__":
    main()
