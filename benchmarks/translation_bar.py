"""The translation bar: BLEU of the trained translators against LIUM-CVC at WMT17.

Reads what the `train`, `evaluate` and `explain` commands of
`python -m keras_attention.translation` wrote into their run folders (config.json,
history.csv, eval/results.json, explain.json), prints the tables and writes them
to the "Translation quality" section of docs/benchmarks.md. It measures nothing
itself: every number comes from those files.

    python benchmarks/translation_bar.py --run runs/bahdanau --baseline runs/none

The runs themselves (about an hour of training each on a 2-core CPU):

    python -m keras_attention.translation --data-dir DATA train --attention bahdanau \\
        --run-dir runs/bahdanau --max-minutes 55
    python -m keras_attention.translation --data-dir DATA evaluate --run-dir runs/bahdanau
    python -m keras_attention.translation --data-dir DATA explain --run-dir runs/bahdanau
    python -m keras_attention.translation --data-dir DATA evaluate --run-dir runs/bahdanau \
        --methods greedy --splits test_2016_flickr --baseline-run-dir runs/none \
        --heatmaps 1 --out-dir runs/bahdanau/eval_vs_none
"""

import argparse
import csv
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _report  # noqa: E402

# Published text-only GRU attention system (LIUM-CVC, WMT17 multimodal task,
# En→Fr; embedding 128, GRU 256, BPE 10k), lowercased and tokenized BLEU.
PUBLISHED = {"test_2016_flickr": 59.0, "test_2017_flickr": 51.9}
TARGETS = {"test_2016_flickr": 59.0, "test_2017_flickr": 52.0}
SPLITS = ("test_2016_flickr", "test_2017_flickr", "test_2017_mscoco")


def _load(run):
    run = Path(run)
    config = json.loads((run / "config.json").read_text())
    with open(run / "history.csv") as f:
        history = list(csv.DictReader(f))
    results_path = run / "eval" / "results.json"
    results = json.loads(results_path.read_text()) if results_path.exists() else {}
    explain_path = run / "explain.json"
    explain = json.loads(explain_path.read_text()) if explain_path.exists() else None
    return config, history, results, explain


def _training_line(name, config, history):
    best = min(history, key=lambda r: float(r["val_loss"]))
    return (
        f"| {name} | {config['embedding_dim']} / {config['units']} / "
        f"{_encoder_units(config)} | "
        f"{config['source_vocab_size']} / {config['target_vocab_size']} | "
        f"{config.get('max_minutes') or '—'} | {len(history)} | "
        f"{config.get('train_minutes_last_session', float('nan')):.1f} | "
        f"{float(best['val_loss']):.3f} (epoch {int(best['epoch']) + 1}) | "
        f"{_recipe_cell(config)} | {'tied' if config.get('tie_embeddings') else 'Dense'} |"
    )


def _model_name(config):
    # Runs trained before `--conditional` and `--decoder-init` existed had the
    # plain decoder, started from the encoder's final states.
    notes = []
    if config.get("conditional"):
        notes.append("conditional decoder")
    if config.get("decoder_init", "final") == "mean":
        notes.append("s_0 from the mean of the memory")
    return f"{config['attention']} ({', '.join(notes)})" if notes else config["attention"]


def _encoder_units(config):
    # Runs trained before `--encoder-units` existed had units / 2 per direction.
    return config.get("encoder_units") or config["units"] // 2


def _recipe_cell(config):
    # Runs trained before these options had neither.
    smoothing = config.get("label_smoothing", 0.0)
    momentum = config.get("ema_momentum", 0.0)
    return f"{smoothing:g} / {f'{momentum:g}' if momentum else 'off'}"


def _beam_words(results):
    """The beam settings `evaluate` recorded (runs before that used 4 and 0.6)."""
    settings = {
        (scores.get("beam_width", 4), scores.get("length_penalty", 0.6))
        for key, scores in results.items()
        if key.endswith("/beam")
    }
    if not settings:
        return ""
    words = "; ".join(f"width {w}, GNMT length penalty {p:g}" for w, p in sorted(settings))
    return f" Beam: {words}."


def _schedule_words(config):
    # Runs trained before `--lr-schedule` existed used the plateau schedule.
    if config.get("lr_schedule", "plateau") == "plateau":
        return "halved when the validation loss stops falling"
    return "cosine decay to 5 % over the epochs or the time budget"


def _stopping_line(config, history):
    """Why the attention run stopped, read from its history."""
    losses = [float(r["val_loss"]) for r in history]
    best = losses.index(min(losses))
    last = ", ".join(f"{v:.3f}" for v in losses[-3:])
    name = config["attention"]
    if len(history) >= config["epochs"]:
        return f"The {name} run trained all {config['epochs']} epochs (last val losses: {last})."
    if best == len(losses) - 1:
        return (
            f"What limits it: the {name} run stopped on its time budget after "
            f"{len(history)} epochs, not on early stopping, while its validation loss "
            f"was still falling (last epochs: {last})."
        )
    return (
        f"The {name} run stopped after {len(history)} epochs; its best validation loss "
        f"was at epoch {best + 1} (last epochs: {last})."
    )


def build_report(run, baseline=None):
    config, history, results, explain = _load(run)
    runs = [(_model_name(config), config, history, results)]
    if baseline:
        b_config, b_history, b_results, _ = _load(baseline)
        runs.append(("none (baseline)", b_config, b_history, b_results))
    lines = [
        "The bar: LIUM-CVC's text-only GRU attention system at WMT17 (embedding 128, "
        "GRU 256, BPE 10k, single run) scored 59.0 BLEU on test_2016_flickr and 51.9 on "
        "test_2017_flickr, lowercased and Moses-tokenized. Target: at least 59.0 and "
        "52.0 under that scoring from a training run of about one hour on a 2-core CPU.",
        "",
        f"Training (`--preset {config['preset']}`: dropout {config['dropout']}, Adam "
        f"{config['learning_rate']:g} with global_clipnorm 1, "
        f"{_schedule_words(config)}, label smoothing, a moving average of the "
        f"weights and the output layer (its own Dense, or tied to the target "
        f"embedding) as in the table, batch {config['batch_size']}, lowercased WordPiece "
        "vocabularies learned from the training split; `--max-minutes` is the time "
        "budget, after which training stops at the end of the epoch):",
        "",
        "| model | embedding / decoder units / encoder units per direction | "
        "vocab en / fr | --max-minutes | epochs | "
        "train minutes | best val loss | label smoothing / EMA momentum | output layer |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, cfg, hist, _ in runs:
        lines.append(_training_line(name, cfg, hist))
    if len({_recipe_cell(cfg) for _, cfg, _, _ in runs}) > 1:
        lines += [
            "",
            "The runs differ in label smoothing, whose term is part of the logged "
            "validation loss: compare their BLEU, not their validation losses.",
        ]
    lines += [
        "",
        "BLEU (lc, tok): lowercased, Moses-tokenized, sacreBLEU with `tokenize=none` "
        "(the published scoring). BLEU (cased): sacreBLEU on detokenized cased text "
        "(the first letter re-capitalized)." + _beam_words(results),
        "",
        "| model | split | decoding | BLEU (lc, tok) | BLEU (cased) | chrF | target |",
        "|---|---|---|---|---|---|---|",
    ]
    signature = None
    for name, _, _, res in runs:
        for split in SPLITS:
            for method in ("greedy", "beam"):
                scores = res.get(f"{split}/{method}")
                if scores is None:
                    continue
                signature = signature or scores.get("bleu_signature")
                target = TARGETS.get(split) if name == runs[0][0] else None
                verdict = "—"
                if target is not None:
                    met = scores["bleu_lc_tok"] >= target
                    verdict = f"≥ {target}: {'met' if met else 'not met'}"
                lines.append(
                    f"| {name} | {split} | {method} | {scores['bleu_lc_tok']} | "
                    f"{scores['bleu']} | {scores['chrf']} | {verdict} |"
                )
    if signature:
        lines += ["", f"sacreBLEU signature (cased): `{signature}`"]
    lines += ["", _stopping_line(config, history)]
    curves = results.get("test_2016_flickr/bleu_by_length")
    # `evaluate --baseline-run-dir` puts both models on one plot.
    both = Path(run) / "eval_vs_none" / "results.json"
    if both.exists():
        curves = json.loads(both.read_text()).get("test_2016_flickr/bleu_by_length", curves)
    if curves:
        names = list(curves)
        # The docs' plot is of the run against the baseline; a run alone
        # has its own plot in its folder.
        plotted = both.exists()
        where = (
            "plot: `docs/img/bleu_by_length.png`, written by `evaluate --baseline-run-dir`"
            if plotted
            else "the run's plot: `eval/bleu_by_length.test_2016_flickr.png` in its folder"
        )
        lines += [
            "",
            f"BLEU (lc, tok) by source length on test_2016_flickr, greedy ({where}):",
            "",
            "| English words | sentences | " + " | ".join(names) + " |",
            "|---|---|" + "---|" * len(names),
        ]
        for i, (low, high, n, _) in enumerate(curves[names[0]]):
            cells = " | ".join(str(curves[k][i][3]) for k in names)
            lines.append(f"| {low}-{high} | {n} | {cells} |")
        if plotted:
            lines += ["", "![BLEU by source length, test_2016_flickr](img/bleu_by_length.png)"]
    if explain:
        lines += [
            "",
            "Attention ablation (`explain`, test_2016_flickr, greedy): the decoder's "
            "attention weights replaced at decode time.",
            "",
            "| attention weights | mean TVD of next-token distribution | BLEU (lc, tok) | "
            "BLEU (cased) |",
            "|---|---|---|---|",
        ]
        for name, row in explain.items():
            lines.append(f"| {name} | {row['tvd']} | {row['bleu_lc_tok']} | {row['bleu']} |")
        sharpness = explain.get("model's attention", {}).get("sharpness")
        if sharpness:
            lines += [
                "",
                f"Sharpness of the model's attention over its {sharpness['steps']} greedy "
                f"steps: entropy / log(source tokens) {sharpness['entropy']} (0: one token, "
                f"1: uniform), largest weight {sharpness['max_weight']}, largest weight on "
                f"the last source token at {sharpness['on_last_token']:.1%} of the steps.",
            ]
    lines += [
        "",
        f"Machine: {_report.machine_description()}; {_report.versions()}. The train "
        "minutes are wall time on that machine, which other jobs may share. "
        f"Written {_report.today()} by "
        f"`{_report.command_line()}`.",
    ]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", default="runs/bahdanau", help="the attention run folder")
    parser.add_argument("--baseline", help="the run folder of --attention none")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args(argv)
    report = build_report(args.run, args.baseline)
    print(report)
    if not args.no_write:
        print("written to", _report.write_section("Translation quality", report))


if __name__ == "__main__":
    main()
