"""G2P: one recipe over several seeds, against the issue's target.

Reads run folders of `examples/g2p_cmudict.py train` that differ only in
their seed (each scored with `evaluate` on the same split) and prints each
seed's epochs, training minutes and scores, then the mean and range over the
seeds, greedy and beam, judged against the target: WER ≤ 23.0 % and PER ≤
5.4 % on the test split, trained in at most 60 minutes. Writes the table to
docs/benchmarks.md with `--write`. It trains nothing: the runs come first,

    python examples/g2p_cmudict.py train --run-dir runs/g2p_s1 --seed 1
    python examples/g2p_cmudict.py evaluate --run-dir runs/g2p_s1

each alone on the machine (training stops within a time budget, so other
work on the machine costs it epochs), then

    python benchmarks/g2p_seeds.py runs/g2p runs/g2p_s1 runs/g2p_s2 --write

If `evaluate --run-dir runs/g2p --ensemble runs/g2p_s1 runs/g2p_s2` has run,
the ensemble of the seeds is reported too, against the stretch target (WER ≤
21.0 %, the training time of all its runs stated).
"""

import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(__file__))
import _report  # noqa: E402

TITLE = "G2P: today's recipe over seeds (CMUdict test split)"
TARGET_WER, TARGET_PER, TARGET_MINUTES = 23.0, 5.4, 60.0
STRETCH_WER = 21.0  # ensembles allowed, their training time stated
# Keys of config.json that may differ between the runs of one recipe.
PER_RUN_KEYS = {"seed"}


def _read_json(path, made_by):
    if not os.path.exists(path):
        sys.exit(f"{path}: not found ({made_by} writes it)")
    with open(path, encoding="utf-8") as f:
        try:
            return json.load(f)
        except json.JSONDecodeError as e:
            sys.exit(f"{path}: not JSON ({e})")


def read_run(run_dir, split="test"):
    """One run's recipe, seed, epochs, minutes and scores (greedy and beam) on `split`."""
    config = _read_json(os.path.join(run_dir, "config.json"), "`train`")
    progress = _read_json(os.path.join(run_dir, "progress.json"), "`train`")
    scores = _read_json(os.path.join(run_dir, f"eval_{split}.json"), f"`evaluate --split {split}`")
    beams = [k for k in scores if k.startswith("beam")]
    if "greedy" not in scores or len(beams) != 1:
        sys.exit(
            f"{os.path.join(run_dir, f'eval_{split}.json')}: expected greedy and one beam "
            f"score, found {sorted(k for k in scores if isinstance(scores[k], dict))}"
        )
    if config.get("quick"):
        sys.exit(f"{run_dir}: a --quick run (300 words) is not a recipe run")
    seconds = [e["seconds"] for e in progress["epochs"]]
    return {
        "run_dir": run_dir,
        "config": config,
        "seed": config["seed"],
        "epochs": len(seconds),
        "minutes": progress["seconds"] / 60,
        "epoch_seconds": (min(seconds), max(seconds)) if seconds else (0.0, 0.0),
        "words": scores["words"],
        "file": scores.get("file", split),
        "beam_name": beams[0],
        "greedy": (scores["greedy"]["wer"], scores["greedy"]["per"]),
        "beam": (scores[beams[0]]["wer"], scores[beams[0]]["per"]),
    }


def check_same_recipe(runs):
    """Exits naming the first setting that differs, or a seed used twice."""
    first = runs[0]
    for run in runs[1:]:
        keys = (set(first["config"]) | set(run["config"])) - PER_RUN_KEYS
        for key in sorted(keys):
            a, b = first["config"].get(key), run["config"].get(key)
            if a != b:
                sys.exit(
                    f"not one recipe: {key} is {a!r} in {first['run_dir']} and {b!r} in "
                    f"{run['run_dir']} (only the seed may differ)"
                )
        if run["words"] != first["words"] or run["beam_name"] != first["beam_name"]:
            sys.exit(
                f"not scored alike: {first['run_dir']} ({first['words']} words, "
                f"{first['beam_name']}) and {run['run_dir']} ({run['words']} words, "
                f"{run['beam_name']})"
            )
    seeds = [r["seed"] for r in runs]
    if len(set(seeds)) != len(seeds):
        sys.exit(f"a seed appears twice: {seeds}")


def spread(values):
    """`"23.15 (22.90 to 23.40)"`: mean and range, two decimals."""
    return f"{statistics.mean(values):.2f} ({min(values):.2f} to {max(values):.2f})"


def verdict(runs):
    """Whether the mean over the seeds meets the targets: (met, line)."""
    wer = statistics.mean(r["beam"][0] for r in runs)
    per = statistics.mean(r["beam"][1] for r in runs)
    slowest = max(r["minutes"] for r in runs)
    met = wer <= TARGET_WER and per <= TARGET_PER and slowest <= TARGET_MINUTES
    checks = [
        f"WER {wer:.2f} {'≤' if wer <= TARGET_WER else '>'} {TARGET_WER}",
        f"PER {per:.2f} {'≤' if per <= TARGET_PER else '>'} {TARGET_PER}",
        f"at most {slowest:.1f} minutes of training "
        f"{'≤' if slowest <= TARGET_MINUTES else '>'} {TARGET_MINUTES:.0f}",
    ]
    word = "met" if met else "not met"
    if len(runs) < 3:
        met, word = False, f"not judged: {len(runs)} of the 3 seeds it asks for"
    seeds = f"{len(runs)} seed{'s' if len(runs) > 1 else ''}"
    return met, f"Target ({runs[0]['beam_name']}, mean of {seeds}): {word}: " + ", ".join(checks)


def table(runs):
    beam = runs[0]["beam_name"]
    lines = [
        f"| seed | epochs | training minutes | seconds an epoch | WER greedy / {beam} (%) "
        f"| PER greedy / {beam} (%) |",
        "|---:|---:|---:|---|---:|---:|",
    ]
    for r in sorted(runs, key=lambda r: r["seed"]):
        low, high = r["epoch_seconds"]
        lines.append(
            f"| {r['seed']} | {r['epochs']} | {r['minutes']:.1f} | {low:.0f} to {high:.0f} "
            f"| {r['greedy'][0]:.2f} / {r['beam'][0]:.2f} "
            f"| {r['greedy'][1]:.2f} / {r['beam'][1]:.2f} |"
        )
    for name in ("greedy", "beam"):
        label = "greedy" if name == "greedy" else beam
        lines.append(
            f"| mean (range), {label} | | | | {spread([r[name][0] for r in runs])} "
            f"| {spread([r[name][1] for r in runs])} |"
        )
    return "\n".join(lines)


def read_ensemble(runs, split="test"):
    """The scores of `evaluate --ensemble` over exactly these runs, or None.

    `evaluate --run-dir R0 --ensemble R1 R2` writes them to
    `R0/eval_SPLIT_ensemble3.json`, naming its runs.
    """
    first = runs[0]["run_dir"]
    path = os.path.join(first, f"eval_{split}_ensemble{len(runs)}.json")
    if len(runs) < 2 or not os.path.exists(path):
        return None
    scores = _read_json(path, "`evaluate --ensemble`")
    named = [os.path.normpath(r) for r in scores.get("runs", [])]
    if named != [os.path.normpath(r["run_dir"]) for r in runs]:
        sys.exit(f"{path}: an ensemble of {scores.get('runs')}, not of these runs")
    beam = next(k for k in scores if k.startswith("beam"))
    return {
        "greedy": (scores["greedy"]["wer"], scores["greedy"]["per"]),
        "beam": (scores[beam]["wer"], scores[beam]["per"]),
        "beam_name": beam,
        "minutes": sum(r["minutes"] for r in runs),
    }


def ensemble_lines(runs, ensemble):
    met = ensemble["beam"][0] <= STRETCH_WER
    return [
        "",
        f"The {len(runs)} runs as one model (`evaluate --ensemble`: at each step the mean of "
        f"their probabilities), {ensemble['minutes']:.0f} minutes of training in all: greedy "
        f"{ensemble['greedy'][0]:.2f} / {ensemble['greedy'][1]:.2f}, {ensemble['beam_name']} "
        f"{ensemble['beam'][0]:.2f} / {ensemble['beam'][1]:.2f} (WER / PER, %). Stretch target "
        f"(WER ≤ {STRETCH_WER}): {'met' if met else 'not met'}.",
    ]


def report(runs, ensemble=None):
    config = runs[0]["config"]
    recipe = (
        f"{config['attention']} attention, {config['encoder_layers']}-layer bi-LSTM encoder "
        f"of {config['encoder_units']} per direction, decoder {config['units']}, "
        f"dropout {config['dropout']}, label smoothing {config.get('label_smoothing', 0.0):g}, "
        f"batch {config['batch_size']}, peak learning rate "
        f"{config['learning_rate']:g}, {config['max_minutes']:g}-minute budget"
    )
    _, line = verdict(runs)
    return "\n".join(
        [
            f"Runs {', '.join('`' + r['run_dir'] + '`' for r in runs)} of "
            "`examples/g2p_cmudict.py train` with today's defaults "
            f"({recipe}), trained on `{config['train_file']}`, alike but for the seed, "
            f"each alone on the machine; scored with `evaluate` on the "
            f"{runs[0]['words']:,} words of `{runs[0]['file']}`.",
            "",
            table(runs),
            "",
            line + ".",
            *(ensemble_lines(runs, ensemble) if ensemble else []),
            "",
            *_report.footer_lines(),
        ]
    )


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("run_dirs", nargs="+", help="run folders of one recipe, one per seed")
    p.add_argument("--split", default="test", help="the split `evaluate` scored")
    p.add_argument("--write", action="store_true", help="record it in docs/benchmarks.md")
    args = p.parse_args(argv)
    runs = [read_run(d, args.split) for d in args.run_dirs]
    check_same_recipe(runs)
    text = report(runs, read_ensemble(runs, args.split))
    print(text)
    if args.write:
        print(f"written to {_report.write_section(TITLE, text)}")


if __name__ == "__main__":
    main()
