"""English to French on Multi30k with attention: train, evaluate, translate, explain.

What it shows: a functional-API encoder-decoder built from keras_attention's
layers, trained with `model.fit` on a `tf.data` pipeline, decoded greedily and
with beam search inside the graph, scored with sacreBLEU against the published
text-only GRU system of LIUM-CVC at WMT17 (59.0 BLEU on test_2016_flickr).

Commands (each has --help):

    train      learn the vocabularies and the model; a killed run resumes
    status     whether a run folder holds a new, unfinished or finished run
    evaluate   BLEU, chrF, BLEU by source length, attention heatmaps
    translate  sentences from the command line or stdin
    explain    replace the attention weights (uniform, permuted) and measure
               how much the output changes
    average    a run whose model is the mean of another run's last epochs
               (trained with --keep-epochs)

Time on a 2-core CPU: `train --preset tiny` about two minutes; the default
preset about an hour. The data comes from `--data-dir`, the environment
variable KERAS_ATTENTION_MULTI30K_DIR, or a download into the Keras cache.
"""

import argparse
import logging
import math
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

from keras_attention.translation import SubwordTokenizer  # noqa: E402
from keras_attention.translation import averaging  # noqa: E402
from keras_attention.translation import distribute  # noqa: E402
from keras_attention.translation import evaluation  # noqa: E402
from keras_attention.translation import load_multi30k  # noqa: E402
from keras_attention.translation import make_dataset  # noqa: E402
from keras_attention.translation import runs  # noqa: E402
from keras_attention.translation.losses import SmoothedSparseCrossentropy  # noqa: E402
from keras_attention.translation.model import ATTENTIONS  # noqa: E402
from keras_attention.translation.model import DECODER_INITS  # noqa: E402
from keras_attention.translation.model import build_translator  # noqa: E402
from keras_attention.translation.runs import CONFIG_FILE  # noqa: E402
from keras_attention.translation.runs import MODEL_FILE  # noqa: E402
from keras_attention.translation.runs import SOURCE_VOCAB  # noqa: E402
from keras_attention.translation.runs import TARGET_VOCAB  # noqa: E402
from keras_attention.translation.translator import load_run  # noqa: E402

# Sizes of the two presets. "default" follows the published system (embedding
# 128, GRU 256); "tiny" is a first look that finishes in about two minutes.
PRESETS = {
    "default": {
        "embedding_dim": 128,
        "units": 256,
        # GRU size of each encoder direction; None: units / 2.
        "encoder_units": None,
        "dropout": 0.3,
        "batch_size": 64,
        "epochs": 30,
        "learning_rate": 2e-3,
        "max_train_examples": None,
        "vocab_size": 8000,
        # Smoothing (with tied embeddings) and tying measured better, the weight
        # average not: see "The recipe, and why" in docs/translation.md.
        "label_smoothing": 0.1,
        "ema_momentum": 0.0,
        "tie_embeddings": True,
        # The conditional GRU decoder (Bahdanau only) measured better: see
        # "The recipe, and why" in docs/translation.md.
        "conditional": True,
        # s_0 from the mean of the memory ("mean") measured better than from
        # the encoder's final states ("final"): see "The recipe, and why" in
        # docs/translation.md.
        "decoder_init": "mean",
    },
    "tiny": {
        "embedding_dim": 32,
        "units": 64,
        "encoder_units": None,
        "dropout": 0.1,
        "batch_size": 32,
        "epochs": 2,
        "learning_rate": 3e-3,
        "max_train_examples": 1500,
        "vocab_size": 1000,
        "label_smoothing": 0.1,
        "ema_momentum": 0.0,
        "tie_embeddings": True,
        "conditional": True,
        "decoder_init": "mean",
    },
}
# Training pairs with a side longer than this many words are skipped (and
# counted in the log); evaluation splits are never filtered.
MAX_TRAIN_WORDS = 50


# ---------------------------------------------------------------- train


def train(args):
    if args.max_minutes and args.strategy == "multi-worker":
        # Workers would stop after different epochs and wait on each other.
        raise SystemExit("train: --max-minutes cannot be used with --strategy multi-worker")
    if args.conditional is True and args.attention != "bahdanau":
        raise SystemExit(
            f"train: --conditional is a Bahdanau decoder; it cannot be used with "
            f"--attention {args.attention}"
        )
    strategy = distribute.make_strategy(args.strategy)
    replicas = strategy.num_replicas_in_sync
    # Workers other than the chief write to a private sub-folder.
    run_dir = distribute.worker_run_dir(args.run_dir)
    state = _prepare_run_dir(run_dir, args.overwrite)
    config = dict(PRESETS[args.preset])
    for key in config:
        value = getattr(args, key, None)
        if value is not None:
            config[key] = value
    config.update(attention=args.attention, seed=args.seed, preset=args.preset)
    config.update(strategy=args.strategy, replicas=replicas, max_minutes=args.max_minutes)
    config["input_feeding"] = not args.no_input_feeding
    # The presets' conditional decoder is a Bahdanau decoder; the others have none.
    config["conditional"] = config["conditional"] and args.attention == "bahdanau"
    config["lr_schedule"] = args.lr_schedule
    keras.utils.set_random_seed(args.seed)

    corpus = load_multi30k(("train", "val"), args.data_dir, max_words=None)
    train_split = corpus["train"]
    train_en, train_fr = _filter_long(train_split.en, train_split.fr, MAX_TRAIN_WORDS)
    if config["max_train_examples"]:
        train_en = train_en[: config["max_train_examples"]]
        train_fr = train_fr[: config["max_train_examples"]]

    # The vocabularies come from the training split only, once per run: a
    # resumed run reuses them. config.json is written after them, so they are
    # whole when it exists.
    if (run_dir / CONFIG_FILE).exists():
        runs.read_config(run_dir, required=())
        source_tokenizer = SubwordTokenizer.load(run_dir / SOURCE_VOCAB)
        target_tokenizer = SubwordTokenizer.load(run_dir / TARGET_VOCAB)
    else:
        logging.info("Learning the WordPiece vocabularies from %d pairs", len(train_en))
        source_tokenizer = SubwordTokenizer.build(
            train_en, vocab_size=config["vocab_size"], lower_case=True
        )
        target_tokenizer = SubwordTokenizer.build(
            train_fr, vocab_size=config["vocab_size"], lower_case=True
        )
        source_tokenizer.save(run_dir / SOURCE_VOCAB)
        target_tokenizer.save(run_dir / TARGET_VOCAB)
    config["source_vocab_size"] = source_tokenizer.vocab_size
    config["target_vocab_size"] = target_tokenizer.vocab_size
    config["run_format"] = runs.RUN_FORMAT
    runs.write_json(run_dir / CONFIG_FILE, config)
    print(
        f"vocabularies: en {source_tokenizer.vocab_size}, fr "
        f"{target_tokenizer.vocab_size} subwords; {len(train_en)} training pairs"
    )

    # `batch_size` is per replica; the datasets yield global batches that the
    # strategy splits.
    global_batch = config["batch_size"] * replicas
    train_data = make_dataset(
        train_en,
        train_fr,
        source_tokenizer,
        target_tokenizer,
        batch_size=global_batch,
        shuffle=True,
        seed=args.seed,
    )
    val = corpus["val"]
    val_data = make_dataset(
        val.en,
        val.fr,
        source_tokenizer,
        target_tokenizer,
        batch_size=global_batch,
        shuffle=False,
    )
    train_data = distribute.shard_by_data(train_data)
    val_data = distribute.shard_by_data(val_data)
    with strategy.scope():
        model = _compiled_model(config, source_tokenizer, target_tokenizer, args.seed)
        if state is not None:
            # A killed run restarts after its last backed-up epoch.
            print(f"resuming {run_dir} after epoch {state['epoch']}", flush=True)
            runs.restore(model, run_dir, state)
    callbacks = []
    if config["ema_momentum"]:
        # Validation, the checkpoint and the backup see the averaged weights;
        # the next epoch trains the raw ones again. It must come first.
        callbacks.append(keras.callbacks.SwapEMAWeights(swap_on_epoch=True))
    callbacks += [
        keras.callbacks.TerminateOnNaN(raise_error=True),
        keras.callbacks.EarlyStopping(monitor="val_loss", patience=args.patience),
        _learning_rate_schedule(config, args.max_minutes),
        keras.callbacks.TensorBoard(run_dir / runs.LOGS_DIR),
    ]
    if args.keep_epochs:
        # After the EMA swap, like the checkpoint: the validated weights.
        callbacks.append(_EpochWeights(run_dir))
    if args.max_minutes:
        callbacks.append(_TimeLimit(args.max_minutes * 60))
    # Last, so that it backs up what the others left: the averaged weights,
    # the epoch's learning rate in the logs, the decision to stop. It saves
    # the best model on the validation loss as the run's model.
    keeper = runs.RunKeeper(run_dir, state)
    callbacks.append(keeper)
    start = time.time()
    if state is None or not (state["stopped"] or state["epoch"] >= config["epochs"]):
        model.fit(
            train_data,
            validation_data=val_data,
            epochs=config["epochs"],
            initial_epoch=state["epoch"] if state else 0,
            callbacks=callbacks,
            verbose=1 if sys.stdout.isatty() else 2,
        )
    minutes = (time.time() - start) / 60
    print(f"training took {minutes:.1f} min; model: {run_dir / MODEL_FILE}")
    _update_json(run_dir / CONFIG_FILE, {"train_minutes_last_session": minutes})
    # Last: until this file exists, the run is unfinished and resumes.
    runs.finish(
        run_dir,
        {
            "epochs": len(keeper.history),
            "best_epoch": keeper.best_epoch,
            "best_val_loss": keeper.best,
        },
    )
    return run_dir


def _prepare_run_dir(run_dir, overwrite):
    """Readies `run_dir` for `train`; returns the backup state to resume from, or None."""
    try:
        status = runs.run_status(run_dir)
    except runs.CorruptRunError as error:
        if not overwrite:
            raise SystemExit(f"train: {error} Use --overwrite to start the run over.") from None
        status = None
    if status is not None and status.state == runs.FINISHED and not overwrite:
        # A new training would start from fresh weights and replace the model.
        raise SystemExit(
            f"train: {run_dir} already holds a finished run. Use another --run-dir, or --overwrite."
        )
    if status is None or status.state == runs.FINISHED:
        # --overwrite. The marker goes first: a kill from here on leaves an
        # unfinished run, never a finished one with missing files.
        runs.clear(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    runs.remove_temporaries(run_dir)
    state = runs.read_state(run_dir)
    if state is None:
        # No epoch backed up: the run starts over; its vocabularies stay, and
        # the epochs of an older run are not averaged with the new one's.
        runs.clear(run_dir, keep_config=True)
    return state


def _compiled_model(config, source_tokenizer, target_tokenizer, seed):
    model = build_translator(
        source_tokenizer.vocab_size,
        target_tokenizer.vocab_size,
        attention=config["attention"],
        embedding_dim=config["embedding_dim"],
        units=config["units"],
        dropout=config["dropout"],
        input_feeding=config["input_feeding"],
        conditional=config["conditional"],
        decoder_init=config["decoder_init"],
        tie_embeddings=config["tie_embeddings"],
        encoder_units=config["encoder_units"],
        seed=seed,
    )
    optimizer = keras.optimizers.Adam(
        config["learning_rate"],
        global_clipnorm=1.0,
        use_ema=bool(config["ema_momentum"]),
        ema_momentum=config["ema_momentum"],
    )
    model.compile(
        optimizer=optimizer,
        loss=SmoothedSparseCrossentropy(config["label_smoothing"], ignore_class=0),
        metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
    )
    return model


def _learning_rate_schedule(config, max_minutes):
    if config["lr_schedule"] == "plateau":
        # Halve the rate after one epoch without a better validation loss.
        return keras.callbacks.ReduceLROnPlateau(monitor="val_loss", factor=0.5, patience=1)
    budget = max_minutes * 60 if max_minutes else None
    return CosineToBudget(config["learning_rate"], config["epochs"], budget)


class CosineToBudget(keras.callbacks.Callback):
    """Cosine decay of the learning rate over the epochs or the time budget.

    Before each epoch the rate is set from the run's progress: the larger of the
    fraction of epochs done and the fraction of the wall-clock budget spent, so
    that a run cut short by ``--max-minutes`` still ends at a low rate instead of
    stopping at a high one. The rate falls from ``learning_rate`` to
    ``learning_rate * final_fraction``. A resumed run counts its epochs from the
    backup but its time from the restart, like the time limit itself.
    """

    def __init__(
        self, learning_rate, epochs, budget_seconds=None, final_fraction=0.05, clock=time.monotonic
    ):
        super().__init__()
        if learning_rate <= 0 or epochs < 1:
            raise ValueError(
                f"CosineToBudget: learning_rate must be > 0 and epochs >= 1, got "
                f"{learning_rate} and {epochs}"
            )
        self.learning_rate = learning_rate
        self.epochs = epochs
        self.budget_seconds = budget_seconds
        self.final_fraction = final_fraction
        self.clock = clock
        self.start = clock()

    def rate(self, epoch):
        progress = epoch / self.epochs
        if self.budget_seconds:
            progress = max(progress, (self.clock() - self.start) / self.budget_seconds)
        progress = min(progress, 1.0)
        low = self.learning_rate * self.final_fraction
        return low + 0.5 * (self.learning_rate - low) * (1 + math.cos(math.pi * progress))

    def on_epoch_begin(self, epoch, logs=None):
        self.model.optimizer.learning_rate = self.rate(epoch)

    def on_epoch_end(self, epoch, logs=None):
        # Recorded in history.csv, as ReduceLROnPlateau does.
        if logs is not None:
            logs["learning_rate"] = float(
                keras.ops.convert_to_numpy(self.model.optimizer.learning_rate)
            )


class _EpochWeights(keras.callbacks.Callback):
    """Saves the weights after every epoch, for `average`."""

    def __init__(self, run_dir):
        super().__init__()
        self.run_dir = run_dir

    def on_epoch_end(self, epoch, logs=None):
        path = averaging.epoch_weight_path(self.run_dir, epoch + 1)
        path.parent.mkdir(parents=True, exist_ok=True)
        runs.save_weights(self.model, path)


class _TimeLimit(keras.callbacks.Callback):
    """Stops training after the epoch that passes a wall-clock budget."""

    def __init__(self, seconds):
        super().__init__()
        self.seconds = seconds
        self.start = time.time()

    def on_epoch_end(self, epoch, logs=None):
        if time.time() - self.start > self.seconds:
            print(f"time limit reached after epoch {epoch + 1}")
            self.model.stop_training = True


def _filter_long(en, fr, max_words):
    kept = [
        (e, f)
        for e, f in zip(en, fr, strict=True)
        if max(len(e.split()), len(f.split())) <= max_words
    ]
    skipped = len(en) - len(kept)
    if skipped:
        logging.info("skipped %d training pairs longer than %d words", skipped, max_words)
    return [e for e, _ in kept], [f for _, f in kept]


def _update_json(path, values):
    data = runs.read_json(path) if Path(path).exists() else {}
    data.update(values)
    runs.write_json(path, data)


# ------------------------------------------------------------- evaluate


def evaluate(args):
    run_dir = Path(args.run_dir)
    translator, config = load_run(run_dir)
    splits = args.splits.split(",")
    corpus = load_multi30k(splits, args.data_dir)
    baseline = load_run(args.baseline_run_dir)[0] if args.baseline_run_dir else None
    out_dir = Path(args.out_dir or run_dir / "eval")
    out_dir.mkdir(parents=True, exist_ok=True)
    results = {}
    for split in splits:
        data = corpus[split].head(args.max_sentences)
        for method in args.methods.split(","):
            print(f"{split}: {method} decoding")
            scores, decoded, hyps = evaluation.decode_and_score(
                translator,
                data,
                method=method,
                batch_size=args.batch_size,
                beam_width=args.beam_width,
                length_penalty=args.length_penalty,
            )
            scores["decode_seconds"] = round(scores.pop("seconds"), 1)
            if method == "beam":
                scores.update(beam_width=args.beam_width, length_penalty=args.length_penalty)
            results[f"{split}/{method}"] = scores
            runs.write_text(out_dir / f"{split}.{method}.fr", "\n".join(hyps) + "\n")
            if method == "greedy":
                curves = {
                    f"{config['attention']} attention": evaluation.bleu_by_length(
                        hyps, data.fr, data.en
                    )
                }
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
                for i in _indices(args.heatmaps):
                    _heatmap(
                        translator,
                        decoded,
                        data,
                        i,
                        out_dir / f"attention.{split}.{i}.png",
                    )
    print(_results_table(results))
    runs.write_json(out_dir / "results.json", results)
    print(f"results: {out_dir / 'results.json'}")
    return results


def _indices(text):
    return [int(i) for i in text.split(",") if i.strip()] if text else []


def _heatmap(translator, decoded, data, i, path):
    if i >= len(decoded["text"]):
        raise ValueError(f"--heatmaps {i}: the split has {len(decoded['text'])} sentences")
    source = translator.source_tokenizer.lookup(tf.constant([decoded["source_tokens"][i]]))
    target = translator.target_tokenizer.lookup(tf.constant([decoded["tokens"][i] or [0]]))
    evaluation.plot_attention(
        decoded["attention"][i],
        [t.decode() for t in source.numpy()[0]],
        [t.decode() for t in target.numpy()[0]][: len(decoded["tokens"][i])],
        path,
        title=data.en[i],
    )


def _results_table(results):
    lines = [
        "| split / decoding | BLEU (cased) | chrF | BLEU (lc, tok) |",
        "|---|---|---|---|",
    ]
    for key, value in results.items():
        if "bleu" in value:
            lines.append(f"| {key} | {value['bleu']} | {value['chrf']} | {value['bleu_lc_tok']} |")
    return "\n".join(lines)


# ------------------------------------------------------------ translate


def read_inputs(arguments, command="translate"):
    """`(label, sentence)` pairs: the arguments, or one per line of stdin.

    Standard input is read as bytes and decoded line by line, so that bytes
    that are not UTF-8 stop the command with an error naming their line
    instead of a traceback. Blank lines are kept (each gets an empty
    translation): the output has one line per input line.
    """
    if arguments:
        inputs = [(f"argument {i}", text) for i, text in enumerate(arguments, 1)]
        for label, text in inputs:
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as error:  # undecodable bytes in argv
                raise SystemExit(
                    f"{command}: {label} is not valid UTF-8 (character {error.start})"
                ) from None
        return inputs
    inputs = []
    for number, line in enumerate(sys.stdin.buffer.read().splitlines(), 1):
        try:
            inputs.append((f"line {number} of standard input", line.decode("utf-8")))
        except UnicodeDecodeError as error:
            raise SystemExit(
                f"{command}: line {number} of standard input is not valid UTF-8 "
                f"(byte 0x{line[error.start]:02x} at byte {error.start}); convert the "
                "file to UTF-8, e.g. with iconv"
            ) from None
    return inputs


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


def translate(args):
    inputs = read_inputs(args.sentences)
    if not inputs:
        raise SystemExit("translate: give sentences as arguments or on stdin")
    translator, _ = load_run(args.run_dir)
    sentences = [text for _, text in inputs]
    check_lengths(inputs, translator.source_lengths(sentences), translator.max_source_length)
    decoded = evaluation.decode_corpus(
        translator,
        sentences,
        method=args.method,
        beam_width=args.beam_width,
        progress=False,
    )
    outputs = evaluation.detokenize_output(decoded["text"])
    for sentence in outputs:
        print(sentence)
    return outputs


# -------------------------------------------------------------- explain


def explain(args):
    """Attention is not explanation: how much does the output depend on it?"""
    import numpy as np

    translator, config = load_run(args.run_dir)
    if not translator.has_attention:
        raise SystemExit("explain: the run has no attention (attention=none)")
    data = load_multi30k([args.split], args.data_dir)[args.split]
    data = data.head(args.max_sentences)
    en, fr = data.en, data.fr
    keras.utils.set_random_seed(args.seed)
    rows = {}
    decoded = evaluation.decode_corpus(translator, en, batch_size=args.batch_size)
    reference_hyps = evaluation.detokenize_output(decoded["text"])
    rows["model's attention"] = {"tvd": 0.0, **evaluation.score(reference_hyps, fr)}
    sharpness = evaluation.attention_statistics(decoded["attention"])
    # Output distributions along the model's own greedy output, with and
    # without the override: the total variation distance says how much the
    # attention weights move the prediction at each step.
    start = translator.target_tokenizer.start_id
    for override in ("uniform", "permute"):
        tvds, counts = [], []
        for begin in range(0, len(en), args.batch_size):
            batch = range(begin, min(begin + args.batch_size, len(en)))
            src = tf.ragged.constant([decoded["source_tokens"][i] for i in batch])
            tgt = tf.ragged.constant([[start] + decoded["tokens"][i] for i in batch])
            src = tf.cast(src.to_tensor(), tf.int32)
            tgt = tf.cast(tgt.to_tensor(), tf.int32)
            p = tf.nn.softmax(translator.teacher_forced_logits(src, tgt)).numpy()
            q = tf.nn.softmax(
                translator.teacher_forced_logits(src, tgt, attention_override=override)
            ).numpy()
            mask = tgt.numpy() != 0
            tvds.append(evaluation.total_variation(p, q, mask) * mask.sum())
            counts.append(mask.sum())
        tvd = float(np.sum(tvds) / np.sum(counts))
        changed = evaluation.decode_corpus(
            translator, en, batch_size=args.batch_size, attention_override=override
        )
        hyps = evaluation.detokenize_output(changed["text"])
        rows[f"{override} attention"] = {
            "tvd": round(tvd, 4),
            **evaluation.score(hyps, fr),
        }
    lines = [
        f"explain: {config['attention']} attention, {args.split}, {len(en)} sentences",
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
    runs.write_json(Path(args.run_dir) / "explain.json", rows)
    return rows


# -------------------------------------------------------------- average


def average(args):
    """Writes a run folder whose model averages the last epochs of another."""
    run_dir, out_dir = Path(args.run_dir), Path(args.out_dir)
    if out_dir.resolve() == run_dir.resolve():
        raise SystemExit("average: --out-dir must differ from --run-dir")
    epochs = averaging.last_epochs(run_dir, args.last)
    translator, config = load_run(run_dir)
    model = translator.model
    averaging.average_weights(model, [averaging.epoch_weight_path(run_dir, e) for e in epochs])
    out_dir.mkdir(parents=True, exist_ok=True)
    # Unfinished until the marker is written again, last.
    (out_dir / runs.FINISHED_FILE).unlink(missing_ok=True)
    translator.source_tokenizer.save(out_dir / SOURCE_VOCAB)
    translator.target_tokenizer.save(out_dir / TARGET_VOCAB)
    runs.save_model(model, out_dir / MODEL_FILE)
    config = dict(config, averaged_epochs=epochs, averaged_from=str(run_dir))
    runs.write_json(out_dir / CONFIG_FILE, dict(config, run_format=runs.RUN_FORMAT))
    runs.finish(out_dir, {"averaged_epochs": epochs, "averaged_from": str(run_dir)})
    print(f"averaged epochs {epochs[0]} to {epochs[-1]} of {run_dir}: {out_dir / MODEL_FILE}")
    return out_dir


# --------------------------------------------------------------- status


def status(args):
    """Prints `STATE: detail`; STATE is new, unfinished or finished."""
    try:
        found = runs.run_status(args.run_dir)
    except runs.CorruptRunError as error:
        raise SystemExit(f"corrupt: {error}") from None
    print(f"{found.state}: {found.detail}")
    return found


# ------------------------------------------------------------------ cli


def _unit_interval(text):
    value = float(text)
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1), got {text}")
    return value


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-dir", help="folder with the Multi30k .gz files")
    commands = parser.add_subparsers(dest="command", required=True)

    p = commands.add_parser("train", help="train a translator")
    p.add_argument("--run-dir", default="runs/bahdanau", help="output folder")
    p.add_argument("--attention", choices=ATTENTIONS, default="bahdanau")
    p.add_argument("--preset", choices=sorted(PRESETS), default="default")
    p.add_argument("--epochs", type=int)
    p.add_argument("--batch-size", type=int)
    p.add_argument("--embedding-dim", type=int)
    p.add_argument("--units", type=int)
    p.add_argument(
        "--encoder-units",
        type=int,
        help="GRU size of each encoder direction (default: units / 2)",
    )
    p.add_argument("--dropout", type=float)
    p.add_argument("--learning-rate", type=float)
    p.add_argument("--vocab-size", type=int)
    p.add_argument("--max-train-examples", type=int)
    p.add_argument(
        "--label-smoothing", type=_unit_interval, help="ε of the smoothed targets; 0: none"
    )
    p.add_argument(
        "--ema-momentum",
        type=_unit_interval,
        help="keep an exponential moving average of the weights for validation "
        "and the saved model; 0: none",
    )
    p.add_argument(
        "--tie-embeddings",
        action=argparse.BooleanOptionalAction,
        help="score the target tokens with the target embedding matrix (TiedEmbedding)",
    )
    p.add_argument("--no-input-feeding", action="store_true", help="Luong only")
    p.add_argument(
        "--conditional",
        action=argparse.BooleanOptionalAction,
        help="bahdanau only: the conditional (two-cell) GRU decoder of the published "
        "systems, or (--no-conditional) the plain Bahdanau decoder",
    )
    p.add_argument(
        "--decoder-init",
        choices=DECODER_INITS,
        help="what the first decoder state reads: the encoder's final states, or the "
        "mean of its outputs over the source tokens",
    )
    p.add_argument("--patience", type=int, default=3, help="early stopping")
    p.add_argument(
        "--lr-schedule",
        choices=("cosine", "plateau"),
        default="cosine",
        help="cosine: decay over the epochs or --max-minutes, whichever ends first; "
        "plateau: halve after an epoch without a better validation loss",
    )
    p.add_argument("--max-minutes", type=float, help="stop after this epoch budget")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--keep-epochs",
        action="store_true",
        help="save the weights after every epoch in RUN_DIR/epochs (for `average`)",
    )
    p.add_argument("--overwrite", action="store_true", help="replace a finished run")
    p.add_argument(
        "--strategy",
        choices=distribute.STRATEGIES,
        default="one-device",
        help="tf.distribute strategy; --batch-size is then per replica",
    )
    p.set_defaults(func=train)

    p = commands.add_parser("status", help="whether a run is new, unfinished or finished")
    p.add_argument("--run-dir", default="runs/bahdanau")
    p.set_defaults(func=status)

    p = commands.add_parser("evaluate", help="score a trained run")
    p.add_argument("--run-dir", default="runs/bahdanau")
    p.add_argument("--splits", default="test_2016_flickr,test_2017_flickr,test_2017_mscoco")
    p.add_argument("--methods", default="greedy,beam", help="greedy and/or beam")
    p.add_argument("--beam-width", type=int, default=4)
    p.add_argument("--length-penalty", type=float, default=0.6)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--baseline-run-dir", help="a run with --attention none")
    p.add_argument("--heatmaps", default="0,1,2", help="sentence indices to plot")
    p.add_argument("--max-sentences", type=int, help="score only the first N")
    p.add_argument("--out-dir", help="default: RUN_DIR/eval")
    p.set_defaults(func=evaluate)

    p = commands.add_parser("average", help="average a run's last epochs")
    p.add_argument("--run-dir", default="runs/bahdanau", help="trained with --keep-epochs")
    p.add_argument("--last", type=int, required=True, help="how many of the last epochs")
    p.add_argument("--out-dir", required=True, help="the new run folder")
    p.set_defaults(func=average)

    p = commands.add_parser(
        "translate",
        help="translate sentences",
        description="Prints one translation per input, blank lines included. A "
        "sentence of more source tokens than the model's max_source_length (512) "
        "or a line of standard input that is not UTF-8 stops it with an error "
        "naming the line, before anything is translated.",
    )
    p.add_argument(
        "sentences", nargs="*", help="English sentences (else one per line of stdin, UTF-8)"
    )
    p.add_argument("--run-dir", default="runs/bahdanau")
    p.add_argument("--method", choices=("greedy", "beam"), default="beam")
    p.add_argument("--beam-width", type=int, default=4)
    p.set_defaults(func=translate)

    p = commands.add_parser("explain", help="attention ablations")
    p.add_argument("--run-dir", default="runs/bahdanau")
    p.add_argument("--split", default="test_2016_flickr")
    p.add_argument("--max-sentences", type=int, default=1000)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=explain)
    return parser.parse_args(argv)


def main(argv=None):
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    args = parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    main()
