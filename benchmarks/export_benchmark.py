"""Exported TFLite translators against Keras: size, BLEU and one-thread latency.

For a finished training run, exports the TFLite variants (float32, float16
weights, dynamic-range int8) and measures, in the same process:

- size of each `.tflite` file (target: int8 ≤ 10 MB);
- BLEU on lowercased, Moses-tokenized text (`evaluation.score`'s
  `bleu_lc_tok`) on test_2016_flickr, greedy search, for Keras and for each
  variant (targets: change vs Keras ≤ 0.3 for float32 and float16, ≤ 1.0 for
  int8). The TFLite path is the app's: `examples/tflite_translate.py`'s
  pure-Python tokenizer, the `translate` signature, its detokenizer;
- greedy latency per sentence, batch 1, ids in and ids out, on ONE thread:
  TFLite with `num_threads=1`; Keras as a `tf.function` over
  `Translator.greedy_graph` with TensorFlow's intra- and inter-op pools at 1 thread.
  The paths are timed interleaved, sentence by sentence, over several rounds;
  the table gives the median and the mean per sentence and their ratios to
  Keras (target: TFLite median ≤ 0.5× Keras).

Prints a table and writes it to docs/benchmarks.md, section "Export", between
the markers `<!-- export:start -->` and `<!-- export:end -->` (the rest of the
file is left as it is), unless `--no-write`.

    python benchmarks/export_benchmark.py runs/bahdanau
    python benchmarks/export_benchmark.py /tmp/tiny --max-sentences 100   # quick look

Time on a 2-core CPU for the default model: the export about a minute, BLEU
about a minute per variant, latency a few minutes.
"""

import argparse
import importlib.util
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _report  # noqa: E402

from keras_attention.translation import evaluation  # noqa: E402
from keras_attention.translation import export  # noqa: E402
from keras_attention.translation import load_multi30k  # noqa: E402
from keras_attention.translation.lite import VARIANTS  # noqa: E402
from keras_attention.translation.translator import MODEL_FILE  # noqa: E402
from keras_attention.translation.translator import load_run  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "tflite_translate.py"
SECTION = "Export"
START_MARKER = "<!-- export:start -->"
END_MARKER = "<!-- export:end -->"
KERAS = "Keras (tf.function greedy)"
# name → (largest BLEU drop vs Keras, largest size in MB); None: no target.
TARGETS = {"float32": (0.3, None), "float16": (0.3, None), "int8": (1.0, 10.0)}
LATENCY_RATIO_TARGET = 0.5


def _load_example():
    spec = importlib.util.spec_from_file_location("tflite_translate", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _progress(done, total, what):
    if not sys.stdout.isatty():  # a log file gets the tables only
        return
    print(f"\r  {what}: {done}/{total}", end="", flush=True)
    if done == total:
        print()


def keras_bleu(translator, sources, references):
    decoded = evaluation.decode_corpus(
        translator, sources, method="greedy", progress=sys.stdout.isatty()
    )
    hypotheses = evaluation.detokenize_output(decoded["text"])
    return evaluation.score(hypotheses, references)["bleu_lc_tok"]


def lite_bleu(lite, sources, references, name):
    texts = []
    for i, sentence in enumerate(sources):
        texts.append(lite.translate(sentence)[0])
        if (i + 1) % 50 == 0 or i + 1 == len(sources):
            _progress(i + 1, len(sources), name)
    hypotheses = evaluation.detokenize_output(texts)
    return evaluation.score(hypotheses, references)["bleu_lc_tok"]


def latencies(translator, lites, source_ids, rounds):
    """Seconds per sentence for each path, timed interleaved."""
    greedy = tf.function(
        translator.greedy_graph, input_signature=[tf.TensorSpec([1, None], tf.int32)]
    )
    runners = {KERAS: lambda ids: greedy(ids)["tokens"].numpy()}
    for name, lite in lites.items():
        runners[name] = lambda ids, lite=lite: lite.translate_ids(ids[0].tolist())
    batches = [np.array([ids], np.int32) for ids in source_ids if ids]
    for run in runners.values():  # warm-up: tracing, allocation
        for ids in batches[:3]:
            run(ids)
    times = {name: [] for name in runners}
    names = list(runners)
    for r in range(rounds):
        for i, ids in enumerate(batches):
            # Rotate the order so that no path always runs right after another.
            for name in names[i % len(names) :] + names[: i % len(names)]:
                start = time.perf_counter()
                runners[name](ids)
                times[name].append(time.perf_counter() - start)
            if (i + 1) % 50 == 0 or i + 1 == len(batches):
                _progress(r * len(batches) + i + 1, rounds * len(batches), "latency")
    return times


def build_table(rows):
    header = (
        "| model | size (MB) | BLEU lc tok | Δ vs Keras | ms / sentence (median) "
        "| × Keras (median) | ms / sentence (mean) | × Keras (mean) | targets |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|---|\n"
    )
    lines = []
    for row in rows:
        lines.append(
            f"| {row['name']} | {row['size']:.2f} | {row['bleu']:.2f} | "
            f"{row['delta']:+.2f} | {row['median_ms']:.1f} | {row['ratio']:.2f} | "
            f"{row['mean_ms']:.1f} | {row['mean_ratio']:.2f} | {row['targets']} |"
        )
    return header + "\n".join(lines) + "\n"


def _targets(variant, size, delta, ratio):
    if variant is None:
        return "reference"
    max_drop, max_size = TARGETS[variant]
    checks = [f"ΔBLEU ≥ -{max_drop}: {'yes' if delta >= -max_drop else 'NO'}"]
    if max_size is not None:
        checks.append(f"≤ {max_size:g} MB: {'yes' if size <= max_size else 'NO'}")
    checks.append(
        f"≤ {LATENCY_RATIO_TARGET}× Keras: {'yes' if ratio <= LATENCY_RATIO_TARGET else 'NO'}"
    )
    return "; ".join(checks)


def replace_marked_section(text, body):
    """`text` with the part between the export markers replaced by `body`.

    Without the markers, appends a `## Export` section holding them. The
    heading stays outside the markers, so `_report.replace_section` (which
    cuts sections at `## ` lines) never splits them.
    """
    block = f"{START_MARKER}\n{body.strip()}\n{END_MARKER}"
    start, end = text.find(START_MARKER), text.find(END_MARKER)
    if start != -1 and end > start:
        return text[:start] + block + text[end + len(END_MARKER) :]
    text = text.rstrip("\n")
    return (text + "\n\n" if text else "") + f"## {SECTION}\n\n{block}\n"


def write_docs(body, path=_report.DOCS):
    path = os.path.normpath(path)
    text = _report.HEADER
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            text = f.read()
    with open(path, "w", encoding="utf-8") as f:
        f.write(replace_marked_section(text, body))
    return path


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("run_dir", help="a finished training run")
    parser.add_argument("--data-dir", help="folder with the Multi30k .gz files")
    parser.add_argument("--split", default="test_2016_flickr")
    parser.add_argument("--max-sentences", type=int, help="score only the first N")
    parser.add_argument(
        "--latency-sentences", type=int, default=200, help="sentences timed per round"
    )
    parser.add_argument("--rounds", type=int, default=3, help="latency rounds")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated")
    parser.add_argument("--export-dir", help="keep the export here (default: a temp folder)")
    parser.add_argument("--no-write", action="store_true", help="do not update docs/benchmarks.md")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    load = os.getloadavg()[0]  # other work on the machine slows every path alike
    # Before TensorFlow starts its thread pools: one thread for the Keras path.
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    variants = [v for v in args.variants.split(",") if v]
    example = _load_example()

    with tempfile.TemporaryDirectory() as scratch:
        out = Path(args.export_dir or scratch)
        print(f"exporting {args.run_dir} → {out}")
        start = time.perf_counter()
        manifest = export.export_run(args.run_dir, out, variants=variants, saved_model=False)
        export_seconds = time.perf_counter() - start
        translator, config = load_run(args.run_dir)
        lites = {
            f"TFLite {v}": example.LiteTranslator(out / export.TFLITE_DIR, v, num_threads=1)
            for v in variants
        }
        split = load_multi30k(args.split, args.data_dir)[args.split]
        sources, references = list(split.en), list(split.fr)
        if args.max_sentences:
            sources = sources[: args.max_sentences]
            references = references[: args.max_sentences]

        print(f"BLEU on {len(sources)} sentences of {args.split}")
        bleu = {KERAS: keras_bleu(translator, sources, references)}
        for name, lite in lites.items():
            bleu[name] = lite_bleu(lite, sources, references, name)

        n = min(args.latency_sentences, len(sources))
        source_ids = [lite.source.tokenize(s) for s in sources[:n]]
        times = latencies(translator, lites, source_ids, args.rounds)

    sizes = {KERAS: Path(args.run_dir, MODEL_FILE).stat().st_size / 1e6}
    for v in variants:
        sizes[f"TFLite {v}"] = manifest["tflite"][v]["bytes"] / 1e6
    keras_median = statistics.median(times[KERAS])
    keras_mean = statistics.fmean(times[KERAS])
    rows = []
    for name in [KERAS, *lites]:
        variant = None if name == KERAS else name.split()[-1]
        median = statistics.median(times[name])
        mean = statistics.fmean(times[name])
        delta = bleu[name] - bleu[KERAS]
        rows.append(
            {
                "name": name,
                "size": sizes[name],
                "bleu": bleu[name],
                "delta": delta,
                "median_ms": 1e3 * median,
                "ratio": median / keras_median,
                "mean_ms": 1e3 * mean,
                "mean_ratio": mean / keras_mean,
                "targets": _targets(variant, sizes[name], delta, median / keras_median),
            }
        )
    table = build_table(rows)
    print()
    print(table)
    body = (
        f"Run: `{args.run_dir}` ({config.get('attention')} attention, preset "
        f"{config.get('preset', '?')}, embedding {config.get('embedding_dim', '?')}, "
        f"units {config.get('units', '?')}, vocabularies {config.get('source_vocab_size', '?')}"
        f" / {config.get('target_vocab_size', '?')}); export took {export_seconds:.0f} s.  \n"
        f"BLEU: lowercased, Moses-tokenized (`evaluation.score`'s `bleu_lc_tok`), greedy, "
        f"{len(sources)} sentences of {args.split}. The Keras size is the run's `.keras` file.  \n"
        f"Latency: batch 1, ids in and ids out, one thread (TFLite `num_threads=1`; Keras "
        f"intra- and inter-op threads 1), {len(times[KERAS])} timed translations per path "
        f"({args.rounds} rounds over {len(times[KERAS]) // max(args.rounds, 1)} sentences), "
        f"interleaved; the latency target compares medians, which a busy machine "
        f"disturbs less than means.\n\n" + table + "\n"
        f"Command: `{_report.command_line()}`  \n"
        f"Machine: {_report.machine_description()}, load average {load:.1f} at the start; "
        f"{_report.versions()}  \n"
        f"Date: {_report.today()}, revision {_report.git_revision()}\n"
    )
    if not args.no_write:
        print(f"wrote {write_docs(body)}")
    return rows


if __name__ == "__main__":
    main()
