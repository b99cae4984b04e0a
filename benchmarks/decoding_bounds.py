"""Decoding bounds: time and peak extra memory on the longest allowed input and on
a 20,000-word input, for every entry point.

Models: the translator at the default preset's size (embedding 128, GRU 256,
conditional Bahdanau decoder started from the mean of the memory, tied
embeddings, vocabularies learned from the Multi30k training split), untrained
unless `--run` names a trained run folder: an untrained model never emits END,
so every search runs to its `max_length` (min(2·S + 10, 1034) tokens), the worst
case. It is exported with `keras_attention.translation.export` (SavedModel,
TFLite float32). And the README quickstart model (vocabulary 8,000, embedding
256, `BahdanauDecoder(256)`) through the generic `export_tflite`, for `generate`.

Inputs: the longest allowed one, 512 source tokens (`max_source_length`; as
text, the first words of the 20,000-word input that make at most 512 tokens),
and a 20,000-word input (Multi30k training sentences, concatenated; about
24,000 tokens). The paths:

- TFLite `generate` (generic) and `translate` (translator), ids in, one
  interpreter thread: a source past 512 tokens is truncated inside the model;
- `examples/tflite_translate.py` (`LiteTranslator.translate`), text in: it
  refuses a sentence past 512 tokens;
- the SavedModel's `serving_default` (greedy), text in: it truncates
  (`truncated` says so);
- `Seq2SeqGenerator.greedy`, and `.beam` with width 4 (what
  the `translate` command runs by default), ids in: they refuse a
  source past 512 tokens (`translate` refuses it before decoding).

Each (path, input) runs in a fresh process: it loads the model, decodes a short
sentence (tracing, allocation), resets the kernel's peak-RSS counter
(`/proc/self/clear_refs`), decodes the input once and reports the wall time and
the peak resident memory above the resident memory before the call (VmHWM -
VmRSS, Linux only). Target: TFLite under 200 MB extra on the longest allowed
input.

Prints a table and writes it to docs/benchmarks.md, section "Decoding bounds",
unless `--no-write`.

    python benchmarks/decoding_bounds.py --data-dir ../shared/data/multi30k
    python benchmarks/decoding_bounds.py --run runs/bahdanau --no-write

Takes about 5 minutes on a 2-core CPU (the exports about two).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "tflite_translate.py"
SECTION = "Decoding bounds"
LONG_WORDS = 20_000
TFLITE_TARGET_MB = 200
SHORT = "A man is riding a bike."
START, END = 1, 2  # the generic model's ids


# ----------------------------------------------------------- the worker


def _status_kb(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def _measure(run):
    """Runs `run()` once; returns (its result, seconds, peak extra MB)."""
    import gc

    gc.collect()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # peak RSS := current RSS
    before = _status_kb("VmRSS")
    start = time.perf_counter()
    result = run()
    seconds = time.perf_counter() - start
    extra = (_status_kb("VmHWM") - before) / 1024
    return result, seconds, extra


def _lite_runner(path, signature, input_name):
    from ai_edge_litert.interpreter import Interpreter

    runner = Interpreter(model_path=path, num_threads=1).get_signature_runner(signature)

    def run(ids):
        out = runner(**{input_name: np.asarray(ids, np.int32)[None]})
        return {"read": int(out["attention"].shape[2]), "output": int(out["lengths"][0])}

    return run


def worker(case):
    """One measurement, in this process; returns a dict."""
    kind, model, data = case["kind"], case["model"], case["input"]
    if kind in ("tflite_generate", "tflite_translate"):
        ids = np.load(data)
        signature = "generate" if kind == "tflite_generate" else "translate"
        name = "source" if kind == "tflite_generate" else "source_ids"
        run = _lite_runner(model, signature, name)
        run(ids[:8])
        result, seconds, extra = _measure(lambda: run(ids))
        result["status"] = "truncated" if len(ids) > result["read"] else "decoded"
    elif kind == "tflite_app":
        import importlib.util

        spec = importlib.util.spec_from_file_location("tflite_translate", EXAMPLE)
        example = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(example)
        app = example.LiteTranslator(model, "float32", num_threads=1)
        text = Path(data).read_text(encoding="utf-8")
        app.translate(SHORT)

        def run():
            try:
                _, source, target, _ = app.translate(text)
            except ValueError:
                return {"status": "refused", "read": 0, "output": 0}
            return {"status": "decoded", "read": len(source), "output": len(target)}

        result, seconds, extra = _measure(run)
    elif kind == "saved_model":
        import tensorflow as tf
        import tensorflow_text  # noqa: F401  (registers the tokenizer ops)

        served = tf.saved_model.load(model).signatures["serving_default"]
        text = Path(data).read_text(encoding="utf-8")
        served(sentences=tf.constant([SHORT]))

        def run():
            out = served(sentences=tf.constant([text]))
            truncated = bool(out["truncated"].numpy()[0])
            return {
                "status": "truncated" if truncated else "decoded",
                "read": int(out["source_ids"].shape[1]),
                "output": int(out["lengths"].numpy()[0]),
            }

        result, seconds, extra = _measure(run)
    elif kind in ("generator_greedy", "generator_beam"):
        from keras_attention.translation.translator import load_run

        generator = load_run(model)[0].generator
        search = generator.greedy if kind == "generator_greedy" else generator.beam
        ids = np.load(data)[None]
        for n in (8, 9):  # two lengths: the second trace takes any length
            search(ids[:, :n])

        def run():
            try:
                out = search(ids)
            except ValueError:
                return {"status": "refused", "read": 0, "output": 0}
            return {"status": "decoded", "read": ids.shape[1], "output": int(out["lengths"][0])}

        result, seconds, extra = _measure(run)
    else:
        raise ValueError(f"unknown kind {kind!r}")
    return dict(result, seconds=seconds, extra_mb=extra)


# ----------------------------------------------------------- the parent


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--data-dir", help="folder with the Multi30k .gz files")
    parser.add_argument("--run", help="a trained run folder (default: an untrained model)")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per measurement")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def _untrained_run(folder, train):
    """A run folder with the default preset's model and vocabularies."""
    import keras

    from keras_attention.translation import SubwordTokenizer
    from keras_attention.translation.model import build_translator

    keras.utils.set_random_seed(0)
    source = SubwordTokenizer.build(train.en, vocab_size=8000, lower_case=True)
    target = SubwordTokenizer.build(train.fr, vocab_size=8000, lower_case=True)
    model = build_translator(
        source.vocab_size,
        target.vocab_size,
        embedding_dim=128,
        units=256,
        dropout=0.3,
        conditional=True,
        decoder_init="mean",
        tie_embeddings=True,
        seed=0,
    )
    folder.mkdir(parents=True)
    model.save(folder / "model.keras")
    source.save(folder / "source_vocab")
    target.save(folder / "target_vocab")
    (folder / "config.json").write_text(json.dumps({"attention": "bahdanau"}))
    return folder


def _generic_tflite(path, vocab=8000):
    """The README quickstart model (untrained) through `export_tflite`."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from generic_export_benchmark import build_model

    from keras_attention import Seq2SeqGenerator
    from keras_attention import export

    model = build_model(vocab, 256, 256)
    model([np.ones((1, 4), "int32"), np.ones((1, 4), "int32")])  # builds the layers
    generator = Seq2SeqGenerator.from_model(model, start_id=START, end_id=END)
    export.export_tflite(generator, path)
    return generator.max_source_length


def prepare(folder, args):
    """Models and input files; returns (cases, notes)."""
    from keras_attention.translation import export
    from keras_attention.translation import load_multi30k
    from keras_attention.translation.translator import load_run

    train = load_multi30k(("train",), args.data_dir)["train"]
    run = Path(args.run) if args.run else _untrained_run(folder / "run", train)
    translator = load_run(run)[0]
    limit = translator.max_source_length
    started = time.perf_counter()
    export.export_run(run, folder / "export", variants=("float32",), beam_width=4)
    generic = folder / "generic.tflite"
    _generic_tflite(generic)
    export_seconds = time.perf_counter() - started

    words = []
    for sentence in train.en:
        words.extend(sentence.split())
        if len(words) >= LONG_WORDS:
            break
    long_text = " ".join(words[:LONG_WORDS])
    long_ids = translator.tokenize_source([long_text]).numpy()[0]
    # The longest allowed text: whole words, at most `limit` tokens.
    counts = translator.source_lengths(words[:LONG_WORDS])
    n_words = int(np.searchsorted(np.cumsum(counts), limit, side="right"))
    max_text = " ".join(words[:n_words])
    files = {
        "long_text": (long_text, None),
        "max_text": (max_text, None),
        "long_ids": (None, long_ids),
        "max_ids": (None, long_ids[:limit]),
        "generic_long": (None, np.random.default_rng(0).integers(3, 8000, len(long_ids))),
        "generic_max": (None, np.random.default_rng(1).integers(3, 8000, limit)),
    }
    paths = {}
    for name, (text, ids) in files.items():
        if text is not None:
            paths[name] = folder / f"{name}.txt"
            paths[name].write_text(text, encoding="utf-8")
        else:
            paths[name] = folder / f"{name}.npy"
            np.save(paths[name], ids.astype(np.int32))
    tflite = folder / "export" / export.TFLITE_DIR
    saved = folder / "export" / export.SAVED_MODEL_DIR / "1"
    paths_and_models = [
        ("TFLite `generate` (generic model)", "tflite_generate", generic, "generic"),
        ("TFLite `translate`", "tflite_translate", tflite / "translator_float32.tflite", "ids"),
        ("examples/tflite_translate.py", "tflite_app", tflite, "text"),
        ("SavedModel `serving_default`", "saved_model", saved, "text"),
        ("Seq2SeqGenerator.greedy", "generator_greedy", run, "ids"),
        ("Seq2SeqGenerator.beam (width 4)", "generator_beam", run, "ids"),
    ]
    cases = []
    for label, kind, model, form in paths_and_models:
        for size in ("max", "long"):
            data = {"generic": f"generic_{size}", "ids": f"{size}_ids", "text": f"{size}_text"}
            cases.append(
                {
                    "label": label,
                    "kind": kind,
                    "model": str(model),
                    "input": str(paths[data[form]]),
                    "size": size,
                }
            )
    notes = {
        "limit": limit,
        "long_tokens": len(long_ids),
        "max_words": n_words,
        "max_text_tokens": int(np.sum(counts[:n_words])),
        "export_seconds": export_seconds,
        "trained": bool(args.run),
    }
    return cases, notes


def run_case(case, timeout):
    command = [sys.executable, os.path.abspath(__file__), "--worker", json.dumps(case)]
    try:
        process = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"status": f"did not finish in {timeout} s"}
    if process.returncode != 0:
        return {"status": "failed: " + process.stderr.strip().splitlines()[-1][:200]}
    return json.loads(process.stdout.strip().splitlines()[-1])


def report(cases, results, notes, load):
    lines = [
        "| path | input | tokens read | output tokens | result | seconds | peak extra MB |",
        "|---|---|---:|---:|---|---:|---:|",
    ]
    inputs = {
        "max": f"longest allowed ({notes['limit']} tokens)",
        "long": f"{LONG_WORDS:,} words ({notes['long_tokens']:,} tokens)",
    }
    for case, result in zip(cases, results, strict=True):
        if "seconds" not in result:
            status = result["status"]
            lines.append(f"| {case['label']} | {inputs[case['size']]} | | | {status} | | |")
            continue
        refused = result["status"] == "refused"
        read, output = ("–", "–") if refused else (result["read"], result["output"])
        lines.append(
            f"| {case['label']} | {inputs[case['size']]} | {read} | {output} | "
            f"{result['status']} | {result['seconds']:.2f} | {result['extra_mb']:.1f} |"
        )
    lite = [
        r["extra_mb"]
        for c, r in zip(cases, results, strict=True)
        if c["kind"].startswith("tflite") and "extra_mb" in r
    ]
    met = "yes" if lite and max(lite) < TFLITE_TARGET_MB else "no"
    model = "a trained run" if notes["trained"] else "untrained (every search runs to max_length)"
    body = [
        f"Models: the translator at the default preset's size, {model}, exported "
        "with `keras_attention.translation.export` (SavedModel, TFLite float32); the "
        "README quickstart model (vocabulary 8,000) through `export_tflite` for "
        f"`generate`, fed random ids of the same lengths (exports: "
        f"{notes['export_seconds']:.0f} s). The longest allowed text "
        f"is {notes['max_words']} words, {notes['max_text_tokens']} tokens. TFLite on "
        "one thread. Each row is a fresh process: a short sentence first (tracing, "
        "allocation), then the input once; peak extra MB is the peak resident memory "
        "during the call above the resident memory before it. Times are single "
        f"runs (load average {load:.1f} at the start): compare the memory.",
        "",
        *lines,
        "",
        f"Target: TFLite under {TFLITE_TARGET_MB} MB extra on any input: {met} "
        f"(largest {max(lite, default=float('nan')):.1f} MB). "
        "`python -m keras_attention.translation translate` refuses the 20,000-word "
        "input as `Seq2SeqGenerator` does, naming the line, before decoding.",
        "",
        *_footer(),
    ]
    return "\n".join(body)


def _footer():
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import _report

    return _report.footer_lines()


def main(argv=None):
    args = parse_args(argv)
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return None
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="decoding_bounds_") as tmp:
        cases, notes = prepare(Path(tmp), args)
        results = []
        for case in cases:
            results.append(run_case(case, args.timeout))
            r = results[-1]
            print(f"  {case['label']}, {case['size']}: {r}", file=sys.stderr, flush=True)
    text = report(cases, results, notes, load)
    print(text)
    if not args.no_write:
        import _report

        print(f"written to {_report.write_section(SECTION, text)}")
    return results


if __name__ == "__main__":
    main()
