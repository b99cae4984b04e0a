"""A finished translator run of a tiny untrained model, written as `train`
writes one: for tests of the commands that read a run (evaluate, average,
translate, export) without training."""

import keras

from keras_attention.training import averaging
from keras_attention.training.run_folder import write_mark
from keras_attention.translation import SubwordTokenizer
from keras_attention.translation import runs
from keras_attention.translation import training
from keras_attention.translation.model import build_translator

VOCAB = ["[PAD]", "[UNK]", "[START]", "[END]", "a", "dog", "runs", "un", "chien", "court", "."]
# The options of a tiny run as `train --preset tiny` records them.
TINY_CONFIG = dict(
    training.PRESETS["tiny"],
    attention="bahdanau",
    seed=0,
    preset="tiny",
    input_feeding=True,
    lr_schedule="cosine",
)


def tiny_model_and_tokenizers():
    """A translator of 8 units over `VOCAB`, seeded, and its two tokenizers."""
    keras.utils.set_random_seed(0)
    source = SubwordTokenizer(VOCAB, lower_case=True)
    target = SubwordTokenizer(VOCAB, lower_case=True)
    model = build_translator(
        source.vocab_size, target.vocab_size, embedding_dim=8, units=8, dropout=0.0, seed=0
    )
    return model, source, target


def write_finished_run(folder, model, source, target):
    """`folder` (created) as a finished run with two saved epochs (`--keep-epochs`)."""
    folder.mkdir()
    source.save(folder / runs.SOURCE_VOCAB)
    target.save(folder / runs.TARGET_VOCAB)
    runs.write_json(folder / runs.CONFIG_FILE, TINY_CONFIG)
    model.save(folder / runs.MODEL_FILE)
    for epoch in (1, 2):
        path = averaging.epoch_weight_path(folder, epoch)
        path.parent.mkdir(exist_ok=True)
        model.save_weights(path)
    runs.write_json(folder / runs.FINISHED_FILE, {"epochs": 2})
    write_mark(folder)
    return folder
