"""One output bound in Keras and on the device: each source's own default.

A model that never emits END runs every search to its bound. The generator's
default bound for a source in a padded batch is min(2·S + 10, cap) with S the
source's positions up to the last that is not padding, the bound the exported
model gives the same source alone (and padded to a static length).
"""

import keras
import numpy as np
import pytest

from keras_attention import BahdanauDecoder
from keras_attention import LuongAttention
from keras_attention import Seq2SeqGenerator
from keras_attention.generation.search_defaults import source_lengths

VOCAB, END = 7, 2
# Sources of 5, 3 (a padding id inside) and 1 tokens, padded to 6: (3, 6).
SOURCE = np.array(
    [[3, 4, 5, 6, 3, 0], [6, 0, 4, 0, 0, 0], [5, 0, 0, 0, 0, 0]],
    dtype="int32",
)
REAL = [5, 3, 1]  # up to the last non-padding position


def never_ending_generator():
    keras.utils.set_random_seed(0)
    source = keras.Input((None,), dtype="int32", name="source")
    target_in = keras.Input((None,), dtype="int32", name="target_in")
    memory = keras.layers.Embedding(VOCAB, 4, mask_zero=True)(source)
    memory = keras.layers.GRU(4, return_sequences=True)(memory)
    embedded = keras.layers.Embedding(VOCAB, 4, mask_zero=True)(target_in)
    outputs, _, _ = BahdanauDecoder(4, LuongAttention("general"))(embedded, memory)
    readout = keras.layers.Dense(VOCAB)
    model = keras.Model([source, target_in], readout(outputs))
    bias = np.zeros((VOCAB,), "float32")
    bias[[0, END]] = -30.0  # neither padding nor END is ever predicted
    readout.bias.assign(bias)
    return Seq2SeqGenerator.from_model(model, start_id=1, end_id=END)


def test_source_lengths_count_up_to_the_last_real_position():
    np.testing.assert_array_equal(np.asarray(source_lengths(keras.ops.array(SOURCE))), REAL)
    frames = np.zeros((2, 4, 3), "float32")
    frames[0, :2] = 1.0
    frames[1, 2, 1] = -1.0
    np.testing.assert_array_equal(np.asarray(source_lengths(keras.ops.array(frames))), [2, 3])


@pytest.mark.parametrize("search", ("greedy", "beam"))
def test_sources_of_no_positions_have_length_zero_and_an_empty_output(search):
    # (2, 0): a batch of empty sources. A max over no positions failed on JAX
    # and PyTorch ("max of an empty tensor") before any search began.
    empty = np.zeros((2, 0), "int32")
    np.testing.assert_array_equal(np.asarray(source_lengths(keras.ops.array(empty))), [0, 0])
    generator = never_ending_generator()
    run = generator.greedy if search == "greedy" else generator.beam
    np.testing.assert_array_equal(np.asarray(run(empty)["lengths"]), [0, 0])
    # A row of padding only, beside a real one, is empty too.
    padded = np.array([[0, 0, 0], [3, 0, 0]], "int32")
    np.testing.assert_array_equal(np.asarray(run(padded)["lengths"]), [0, 2 * 1 + 10])


@pytest.mark.parametrize("search", ("greedy", "beam"))
def test_each_source_of_a_padded_batch_gets_its_own_default_bound(search):
    generator = never_ending_generator()
    run = generator.greedy if search == "greedy" else generator.beam
    batch = run(SOURCE)
    expected = [2 * n + 10 for n in REAL]  # min(2·S + 10, cap), far below the cap
    np.testing.assert_array_equal(batch["lengths"], expected)
    assert batch["tokens"].shape == (3, 2 * SOURCE.shape[1] + 10)  # the padded width's
    for row, n in enumerate(expected):
        real_tokens = batch["tokens"][row, :n]
        assert np.all((real_tokens != 0) & (real_tokens != END)) and np.all(
            batch["tokens"][row, n:] == 0
        )
        alone = run(SOURCE[row : row + 1, : REAL[row]])
        np.testing.assert_array_equal(batch["tokens"][row, :n], alone["tokens"][0])
    # A given max_length still bounds every source alike.
    np.testing.assert_array_equal(run(SOURCE, max_length=7)["lengths"], [7, 7, 7])


@pytest.mark.tensorflow
@pytest.mark.parametrize("static", (False, True))
def test_keras_lengths_equal_the_tflite_lengths_for_a_padded_batch(static, tmp_path):
    from ai_edge_litert.interpreter import Interpreter

    from keras_attention.export import export_tflite

    generator = never_ending_generator()
    path = tmp_path / "never_ending.tflite"
    options = {"source_length": SOURCE.shape[1]} if static else {}
    export_tflite(generator, path, beam_width=2, **options)
    interpreter = Interpreter(model_path=str(path))
    keras_greedy = generator.greedy(SOURCE)
    keras_beam = generator.beam(SOURCE, beam_width=2)
    for signature, result in (("generate", keras_greedy), ("generate_beam", keras_beam)):
        runner = interpreter.get_signature_runner(signature)
        for row in range(len(SOURCE)):
            # The app feeds the real tokens, or the padded row to a static model.
            one = SOURCE[row : row + 1] if static else SOURCE[row : row + 1, : REAL[row]]
            lite = runner(source=one)
            assert int(lite["lengths"][0]) == int(result["lengths"][row]), (signature, row)
            n = int(lite["lengths"][0])
            np.testing.assert_array_equal(lite["tokens"][0, :n], result["tokens"][row, :n])
