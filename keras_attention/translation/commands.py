"""The commands that read a trained run folder: evaluate, translate, explain,
average and status.

Each is a function of the command-line options of the same name (`python -m
keras_attention.translation COMMAND --help`), prints what the command prints
and returns it as data: `evaluate` the scores, `translate` the translations,
`explain` the ablation table, `average` the new run folder, `status` the
`RunStatus` (`translate` from standard input: the number of lines, which it
does not keep). Errors a user can fix (no input, a sentence too long,
standard input that is not UTF-8) stop with `SystemExit` and a message naming
the input.
"""

import dataclasses
import re
import sys
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from keras_attention.arguments.validation import check_positive_int
from keras_attention.decoders.overridden_decoder import overridden_decoder
from keras_attention.files.atomic import write_text
from keras_attention.files.file_errors import check_can_write
from keras_attention.generation.search_defaults import BEAM_WIDTH
from keras_attention.generation.search_defaults import LENGTH_PENALTY
from keras_attention.generation.search_defaults import MAX_BEAM_WIDTH
from keras_attention.scoring import plots
from keras_attention.text.line_reader import LineReader
from keras_attention.text.line_reader import read_inputs
from keras_attention.training import averaging
from keras_attention.training.run_folder import CorruptRunError
from keras_attention.training.run_folder import NotARunError
from keras_attention.training.run_folder import RunFolderError
from keras_attention.translation import evaluation
from keras_attention.translation import runs
from keras_attention.translation.data import load_multi30k
from keras_attention.translation.runs import MODEL_FILE
from keras_attention.translation.translator import load_run

TEST_SPLITS = ("test_2016_flickr", "test_2017_flickr", "test_2017_mscoco")
# Sentences `translate` decodes at once: its memory is bounded by one batch.
TRANSLATE_BATCH = 64


def command_error(command, error):
    """The `SystemExit` of a library error, one line for the command line:
    `COMMAND: message`, the library's `name=True` said as its flag `--name`."""
    message = re.sub(r"`(\w+)=True`", lambda m: "--" + m.group(1).replace("_", "-"), str(error))
    return SystemExit(f"{command}: {message}")


# ------------------------------------------------------------- evaluate


@dataclasses.dataclass(frozen=True)
class EvaluateOptions:
    """The options of `evaluate`, its command line's (`evaluate --help`).

    Attributes:
        data_dir: the Multi30k folder; None: as `load_multi30k` finds it.
        splits: the splits scored, names of `load_multi30k`.
        methods: the decoding methods, "greedy" and/or "beam"; None: both
            (a simultaneous run: greedy, the only one it accepts).
        beam_width: the beam's width, at most `MAX_BEAM_WIDTH` and the
            target vocabulary.
        length_penalty: the beam's GNMT length penalty.
        batch_size: sentences decoded at once.
        baseline_run_dir: an `attention="none"` run whose greedy BLEU by
            source length is plotted beside the run's (offline runs only).
        heatmaps: the numbers of the sentences of each split whose greedy
            attention is drawn.
        max_sentences: the first sentences of each split scored; None: all.
        out_dir: the output folder; None: `RUN_DIR/eval`.
        wait_k: the ks a "wait-k" run is decoded with; None: those trained.
    """

    data_dir: str | Path | None = None
    splits: tuple | list = TEST_SPLITS
    methods: tuple | list | None = None
    beam_width: int = BEAM_WIDTH
    length_penalty: float = LENGTH_PENALTY
    batch_size: int = 64
    baseline_run_dir: str | Path | None = None
    heatmaps: tuple | list = (0, 1, 2)
    max_sentences: int | None = None
    out_dir: str | Path | None = None
    wait_k: tuple | list | range | None = None


def evaluate(run_dir, **options):
    """Scores a run on `splits` with each decoding method; returns the results.

    Writes to `out_dir` (default `RUN_DIR/eval`) the hypotheses
    (`SPLIT.METHOD.fr`), `results.json`, and, for greedy decoding, the plot of
    BLEU by source length (with the `baseline_run_dir` run, an
    `attention="none"` one, for comparison) and the attention heatmaps of the
    sentences numbered in `heatmaps`. `methods` None: greedy and beam.

    A simultaneous run (trained with a `policy`) is decoded greedily only
    (a beam would revise tokens already written) once per setting: each k
    of `wait_k` (default: the k trained, every k of a trained range), MILk's
    hard decisions, or consecutive decoding (k = infinity). Each gets its
    BLEU beside the corpus means of AP, AL and DAL (`SPLIT/greedy/SETTING`
    in `results.json`, its hypotheses in `SPLIT.greedy.SETTING.fr`, its
    heatmaps in `attention.SPLIT.SETTING.I.png`).

    Args:
        run_dir: a finished training run.
        **options: the fields of `EvaluateOptions` (`splits`, `methods`,
            `beam_width`, ...); one not given keeps its default there.

    Returns:
        The results (a dict, as `results.json` holds them): the scores of
        each `SPLIT/METHOD` (or `SPLIT/greedy/SETTING`), and for offline
        greedy decoding the BLEU by length (and the baseline's scores).

    Raises:
        SystemExit: the output folder is not one `evaluate` may write, an
            option contradicts the run (`wait_k` of an offline run, a beam
            or a baseline for a simultaneous one, a beam too wide), or a
            decoding is not finite.
        OSError: the output folder cannot be written (`check_can_write`).
        NotADirectoryError, FileNotFoundError, CorruptRunError: the run (or
            the baseline run) cannot be loaded (`load_run`).
        ValueError: `max_sentences` is not a positive integer, or a
            heatmap number is past the end of a split.
        TypeError: an option that is not a field of `EvaluateOptions`.
    """
    run_dir, options = Path(run_dir), EvaluateOptions(**options)
    check_positive_int("max_sentences", options.max_sentences, allow_none=True)
    try:
        runs.check_evaluation_folder(run_dir, options.out_dir)  # before any decoding
    except RunFolderError as error:
        raise command_error("evaluate", error) from None
    check_can_write(options.out_dir or run_dir / runs.EVALUATION_DIR)
    translator, config = load_run(run_dir)
    decodings = _decodings(translator, config, run_dir, options)
    splits = list(options.splits)
    corpus = load_multi30k(splits, options.data_dir)
    baseline = load_run(options.baseline_run_dir)[0] if options.baseline_run_dir else None
    out_dir = Path(options.out_dir or run_dir / runs.EVALUATION_DIR)
    runs.mark_evaluation_folder(out_dir)
    results = {}
    for split in splits:
        data = corpus[split].head(options.max_sentences)
        if translator.policy is None:
            scored = _evaluate_methods(
                translator, config, baseline, data, split, decodings, options, out_dir
            )
        else:
            scored = _evaluate_settings(translator, data, split, decodings, options, out_dir)
        results.update(scored)
    print(results_table(results))
    runs.write_json(out_dir / "results.json", results)
    print(f"results: {out_dir / 'results.json'}")
    return results


def _wait_k_refusal(command, run_dir, config):
    return (
        f"{command}: --wait-k sets the k of a run trained with --policy wait-k; {run_dir} "
        f"was trained with policy {config.get('policy')!r}"
    )


def _decodings(translator, config, run_dir, options):
    """What `evaluate` decodes a run with, its `options` checked against it.

    Args:
        translator: the run's `Translator`.
        config: the run's config.json.
        run_dir: the run folder, as the messages name it.
        options: the `EvaluateOptions`.

    Returns:
        An offline run's decoding methods: `options.methods`, or greedy and
        beam when None. A simultaneous run's settings, `[(label, k)]`:
        `("wait-K", K)` for each k of a "wait-k" run, `(policy, None)` for
        the one setting of another policy.

    Raises:
        SystemExit: a `wait_k` for a run of no policy or of one other than
            "wait-k", a beam too wide, or for a simultaneous run a method
            other than greedy or a baseline.
    """
    if translator.policy is None:
        if options.wait_k is not None:
            raise SystemExit(_wait_k_refusal("evaluate", run_dir, config))
        methods = ("greedy", "beam") if options.methods is None else options.methods
        if "beam" in methods:
            _check_beam_width(translator, options.beam_width, "evaluate")
        return methods
    methods, wait_k = options.methods, options.wait_k
    if methods is not None and list(methods) != ["greedy"]:
        raise SystemExit(
            f"evaluate: --methods {','.join(methods)}: {run_dir} is a simultaneous run "
            f"(policy {translator.policy!r}), decoded greedily as the source arrives; a beam "
            "would revise tokens already written. Give --methods greedy (the default here)"
        )
    if options.baseline_run_dir:
        raise SystemExit(
            "evaluate: --baseline-run-dir compares BLEU by length with an offline run; "
            f"{run_dir} is a simultaneous run, compared by its latency"
        )
    if translator.policy != "wait-k":
        if wait_k is not None:
            raise SystemExit(_wait_k_refusal("evaluate", run_dir, config))
        return [(translator.policy, None)]
    if wait_k is None:
        trained = config["wait_k"]
        low, high = trained if isinstance(trained, list) else (trained, trained)
        wait_k = range(low, high + 1)
    return [(f"wait-{k}", k) for k in wait_k]


def _evaluate_methods(translator, config, baseline, data, split, methods, options, out_dir):
    """`evaluate` of an offline run on one split: each method's scores and
    hypotheses; for greedy decoding, BLEU by length and the heatmaps.

    Args:
        translator: the run's `Translator`.
        config: the run's config.json.
        baseline: the baseline run's `Translator`, or None.
        data: the split's sentences (`Multi30kSplit`).
        split: its name.
        methods: the decoding methods (`_decodings`).
        options: the `EvaluateOptions`.
        out_dir: the output folder.

    Returns:
        The split's entries of the results: `SPLIT/METHOD`, and with greedy
        decoding `SPLIT/bleu_by_length` (and `SPLIT/greedy/baseline`).

    Raises:
        SystemExit: a method's output is not finite.
        ValueError: a heatmap number is past the end of the split.
    """
    results = {}
    for method in methods:
        print(f"{split}: {method} decoding")
        scores, decoded, hyps = _decode_and_score(
            translator,
            data,
            split,
            method,
            options.batch_size,
            options.beam_width,
            options.length_penalty,
        )
        results[f"{split}/{method}"] = scores
        write_text(out_dir / f"{split}.{method}.fr", "\n".join(hyps) + "\n")
        if method == "greedy":
            results.update(
                _bleu_by_length(config["attention"], baseline, data, hyps, split, out_dir)
            )
            for i in options.heatmaps:
                path = out_dir / f"attention.{split}.{i}.png"
                _heatmap(translator, decoded, data, i, path)
    return results


def _evaluate_settings(translator, data, split, settings, options, out_dir):
    """`evaluate` of a simultaneous run on one split: greedy BLEU and AP,
    AL, DAL per setting, its hypotheses and heatmaps.

    Args:
        translator: the run's `Translator`, trained with a `policy`.
        data: the split's sentences (`Multi30kSplit`).
        split: its name.
        settings: `[(label, k)]` (`_decodings`).
        options: the `EvaluateOptions`.
        out_dir: the output folder.

    Returns:
        The split's entries `SPLIT/greedy/LABEL` of the results, their
        scores with the policy, its k and the latency (AP, AL, DAL).

    Raises:
        SystemExit: the output of a setting is not finite.
        ValueError: a heatmap number is past the end of the split.
    """
    results = {}
    for label, k in settings:
        if k is not None:
            translator.wait_k = k  # before the search of this setting is traced
        print(f"{split}: greedy decoding, {label}")
        scores, decoded, hyps = _decode_and_score(
            translator, data, split, "greedy", options.batch_size, BEAM_WIDTH, LENGTH_PENALTY
        )
        _, _, latency = evaluation.simultaneous_latency(translator, decoded)
        scores.update(policy=translator.policy, k=k, **latency)
        results[f"{split}/greedy/{label}"] = scores
        write_text(out_dir / f"{split}.greedy.{label}.fr", "\n".join(hyps) + "\n")
        for i in options.heatmaps:
            _heatmap(translator, decoded, data, i, out_dir / f"attention.{split}.{label}.{i}.png")
    return results


def _decode_and_score(translator, data, split, method, batch_size, beam_width, length_penalty):
    """`evaluation.decode_and_score` of one split and method, its scores as
    `results.json` records them; a non-finite output stops the command."""
    try:
        scores, decoded, hyps = evaluation.decode_and_score(
            translator,
            data,
            method=method,
            batch_size=batch_size,
            beam_width=beam_width,
            length_penalty=length_penalty,
        )
    except evaluation.NonFiniteOutputError as error:
        raise SystemExit(f"evaluate: {split}: {error}") from None
    scores["decode_seconds"] = round(scores.pop("seconds"), 1)
    if method == "beam":
        scores.update(beam_width=beam_width, length_penalty=length_penalty)
    return scores, decoded, hyps


def _bleu_by_length(attention, baseline, data, hyps, split, out_dir):
    """Plots BLEU by source length of the greedy `hyps`, and of the greedy
    output of the `baseline` run if any; returns the entries of `results`."""
    results = {}
    curves = {f"{attention} attention": evaluation.bleu_by_length(hyps, data.fr, data.en)}
    if baseline is not None:
        base = evaluation.decode_corpus(baseline, data.en, progress=False)
        base_hyps = evaluation.detokenize_output(base["text"])
        results[f"{split}/greedy/baseline"] = evaluation.score(base_hyps, data.fr)
        curves["no attention"] = evaluation.bleu_by_length(base_hyps, data.fr, data.en)
    results[f"{split}/bleu_by_length"] = curves
    evaluation.plot_bleu_by_length(
        curves,
        out_dir / f"bleu_by_length.{split}.png",
        title=f"BLEU by source length, {split}",
    )
    return results


def _heatmap(translator, decoded, data, i, path):
    if i >= len(decoded["text"]):
        raise ValueError(f"--heatmaps {i}: the split has {len(decoded['text'])} sentences")
    source = translator.source_tokenizer.lookup(tf.constant([decoded["source_tokens"][i]]))
    target = translator.target_tokenizer.lookup(tf.constant([decoded["tokens"][i] or [0]]))
    source_labels = [t.decode() for t in source.numpy()[0]]
    output_labels = [t.decode() for t in target.numpy()[0]][: len(decoded["tokens"][i])]
    weights = np.asarray(decoded["attention"][i])[: len(output_labels), : len(source_labels)]
    plots.plot_alignments(
        str(path),
        [(weights, source_labels, output_labels, data.en[i])],
        cmap="viridis",
        dpi=120,
        xlabel="source subwords",
        ylabel="output subwords",
        cell_inches=0.35,
    )


def results_table(results):
    """The scores of `evaluate`'s results as a Markdown table; with the
    latency of a simultaneous run's (AP, AL, DAL) when they have it."""
    latency = any("AL" in value for value in results.values())
    lines = [
        "| split / decoding | BLEU (cased) | chrF | BLEU (lc, tok) |"
        + (" AP | AL | DAL |" if latency else ""),
        "|---|---|---|---|" + ("---|---|---|" if latency else ""),
    ]
    for key, value in results.items():
        if "bleu" in value:
            line = f"| {key} | {value['bleu']} | {value['chrf']} | {value['bleu_lc_tok']} |"
            if latency:
                line += f" {value['AP']:.3f} | {value['AL']:.2f} | {value['DAL']:.2f} |"
            lines.append(line)
    return "\n".join(lines)


# ------------------------------------------------------------ translate


def _batches(inputs, batch_size, ready):
    """Lists of at most `batch_size` inputs; a shorter one when `ready()` says
    the next input would have to be waited for (a writer that waits for the
    translations of what it wrote gets them)."""
    batch = []
    for item in inputs:
        batch.append(item)
        if len(batch) == batch_size or not ready():
            yield batch
            batch = []
    if batch:
        yield batch


def check_lengths(inputs, lengths, limit, command="translate"):
    """Stops with an error naming the first input of more than `limit` source
    tokens: decoding time and memory grow with the source length."""
    too_long = [(label, int(n)) for (label, _), n in zip(inputs, lengths, strict=True) if n > limit]
    if too_long:
        (label, n), more = too_long[0], len(too_long) - 1
        raise SystemExit(
            f"{command}: {label} has {n} source tokens, more than the model's "
            f"max_source_length={limit}; split it into shorter sentences"
            + (f" ({more} more input(s) too long)" if more else "")
        )


def _check_beam_width(translator, beam_width, command):
    try:
        translator.check_beam_width(beam_width)
    except ValueError:
        bound = min(MAX_BEAM_WIDTH, translator.target_tokenizer.vocab_size)
        raise SystemExit(
            f"{command}: --beam-width {beam_width} is too wide: at most {bound} (the widest "
            f"beam is {MAX_BEAM_WIDTH}, and this run's target vocabulary has "
            f"{translator.target_tokenizer.vocab_size} tokens)"
        ) from None


def translate(
    run_dir,
    sentences=(),
    method=None,
    beam_width=BEAM_WIDTH,
    length_penalty=LENGTH_PENALTY,
    batch_size=TRANSLATE_BATCH,
):
    """Prints one translation per sentence; without sentences, one per line of
    standard input (`read_inputs`), blank lines included.

    The inputs are translated `batch_size` at a time and each batch is
    printed (and flushed) as soon as it is translated, so the output of a
    long input starts at once and the memory does not grow with its length;
    a batch is sent early when standard input has no next line ready. Every
    sentence of a batch is checked against the model's `max_source_length`
    (`check_lengths`) before the batch is translated, and the beam width
    against `MAX_BEAM_WIDTH` and the target vocabulary before anything; an
    error stops it after the batches before. A model whose scores are not
    finite (NaN weights) stops it with an error, not empty lines.

    `method` None is "beam", and "greedy" for a simultaneous run (trained
    with a `policy`), which refuses "beam"; after each of its translations
    comes a line with its read/write trace and latency,
    `  trace (AP .., AL .., DAL ..): R:a R:man W:un ...` (`trace_text`).

    Returns:
        The translations (a list) of `sentences`; for standard input, whose
        translations are not kept, the number of lines translated.
    """
    check_positive_int("batch_size", batch_size)
    if sentences:
        inputs, ready = read_inputs(sentences, "translate"), lambda: True
    else:
        reader = LineReader(sys.stdin)
        inputs, ready = read_inputs(None, "translate", reader), reader.ready
    translator, _ = load_run(run_dir)
    simultaneous = translator.policy is not None
    if method is None:
        method = "greedy" if simultaneous else "beam"
    if simultaneous and method != "greedy":
        raise SystemExit(
            f"translate: --method {method}: {run_dir} is a simultaneous run (policy "
            f"{translator.policy!r}), decoded greedily as the source arrives; a beam would "
            "revise tokens already written. Give --method greedy (the default here)"
        )
    if method == "beam":
        _check_beam_width(translator, beam_width, "translate")
    search = evaluation.search_function(translator, method, beam_width, length_penalty)
    kept, count = [], 0
    for batch in _batches(inputs, batch_size, ready):
        texts = [text for _, text in batch]
        check_lengths(batch, translator.source_lengths(texts), translator.max_source_length)
        try:
            decoded = evaluation.decode_corpus(
                translator, texts, batch_size=len(texts), progress=False, search=search
            )
        except evaluation.NonFiniteOutputError as error:
            label = batch[error.sentence][0]  # its line, not its place in the batch
            named = evaluation.NonFiniteOutputError(error.score, error.sentence, label)
            raise SystemExit(f"translate: {named}") from None
        outputs = evaluation.detokenize_output(decoded["text"])
        lines = [line + "\n" for line in outputs]
        if simultaneous:
            traces = _traces(translator, decoded)
            lines = [line + trace + "\n" for line, trace in zip(lines, traces, strict=True)]
        sys.stdout.write("".join(lines))
        sys.stdout.flush()
        count += len(outputs)
        if sentences:
            kept.extend(outputs)
    if not count:
        raise SystemExit("translate: give sentences as arguments or on stdin")
    return kept if sentences else count


def _traces(translator, decoded):
    """The trace line of each output of a simultaneous run's `decode_corpus`."""
    delays, latencies, _ = evaluation.simultaneous_latency(translator, decoded)
    lines = []
    for i, g in enumerate(delays):
        if latencies[i] is None:
            lines.append("  trace: (empty source)")
            continue
        source = translator.source_tokenizer.lookup(tf.constant([decoded["source_tokens"][i]]))
        written = len(decoded["written_attention"][i])
        # The written tokens, END included when written: the first `written`
        # of the output and END.
        ids = (decoded["tokens"][i] + [translator.target_tokenizer.end_id])[:written]
        target = translator.target_tokenizer.lookup(tf.constant([ids]))
        pieces = [[t.decode() for t in row] for row in (source.numpy()[0], target.numpy()[0])]
        latency = latencies[i].as_dict()
        lines.append(
            f"  trace (AP {latency['AP']:.2f}, AL {latency['AL']:.2f}, DAL "
            f"{latency['DAL']:.2f}): {evaluation.trace_text(pieces[0], pieces[1], g)}"
        )
    return lines


# -------------------------------------------------------------- explain


def explain(
    run_dir, data_dir=None, split="test_2016_flickr", max_sentences=1000, batch_size=64, seed=0
):
    """Attention is not explanation: how much does the output depend on it?

    Replaces the attention weights with uniform and permuted ones (a copy of
    the decoder with an `OverriddenAttention`) and measures how much the
    next-token distribution (total variation distance) and the BLEU change;
    prints the table, writes it to `RUN_DIR/explain.json` and returns it.
    """
    translator, config = load_run(run_dir)
    if not translator.has_attention:
        raise SystemExit("explain: the run has no attention (attention=none)")
    check_can_write(run_dir)  # explain.json, written after minutes of decoding
    data = load_multi30k([split], data_dir)[split]
    data = data.head(max_sentences)
    en, fr = data.en, data.fr
    keras.utils.set_random_seed(seed)
    rows = {}
    decoded = evaluation.decode_corpus(translator, en, batch_size=batch_size)
    reference_hyps = evaluation.detokenize_output(decoded["text"])
    rows["model's attention"] = {"tvd": 0.0, **evaluation.score(reference_hyps, fr)}
    sharpness = evaluation.attention_statistics(decoded["attention"])
    # Output distributions along the model's own greedy output, with and
    # without the override: the total variation distance says how much the
    # attention weights move the prediction at each step.
    start = translator.target_tokenizer.start_id
    for override in ("uniform", "permute"):
        # A copy of the decoder whose attention is wrapped: the traced
        # functions of `translator` keep the model's own attention.
        ablated = translator.with_decoder(
            overridden_decoder(translator.generator.decoder, override, seed=seed)
        )
        tvds, counts = [], []
        for begin in range(0, len(en), batch_size):
            batch = range(begin, min(begin + batch_size, len(en)))
            src = tf.ragged.constant([decoded["source_tokens"][i] for i in batch])
            tgt = tf.ragged.constant([[start] + decoded["tokens"][i] for i in batch])
            src = tf.cast(src.to_tensor(), tf.int32)
            tgt = tf.cast(tgt.to_tensor(), tf.int32)
            p = tf.nn.softmax(translator.teacher_forced_logits(src, tgt)).numpy()
            q = tf.nn.softmax(ablated.teacher_forced_logits(src, tgt)).numpy()
            mask = tgt.numpy() != 0
            tvds.append(evaluation.total_variation(p, q, mask) * mask.sum())
            counts.append(mask.sum())
        tvd = float(np.sum(tvds) / np.sum(counts))
        changed = evaluation.decode_corpus(ablated, en, batch_size=batch_size)
        hyps = evaluation.detokenize_output(changed["text"])
        rows[f"{override} attention"] = {
            "tvd": round(tvd, 4),
            **evaluation.score(hyps, fr),
        }
    lines = [
        f"explain: {config['attention']} attention, {split}, {len(en)} sentences",
        "| attention weights | mean TVD of next-token distribution "
        "| BLEU (cased) | BLEU (lc, tok) |",
        "|---|---|---|---|",
    ]
    for name, row in rows.items():
        lines.append(f"| {name} | {row['tvd']} | {row['bleu']} | {row['bleu_lc_tok']} |")
    lines.append(
        f"the model's attention over {sharpness['steps']} greedy steps: entropy / log(S) "
        f"{sharpness['entropy']}, largest weight {sharpness['max_weight']}, largest "
        f"weight on the last source token at {sharpness['on_last_token']:.1%} of steps"
    )
    print("\n".join(lines))
    rows["model's attention"]["sharpness"] = sharpness
    runs.write_json(Path(run_dir) / "explain.json", rows)
    return rows


# -------------------------------------------------------------- average


def average(run_dir, last, out_dir, overwrite=False):
    """Writes a run folder whose model averages the `last` epochs of another
    (trained with `keep_epochs`); returns it.

    `out_dir` must be new or empty, or hold a run and `overwrite` be given
    (`runs.write_run`); it is checked before anything is computed.
    """
    run_dir, out_dir = Path(run_dir), Path(out_dir)
    if out_dir.resolve() == run_dir.resolve():
        raise SystemExit("average: --out-dir must differ from --run-dir")
    try:
        epochs = averaging.last_epochs(run_dir, last)
    except ValueError as error:
        raise command_error("average", error) from None
    try:
        # Checked before the averaging, then again under the folder's lock.
        runs.check_writable(out_dir, overwrite)
    except (RunFolderError, CorruptRunError) as error:
        raise command_error("average", error) from None
    check_can_write(out_dir)
    translator, config = load_run(run_dir)
    model = translator.model
    averaging.average_weights(model, [averaging.epoch_weight_path(run_dir, e) for e in epochs])
    info = {"averaged_epochs": epochs, "averaged_from": str(run_dir)}
    try:
        runs.write_run(
            out_dir,
            model,
            translator.source_tokenizer,
            translator.target_tokenizer,
            dict(config, **info),
            info,
            overwrite=overwrite,
        )
    except (RunFolderError, CorruptRunError) as error:
        raise command_error("average", error) from None
    print(f"averaged epochs {epochs[0]} to {epochs[-1]} of {run_dir}: {out_dir / MODEL_FILE}")
    return out_dir


# --------------------------------------------------------------- status


def status(run_dir):
    """Prints `STATE: detail`; STATE is new, unfinished or finished. Returns
    the `RunStatus`.

    A folder that does not exist is a new run; a damaged run folder, or a
    path that is a file, stops with a message naming it.
    """
    try:
        found = runs.translator_run_status(run_dir)
    except CorruptRunError as error:
        raise SystemExit(f"corrupt: {error}") from None
    except (NotADirectoryError, NotARunError) as error:
        raise SystemExit(f"status: {error}") from None
    print(f"{found.state}: {found.detail}")
    return found
