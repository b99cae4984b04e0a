"""English to French on Multi30k with attention, top to bottom.

What it shows: a functional-API encoder-decoder built from keras_attention's
layers (a bidirectional GRU encoder, a `BahdanauDecoder` that attends over
it), trained with `model.fit` on the `tf.data` pipeline of
`keras_attention.translation`, decoded greedily and with beam search inside
the graph, scored with sacreBLEU, saved as a run folder and exported as a
SavedModel and a TFLite model.

    python examples/translate_en_fr.py --data-dir ../shared/data/multi30k

Time on a 2-core CPU with the defaults (2,000 training pairs, 2 epochs): two
to three minutes, for a first look, not a translator (BLEU near 0). It prints Keras'
progress bar, then BLEU and chrF on the first --test-sentences of
test_2016_flickr, a few translations, and the exported files. The run folder
(--out-dir) is one that the package's commands read, e.g.
`python -m keras_attention.translation translate --run-dir runs/example "A dog runs."`

The full recipe (presets, a resumable run folder, evaluation on every test
split, ablations, checkpoint averaging) is the package's command line,
`python -m keras_attention.translation {train,status,evaluate,translate,explain,average,export}`.
This script accepts those commands too and hands them over, so
`python examples/translate_en_fr.py --data-dir DIR train --preset tiny` works
as it always has.
"""

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("KERAS_ATTENTION_QUIET_NATIVE_LOG", "1")  # backend/native_log.py
import keras_attention  # noqa: E402, F401, I001 (first: its filter sees TensorFlow start)
# isort: split

import keras  # noqa: E402

from keras_attention import BahdanauAttention  # noqa: E402
from keras_attention import BahdanauDecoder  # noqa: E402
from keras_attention import SmoothedSparseCrossentropy  # noqa: E402
from keras_attention.training.schedules import CosineToBudget  # noqa: E402
from keras_attention.translation import SubwordTokenizer  # noqa: E402
from keras_attention.translation import cli  # noqa: E402
from keras_attention.translation import evaluation  # noqa: E402
from keras_attention.translation import export  # noqa: E402
from keras_attention.translation import load_multi30k  # noqa: E402
from keras_attention.translation import make_dataset  # noqa: E402
from keras_attention.translation import runs  # noqa: E402
from keras_attention.translation.model import MaskedMean  # noqa: E402
from keras_attention.translation.training import filter_long_pairs  # noqa: E402
from keras_attention.translation.translator import Translator  # noqa: E402


def build_model(source_vocab, target_vocab, embedding_dim, units, dropout):
    """(source_ids (B, S), decoder_input_ids (B, T)) → logits (B, T, target_vocab)."""
    source = keras.Input((None,), dtype="int32", name="source_ids")
    decoder_input = keras.Input((None,), dtype="int32", name="decoder_input_ids")
    # Padding (id 0) becomes a mask that reaches the attention by itself.
    x = keras.layers.Embedding(source_vocab, embedding_dim, mask_zero=True)(source)  # (B, S, E)
    x = keras.layers.Dropout(dropout)(x)
    memory = keras.layers.Bidirectional(keras.layers.GRU(units // 2, return_sequences=True))(
        x
    )  # (B, S, units)
    # s_0 from the mean of the memory over the real source tokens.
    s_0 = keras.layers.Dense(units, activation="tanh")(MaskedMean()(memory))  # (B, units)
    y = keras.layers.Embedding(target_vocab, embedding_dim, mask_zero=True)(decoder_input)
    y = keras.layers.Dropout(dropout)(y)  # (B, T, E)
    # The conditional GRU of the published Multi30k systems: attention between two cells.
    decoder = BahdanauDecoder(units, BahdanauAttention(units), conditional=True)
    outputs, _, _ = decoder(y, memory, initial_state=s_0)  # (B, T, units)
    outputs = keras.layers.Dropout(dropout)(outputs)
    logits = keras.layers.Dense(target_vocab)(outputs)  # (B, T, V)
    return keras.Model([source, decoder_input], logits)


def run(args):
    # 1. The data: Multi30k English-French; long training pairs are skipped.
    corpus = load_multi30k(("train", "val", "test_2016_flickr"), args.data_dir)
    train_en, train_fr = filter_long_pairs(corpus["train"].en, corpus["train"].fr)
    train_en, train_fr = train_en[: args.train_pairs], train_fr[: args.train_pairs]
    val = corpus["val"].head(args.train_pairs // 4)
    test = corpus["test_2016_flickr"].head(args.test_sentences)

    # 2. WordPiece vocabularies learned from the training pairs, then tf.data
    #    batches ((source_ids, decoder_input_ids), target_ids), bucketed by length.
    source_tok = SubwordTokenizer.build(train_en, vocab_size=args.vocab_size, lower_case=True)
    target_tok = SubwordTokenizer.build(train_fr, vocab_size=args.vocab_size, lower_case=True)
    train_data = make_dataset(train_en, train_fr, source_tok, target_tok, batch_size=32)
    val_data = make_dataset(val.en, val.fr, source_tok, target_tok, batch_size=32, shuffle=False)

    # 3. The model, trained with model.fit: smoothed cross-entropy that ignores
    #    padding, Adam with clipping, a cosine learning-rate decay.
    keras.utils.set_random_seed(args.seed)
    model = build_model(source_tok.vocab_size, target_tok.vocab_size, 32, 64, dropout=0.1)
    model.compile(
        optimizer=keras.optimizers.Adam(3e-3, global_clipnorm=1.0),
        loss=SmoothedSparseCrossentropy(0.1, ignore_class=0),
        metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
    )
    model.fit(
        train_data,
        validation_data=val_data,
        epochs=args.epochs,
        callbacks=[CosineToBudget(3e-3, args.epochs)],
        shuffle=False,  # the dataset shuffles itself; Keras warns at True
        verbose=1 if sys.stdout.isatty() else 2,
    )

    # 4. Decoding: the Translator reads the encoder, the decoder and the
    #    readout out of the trained model; the search loops run in the graph.
    translator = Translator(model, source_tok, target_tok)
    print(f"test_2016_flickr, first {len(test)} sentences:")
    results = {}
    for method in ("greedy", "beam"):
        results[method], _, hyps = evaluation.decode_and_score(translator, test, method=method)
        print(f"  {method:6} BLEU {results[method]['bleu']}  chrF {results[method]['chrf']}")
    for en, fr in zip(test.en[:3], hyps[:3], strict=True):
        print(f"  {en}\n    → {fr}")

    # 5. A run folder the package's commands read, and its export.
    #    A folder that is not a run of the package is refused, untouched.
    out = Path(args.out_dir)
    config = {"attention": "bahdanau", "train_pairs": len(train_en), "epochs": args.epochs}
    runs.write_run(
        out, model, source_tok, target_tok, config, {"epochs": args.epochs}, overwrite=True
    )
    print(f"run folder: {out}")
    if args.export:
        manifest = export.export_run(out, out / "export", variants=("float32",))
        print(f"SavedModel: {out / 'export' / manifest['saved_model']['path']}")
        print(f"TFLite: {out / 'export' / manifest['tflite']['float32']['path']}")
    return results


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-dir", help="folder with the Multi30k .gz files")
    parser.add_argument("--train-pairs", type=int, default=2000, help="the first N pairs")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--vocab-size", type=int, default=1000, help="per language")
    parser.add_argument("--test-sentences", type=int, default=100)
    parser.add_argument("--out-dir", default="runs/example", help="the run folder")
    parser.add_argument(
        "--export", action=argparse.BooleanOptionalAction, default=True, help="SavedModel, TFLite"
    )
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def _command(argv):
    """The command name of a package command line (`--data-dir DIR train ...`), or None."""
    rest = list(argv)
    while rest and rest[0].startswith("-"):
        rest = rest[2:] if rest[0] == "--data-dir" else rest[1:]
    return rest[0] if rest else None


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if _command(argv) in cli.COMMANDS:
        return cli.main(argv, prog=Path(__file__).name)
    return run(parse_args(argv))


if __name__ == "__main__":
    main()
