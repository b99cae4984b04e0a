"""Grapheme-to-phoneme on CMUdict: spelling in, ARPAbet phones out (docs/g2p.md).

A character-to-phone attention encoder-decoder built from the package's
layers, trained through `keras_attention.training` on the standard CMUdict
0.7b split, scored as the G2P literature does (WER, PER) and exported to a
SavedModel and builtin-only TFLite with the greedy and beam searches inside.

    python examples/g2p_cmudict.py train --data-dir ../shared/data/cmudict --run-dir runs/g2p
    python examples/g2p_cmudict.py evaluate --run-dir runs/g2p --plot docs/img/g2p_by_length.png
    python examples/g2p_cmudict.py pronounce --run-dir runs/g2p keras attention
    echo Tensorflow | python examples/g2p_cmudict.py pronounce --run-dir runs/g2p
    python examples/g2p_cmudict.py export --run-dir runs/g2p runs/g2p/export
    python examples/g2p_cmudict.py export --run-dir runs/g2p web_g2p --source-length 32
    node web/build.mjs web_g2p/tflite      # the browser page (npm ci first)

Time on a 2-core CPU: `train` within `--max-minutes` (60; `--quick`: under a
minute), resuming after a kill; `evaluate` 2 minutes (12k words, greedy and
beam 4: WER, PER, a table by length); `export` a minute; `pronounce` a line
of phones per word.
"""

import argparse
import math
import os
import sys
import time

os.environ.setdefault("KERAS_ATTENTION_QUIET_NATIVE_LOG", "1")  # backend/native_log.py
import keras_attention  # noqa: E402, F401, I001 (first: its filter sees TensorFlow start)
# isort: split

import keras  # noqa: E402
import numpy as np  # noqa: E402

from keras_attention import BahdanauAttention  # noqa: E402
from keras_attention import BahdanauDecoder  # noqa: E402
from keras_attention import BahdanauMonotonicAttention  # noqa: E402
from keras_attention import LocationSensitiveAttention  # noqa: E402
from keras_attention import LuongAttention  # noqa: E402
from keras_attention import LuongDecoder  # noqa: E402
from keras_attention import Seq2SeqGenerator  # noqa: E402
from keras_attention import SmoothedSparseCrossentropy  # noqa: E402
from keras_attention import training  # noqa: E402
from keras_attention.arguments.cli_types import non_negative_int  # noqa: E402
from keras_attention.arguments.cli_types import positive_int  # noqa: E402
from keras_attention.arguments.cli_types import unit_interval  # noqa: E402
from keras_attention.backend import native_log  # noqa: E402
from keras_attention.files.atomic import write_json  # noqa: E402
from keras_attention.files.file_errors import check_can_write  # noqa: E402
from keras_attention.files.file_errors import end_command  # noqa: E402
from keras_attention.files.file_errors import file_errors  # noqa: E402
from keras_attention.files.file_hash import check_sha256  # noqa: E402
from keras_attention.files.model_file import ModelFileError  # noqa: E402
from keras_attention.files.reading import open_regular  # noqa: E402
from keras_attention.generation import EnsembleGenerator  # noqa: E402
from keras_attention.generation import decode_batches  # noqa: E402
from keras_attention.generation.search_defaults import BEAM_WIDTH  # noqa: E402
from keras_attention.generation.search_defaults import MAX_SOURCE_LENGTH  # noqa: E402
from keras_attention.scoring import plots  # noqa: E402
from keras_attention.scoring.error_rates import error_rate_table  # noqa: E402
from keras_attention.scoring.error_rates import plot_error_rates_by_length  # noqa: E402
from keras_attention.scoring.error_rates import score_decodings  # noqa: E402
from keras_attention.text.ascii_spelling import ascii_upper  # noqa: E402
from keras_attention.text.line_reader import LineReader  # noqa: E402
from keras_attention.text.line_reader import read_inputs  # noqa: E402
from keras_attention.text.symbol_vocabulary import SymbolVocabulary  # noqa: E402

# The files of ../shared/data/cmudict and their sha256 (see the README there).
SHA256 = {
    "cmudict-0.7b.train": "58cba5cd56d28bcb529c85e752123b00c1f748f8163eacbe368ab844d7f8d6a6",
    "cmudict-0.7b.test": "f216624c0432a201179d22a6ef9fb7ebd25ff65342ac2a0214a0752c6b6d3550",
    "cmudict-0.7b.train-dev-20-21": (
        "87bdf008b66f6aacbff4bab82d8212ef1caba4292f787ccce0d75cf5adac5778"
    ),
    "cmudict-0.7b.train-dev-1-21": (
        "a391daa6bd94b786047e678fb2d3000a2a4e24b3e726dae0feddf8cc9f09ed28"
    ),
}
# `--split`: which file trains and which one evaluates. "dev" is for tuning;
# "test" trains on the whole training file and is reported, never tuned on.
SPLITS = {
    "test": ("cmudict-0.7b.train", "cmudict-0.7b.test"),
    "dev": ("cmudict-0.7b.train-dev-20-21", "cmudict-0.7b.train-dev-1-21"),
}

# Graphemes: 0 is padding. Phones: 0 padding, 1 START, 2 END.
PAD, START, END = 0, 1, 2
PHONE_SPECIALS = ["<pad>", "<s>", "</s>"]

ATTENTIONS = ("bahdanau", "luong-general", "location-sensitive", "monotonic")
# The flags of `train` that config.json records (with the split and
# max_epochs): those of the model, which `build_model` takes, and the rest.
MODEL_OPTIONS = (
    "attention",
    "embedding_dim",
    "encoder_units",
    "encoder_layers",
    "units",
    "dropout",
    "seed",
    "sigmoid_noise",
    "score_bias_init",
)
TRAINING_OPTIONS = tuple(
    "label_smoothing batch_size learning_rate max_minutes steps_per_epoch quick".split()
)
# What a config.json of an older recipe, without these options, trained with.
OLDER_RECIPE = {"sigmoid_noise": 1.0, "score_bias_init": -1.0, "label_smoothing": 0.0}
# The example's own files in a run folder (`keras_attention.training` writes
# the others: config.json, model.keras, history.csv, backup/, finished.json).
RUN_FILES = ("vocab.json", "progress.json")
# Word-length buckets of the table and the plot, in letters (inclusive).
LENGTH_BUCKETS = ((1, 4), (5, 6), (7, 8), (9, 10), (11, 12), (13, 22))
# WER and PER as published (`keras_attention.scoring.error_rates`): a word is wrong when
# its phones match none of its pronunciations; PER sums the edit distances to
# the closest one.
SCORE_NAMES = ("word", "phone", "wer", "per")


# --------------------------------------------------------------------- data


def read_cmudict(path, expected_sha256=None):
    """Reads a CMUdict file: {WORD: [phones, ...]} in file order.

    Each line is `WORD␠␠PH PH PH` in ASCII (CRLF or LF line endings,
    `LineReader`); a word with several pronunciations has several lines and
    gets a list of several tuples, in file order, without duplicates.

    Raises:
        FileNotFoundError: `path` does not exist (the message names it).
        ValueError: a sha256 other than `expected_sha256`, a malformed line, a
            FIFO or a device (never opened); the message names the file (and line).
    """
    if expected_sha256 is not None:
        check_sha256(path, expected_sha256)
    lexicon = {}
    with open_regular(path, "rb", "CMUdict file") as file:
        reader = LineReader(file, name=path)
        for number, line in reader:  # ValueError naming the line if not UTF-8
            word, sep, phones = line.partition("  ")
            phones = phones.split()
            if not (line.isascii() and sep and word and phones) or " " in word or "\t" in line:
                raise ValueError(
                    f"{reader.where(number)}: expected 'WORD  PH PH ...' in ASCII (two spaces "
                    f"after the word, phones separated by one space), got {line[:80]!r}"
                )
            pronunciations = lexicon.setdefault(word, [])
            if tuple(phones) not in pronunciations:
                pronunciations.append(tuple(phones))
    return lexicon


def read_split(data_dir, name):
    """One file of the standard split, sha256-checked (see SHA256)."""
    return read_cmudict(os.path.join(data_dir, name), SHA256[name])


class Vocabulary:
    """Graphemes (A-Z and ') and phones ↔ ids, a `SymbolVocabulary` each; saved
    in the run folder as vocab.json, {"graphemes": [...], "phones": [...]}."""

    def __init__(self, graphemes, phones):
        self.source = SymbolVocabulary(graphemes, 1, kind="character")  # 0: padding
        self.target = SymbolVocabulary(phones, len(PHONE_SPECIALS), END, kind="phone")
        self.graphemes, self.phones = self.source.symbols, self.target.symbols
        self.encode_phones = self.target.encode
        self.decode_phones = self.target.decode  # up to END (excluded), specials dropped

    def encode_word(self, word):
        """WORD → grapheme ids; ValueError naming the word for an unknown character."""
        return self.source.encode(word, "word")

    @classmethod
    def from_lexicon(cls, lexicon):
        graphemes = SymbolVocabulary.from_sequences(lexicon, ["<pad>"]).symbols
        phones = (pron for prons in lexicon.values() for pron in prons)
        return cls(graphemes, SymbolVocabulary.from_sequences(phones, PHONE_SPECIALS).symbols)

    def to_json(self):
        return {"graphemes": self.graphemes, "phones": self.phones}

    @classmethod
    def from_json(cls, data):
        return cls(data["graphemes"], data["phones"])


def training_pairs(lexicon, vocab):
    """Every (word, pronunciation) as (grapheme ids, phone ids): one per line."""
    encode = vocab.encode_word
    return [(encode(w), vocab.encode_phones(p)) for w, prons in lexicon.items() for p in prons]


# ------------------------------------------------------- model and decoding


def make_attention(kind, units, seed, sigmoid_noise=1.0, score_bias_init=-1.0):
    if kind == "bahdanau":  # content only: the score sees the keys, not positions
        return BahdanauAttention(units)
    if kind == "luong-general":
        return LuongAttention("general")
    if kind == "location-sensitive":  # also sees where it attended so far
        return LocationSensitiveAttention(units, filters=32, kernel_size=31, cumulative=True)
    if kind == "monotonic":
        # Trained on the expected alignment with pre-sigmoid noise that pushes
        # the choice probabilities toward 0 or 1, and a negative energy offset
        # r (Raffel et al. 2017), so that hard decoding matches soft.
        return BahdanauMonotonicAttention(
            units,
            sigmoid_noise=sigmoid_noise,
            score_bias_init=score_bias_init,
            mode="parallel",
            seed=seed,
        )
    raise ValueError(
        f"Invalid value for argument `attention`. Expected one of {ATTENTIONS}. "
        f"Received: attention={kind!r}"
    )


def build_model(
    num_graphemes,
    num_phones,
    attention="location-sensitive",
    embedding_dim=64,
    encoder_units=256,
    encoder_layers=2,
    units=256,
    dropout=0.2,
    seed=0,
    sigmoid_noise=1.0,
    score_bias_init=-1.0,
):
    """The teacher-forced training model: `(graphemes, phones_in) → logits`.

    graphemes (B, S) and phones_in (B, T) int32, 0-padded; logits (B, T, V).
    A bidirectional LSTM encoder (`encoder_layers` layers, `encoder_units` per
    direction) whose final states start an LSTM decoder through a tanh bridge;
    `LuongDecoder` for "luong-general", `BahdanauDecoder` otherwise.
    """
    graphemes = keras.Input((None,), dtype="int32", name="graphemes")
    phones_in = keras.Input((None,), dtype="int32", name="phones_in")
    x = keras.layers.Embedding(num_graphemes, embedding_dim, mask_zero=True)(graphemes)
    x = keras.layers.Dropout(dropout, seed=seed)(x)  # (B, S, E), mask (B, S)
    for _ in range(encoder_layers - 1):
        x = keras.layers.Bidirectional(
            keras.layers.LSTM(encoder_units, return_sequences=True, dropout=0.0)
        )(x)  # (B, S, 2 · encoder_units)
    memory, fh, fc, bh, bc = keras.layers.Bidirectional(
        keras.layers.LSTM(encoder_units, return_sequences=True, return_state=True)
    )(x)  # memory (B, S, 2 · encoder_units); states (B, encoder_units)
    h0 = keras.layers.Dense(units, activation="tanh")(keras.layers.Concatenate()([fh, bh]))
    c0 = keras.layers.Dense(units)(keras.layers.Concatenate()([fc, bc]))  # (B, units)
    y = keras.layers.Embedding(num_phones, embedding_dim, mask_zero=True)(phones_in)
    y = keras.layers.Dropout(dropout, seed=seed + 1)(y)  # (B, T, E)
    layer = make_attention(attention, units, seed, sigmoid_noise, score_bias_init)
    if attention == "luong-general":
        decoder = LuongDecoder(units, layer, cell_type="lstm")
    else:
        decoder = BahdanauDecoder(units, layer, cell_type="lstm")
    outputs, _, _ = decoder(y, memory, initial_state=[h0, c0])  # (B, T, units)
    outputs = keras.layers.Dropout(dropout, seed=seed + 2)(outputs)
    logits = keras.layers.Dense(num_phones)(outputs)  # (B, T, V)
    return keras.Model([graphemes, phones_in], logits, name="g2p")


def make_generator(model, monotonic_mode="hard"):
    """The greedy/beam generator of a trained model.

    Monotonic attention decodes with hard decisions by default (one source
    position per step, never moving back: the streaming decoder); "soft"
    decodes with the expected alignment it was trained on.
    """
    for layer in model.layers:  # the decoder's attention
        if isinstance(getattr(layer, "attention", None), BahdanauMonotonicAttention):
            layer.attention.mode = {"hard": "hard", "soft": "parallel"}[monotonic_mode]
    return Seq2SeqGenerator.from_model(model, start_id=START, end_id=END)


def pronounce_words(generator, vocab, words, beam_width=None, progress=False):
    """{WORD: [phones]} for upper-case words, greedy (beam_width None) or beam."""
    words = list(words)
    sources = [vocab.encode_word(w) for w in words]
    rows = decode_batches(generator, sources, beam_width=beam_width, progress=progress)
    return {w: vocab.decode_phones(row) for w, row in zip(words, rows, strict=True)}


# ---------------------------------------------------------------- training


def train(args):
    """Trains (or resumes) a run in `args.run_dir`; returns the trained model."""
    training.set_intra_op_threads(args.intra_op_threads)
    train_name, _ = SPLITS[args.split]
    lexicon = read_split(args.data_dir, train_name)
    full_vocab = Vocabulary.from_lexicon(lexicon)  # every grapheme and phone
    if args.quick:
        words = sorted(lexicon)[:: max(1, len(lexicon) // 300)][:300]
        lexicon = {w: lexicon[w] for w in words}
    config = {"split": args.split, "train_file": train_name, "max_epochs": args.epochs}
    config.update({name: getattr(args, name) for name in MODEL_OPTIONS + TRAINING_OPTIONS})
    run = training.TrainingRun.from_args(
        args, config, files=RUN_FILES, option_defaults=OLDER_RECIPE
    )
    if run.finished():  # of this recipe: another one is refused, naming the options
        print(f"{args.run_dir} has finished training; nothing to do")
        return load_run(args.run_dir)[0]
    with run:  # a resumed run keeps its vocabulary
        vocab = Vocabulary.from_json(run.client_json("vocab.json", full_vocab.to_json()))
        return _train_in(run, args, lexicon, vocab, train_name)


def _train_in(run, args, lexicon, vocab, train_name):
    """The training of `train`, in its entered `training.TrainingRun`."""
    keras.utils.set_random_seed(args.seed)
    pairs = training_pairs(lexicon, vocab)
    print(
        f"Training on {len(lexicon):,} words ({len(pairs):,} pronunciations) of "
        f"{train_name}: {len(vocab.graphemes) - 1} graphemes, "
        f"{len(vocab.phones) - len(PHONE_SPECIALS)} phones, attention {args.attention}"
    )

    def compiled_model():
        options = {name: getattr(args, name) for name in MODEL_OPTIONS}
        model = build_model(len(vocab.graphemes), len(vocab.phones), **options)
        model.compile(
            optimizer=keras.optimizers.Adam(args.learning_rate, clipnorm=5.0),
            # Mean over the real phones (padding, id 0, ignored), label-smoothed.
            loss=SmoothedSparseCrossentropy(args.label_smoothing, ignore_class=0),
            metrics=["accuracy"],
        )
        return model

    steps_per_epoch = args.steps_per_epoch or math.ceil(len(pairs) / args.batch_size)
    budget = run.time_budget(  # decays the rate over the budget or the epochs, progress.json
        args.max_minutes,
        args.learning_rate,
        args.learning_rate / 30,
        warmup_steps=10 if args.quick else 300,
        total_steps=args.epochs * steps_per_epoch,
    )
    # ((graphemes, START + phones), phones + END) of similar lengths, reshuffled every epoch.
    dataset = training.length_bucketed_dataset(pairs, args.batch_size, args.seed, START, END)
    if args.steps_per_epoch:  # shorter "epochs": the budget is checked more often
        dataset = dataset.repeat()
    # The run backs up every epoch (weights, optimizer, progress), keeps
    # model.keras the last epoch's, resumes after a kill from the last
    # finished epoch, writes finished.json last and prints what it took.
    return run.fit(
        compiled_model,
        dataset,
        epochs=args.epochs,
        steps_per_epoch=args.steps_per_epoch,
        callbacks=[budget],
        monitor=None,
        shuffle=False,  # the dataset reshuffles itself
        verbose=args.verbose,
    )


# ------------------------------------------------------------- trained runs


def load_runs(run_dirs):
    """[(model, vocabulary, config)] of trained run folders that decode as one
    (one vocabulary, one split); one line if one is not such a run."""
    try:
        runs = training.TrainingRun.load_ensemble(run_dirs, ("vocab.json",), same=("split",))
    except (training.RunFolderError, ModelFileError) as error:
        raise SystemExit(str(error)) from None
    return [(model, Vocabulary.from_json(vocab), config) for model, config, (vocab,) in runs]


def load_run(run_dir):
    """(model, vocabulary, config) of a trained run folder."""
    return load_runs([run_dir])[0]


def save_alignment_plot(path, generator, vocab, words, config, args, models=1):
    """Greedy attention weights of a few words, one panel each."""
    title = f"attention: {config['attention']}"
    if config["attention"] == "monotonic":
        title += f", decoded {args.monotonic_mode}"
    if models > 1:
        title += f", mean of {models} models"
    panels = []
    for word in (ascii_upper(w) for w in words):
        out = generator.greedy(np.array([vocab.encode_word(word)], "int32"))
        n = int(np.asarray(out["lengths"])[0])
        phones = vocab.decode_phones(np.asarray(out["tokens"])[0, :n]) + ["</s>"]
        weights = np.asarray(out["attention"])[0, : len(phones)]  # (T, S)
        panels.append((weights, list(word), phones, word))
    plots.plot_alignments(path, panels, title)


def evaluate(args):
    runs = [args.run_dir, *(args.ensemble or ())]
    check_can_write(args.json or args.run_dir, args.plot, args.alignments and args.alignment_plot)
    loaded = load_runs(runs)
    _, vocab, config = loaded[0]
    split = args.split or config["split"]
    name = SPLITS[split][1]
    lexicon = read_split(args.data_dir, name)
    if args.limit:
        lexicon = dict(list(lexicon.items())[: args.limit])
    generators = [make_generator(model, args.monotonic_mode) for model, _, _ in loaded]
    generator = generators[0] if len(runs) == 1 else EnsembleGenerator(generators)
    print(f"Evaluating {' + '.join(runs)} on {name} ({len(lexicon):,} words)")
    decodings = {"greedy": None}
    if args.beam_width:
        decodings[f"beam {args.beam_width}"] = args.beam_width
    scores, by_length = score_decodings(
        lambda width: pronounce_words(generator, vocab, lexicon, width, args.verbose > 0),
        lexicon,
        decodings,
        LENGTH_BUCKETS,
        SCORE_NAMES,
        unit="letters",
        report=print,
    )
    results = {"split": split, "file": name, "words": len(lexicon), "runs": runs, **scores}
    print()
    print(error_rate_table(by_length, "letters"))
    if args.plot:
        title = f"CMUdict {split}: WER by word length"
        plot_error_rates_by_length(args.plot, by_length, "word length (letters)", title)
        print(f"Saved the plot to {args.plot}")
    if args.alignments:
        words = [w.strip() for w in args.alignments.split(",") if w.strip()]
        save_alignment_plot(args.alignment_plot, generator, vocab, words, config, args, len(runs))
        print(f"Saved the alignments to {args.alignment_plot}")
    ensemble = f"_ensemble{len(runs)}" if len(runs) > 1 else ""
    out = args.json or os.path.join(args.run_dir, f"eval_{split}{ensemble}.json")
    write_json(out, results)  # whole or not at all
    return results


def pronounce(args, stream=None, out=None):
    out = sys.stdout if out is None else out
    reader = LineReader(sys.stdin if stream is None else stream)
    inputs = read_inputs(args.words, "pronounce", reader)  # a line ends at a line feed
    entries = [(where, word.strip()) for where, word in inputs]
    model, vocab, _ = load_run(args.run_dir)
    for where, word in entries:  # every word checked before any is pronounced
        try:
            vocab.source.encode(ascii_upper(word), "word", max_length=MAX_SOURCE_LENGTH)
        except ValueError as error:
            raise SystemExit(f"pronounce: {where}: {error}") from None
    generator = make_generator(model, args.monotonic_mode)
    words = [w.upper() for _, w in entries if w]
    phones = pronounce_words(generator, vocab, words, beam_width=args.beam_width) if words else {}
    for _, word in entries:
        out.write((" ".join(phones[word.upper()]) if word else "") + "\n")
    out.flush()


def export_run(args):
    from keras_attention import export  # needs TensorFlow

    model, vocab, config = load_run(args.run_dir)
    check_can_write(args.out)  # before minutes of tracing
    generator = make_generator(model, args.monotonic_mode)
    started = time.perf_counter()
    # saved_model/ and tflite/ (g2p_VARIANT.tflite, g2p.json: this manifest,
    # the models, their signatures and bounds), written whole or not at all.
    manifest = export.export_folder(
        generator,
        args.out,
        "g2p",
        variants=args.variants,
        beam_width=args.beam_width,
        length_penalty=args.length_penalty,
        max_length=args.max_length,
        # None: any word length; N: a static input of N ids (pad with pad_id),
        # which LiteRT.js (the browser page, web/) needs.
        source_length=args.source_length,
        manifest={
            "task": "grapheme-to-phoneme (CMUdict 0.7b, ARPAbet without stress)",
            "graphemes": vocab.graphemes,
            "phones": vocab.phones,
            "input": "upper-case the word, map each character to its index in `graphemes` "
            "(the model does not check ids: refuse a character that is not there)",
            "output": "phones[id] for each id up to end_id; ids below 3 are not phones",
            "attention": config["attention"],
        },
        report=lambda line: print(line, flush=True),  # each model as it is written
    )
    print(
        f"Exported {args.run_dir} to {args.out} (SavedModel and TFLite "
        f"{', '.join(args.variants)}) in {time.perf_counter() - started:.0f} s"
    )
    return manifest


# --------------------------------------------------------------------- main


def build_parser():
    """The command line's parser: each command's options (`export`'s are the
    library's, `keras_attention.export.add_export_arguments`, and its own)."""
    from keras_attention.export import add_export_arguments  # needs TensorFlow
    from keras_attention.export.arguments import beam_width as beam_width_type

    formatter = argparse.ArgumentDefaultsHelpFormatter
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=formatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    default_data = os.path.join("..", "shared", "data", "cmudict")

    p = commands.add_parser("train", help="train or resume a run", formatter_class=formatter)
    p.add_argument("--data-dir", default=default_data, help="the CMUdict split's folder")
    p.add_argument(
        "--split",
        choices=sorted(SPLITS),
        default="test",
        help="test: train on cmudict-0.7b.train; dev: on train-dev-20-21 (tuning)",
    )
    p.add_argument("--attention", choices=ATTENTIONS, default="location-sensitive")
    p.add_argument("--sigmoid-noise", type=float, default=1.0, help="monotonic: noise std")
    p.add_argument("--score-bias-init", type=float, default=-1.0, help="monotonic: first r")
    p.add_argument("--embedding-dim", type=positive_int, default=64)
    p.add_argument("--encoder-units", type=positive_int, default=256, help="per direction")
    p.add_argument("--encoder-layers", type=positive_int, default=2)
    p.add_argument("--units", type=positive_int, default=256, help="decoder state size")
    p.add_argument("--dropout", type=float, default=0.2)
    p.add_argument("--label-smoothing", type=unit_interval, default=0.1, help="ε; 0: none")
    p.add_argument("--quick", action="store_true", help="a tiny run: 300 words, 12 epochs")
    training.add_training_arguments(
        p,
        batch_size=128,
        learning_rate=3e-3,
        epochs=100,
        max_minutes=60.0,
        batch_size_note="--batch-size stays the global batch, split across them",
        intra_op_threads=1,
    )

    run = argparse.ArgumentParser(add_help=False)  # the options of a trained run's commands
    run.add_argument("--run-dir", required=True)
    run.add_argument("--monotonic-mode", choices=("hard", "soft"), default="hard")

    def command(name, help, **kwargs):
        return commands.add_parser(
            name, help=help, parents=[run], formatter_class=formatter, **kwargs
        )

    p = command("evaluate", "WER and PER, greedy and beam")
    p.add_argument("--data-dir", default=default_data)
    p.add_argument("--split", choices=sorted(SPLITS), help="default: the run's")
    p.add_argument("--beam-width", type=non_negative_int, default=BEAM_WIDTH, help="0: greedy")
    p.add_argument("--limit", type=positive_int, help="the first N words only")
    p.add_argument("--plot", help="save WER by word length to this PNG")
    p.add_argument("--alignments", help="comma-separated words whose attention to plot")
    p.add_argument("--alignment-plot", default="g2p_alignments.png")
    p.add_argument("--ensemble", nargs="+", metavar="RUN", help="more runs decoding as one")
    p.add_argument("--json", help="the scores' file (default: RUN/eval_SPLIT[_ensembleN].json)")
    p.add_argument("--verbose", type=int, default=1, help="0: no progress bar")

    p = command(
        "pronounce",
        "phones of words (arguments, or one per line on stdin)",
        description="One line of space-separated phones per word, in order; a blank "
        "line in gives a blank line out; any case; a word with a character other "
        "than A-Z and ' is an error naming it, before anything is printed.",
    )
    p.add_argument("words", nargs="*", help="words (default: read stdin)")
    p.add_argument("--beam-width", type=beam_width_type, help="beam search (default: greedy)")

    # The library's help says each default itself.
    p = commands.add_parser(
        "export", help="SavedModel and TFLite float32/float16/int8", parents=[run]
    )
    p.add_argument("out", help="output folder: saved_model/ and tflite/ (with g2p.json)")
    add_export_arguments(p)
    return parser


def parse_args(argv):
    args = build_parser().parse_args(argv)
    if args.command == "train" and args.quick:
        args.embedding_dim, args.encoder_units, args.units = 16, 32, 32
        args.encoder_layers, args.epochs, args.batch_size = 1, 12, 32
        args.learning_rate = 5e-3
    return args


def main(argv=None):
    args = parse_args(argv)
    commands = {"train": train, "evaluate": evaluate, "pronounce": pronounce, "export": export_run}
    also = () if args.command == "pronounce" else (ValueError,)  # pronounce says its own
    with file_errors(args.command, also):  # and a full disk, a read-only place: one line
        return commands[args.command](args)


if __name__ == "__main__":  # a failed command ends at once, a closed pipe quietly
    sys.exit(end_command(main, "g2p_cmudict.py", before_exit=(native_log.stop_filter,)))
