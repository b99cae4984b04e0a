"""`Translator`: encoding, one decoder step and in-graph search for a trained model.

It reuses the layers of the training model (found by name), so a model reloaded
from `.keras` translates without rebuilding anything.
"""

import json
from pathlib import Path

import keras
import tensorflow as tf

from keras_attention.decoding import beam_search
from keras_attention.decoding import greedy_search
from keras_attention.translation import model as model_lib
from keras_attention.translation.tied_embedding import TiedEmbedding
from keras_attention.translation.tokenizer import SubwordTokenizer

# What a training run's folder holds, and what loading one needs.
MODEL_FILE = "model.keras"
CONFIG_FILE = "config.json"
SOURCE_VOCAB = "source_vocab"
TARGET_VOCAB = "target_vocab"
RUN_FILES = (MODEL_FILE, CONFIG_FILE, SOURCE_VOCAB, TARGET_VOCAB)


def load_run(run_dir):
    """Loads `(Translator, config)` from a training run's folder.

    Raises:
        FileNotFoundError: naming every missing file, when the folder is
            incomplete (e.g. training never finished an epoch).
    """
    run_dir = Path(run_dir)
    missing = [name for name in RUN_FILES if not (run_dir / name).exists()]
    if missing:
        raise FileNotFoundError(
            f"The run folder {run_dir} is incomplete: missing "
            f"{', '.join(missing)}. A finished `train` command writes "
            f"{', '.join(RUN_FILES)} (the model after the first epoch)."
        )
    config = json.loads((run_dir / CONFIG_FILE).read_text())
    model = keras.saving.load_model(run_dir / MODEL_FILE, compile=False)
    translator = Translator(
        model,
        SubwordTokenizer.load(run_dir / SOURCE_VOCAB),
        SubwordTokenizer.load(run_dir / TARGET_VOCAB),
    )
    return translator, config


class Translator(tf.Module):
    """Greedy and beam-search translation with the layers of a trained model.

    Args:
        model: the model of `build_translator` (trained or reloaded).
        source_tokenizer: `SubwordTokenizer` of the source language.
        target_tokenizer: `SubwordTokenizer` of the target language.

    The step function, `step(tokens, state)`, returns
    `(logits, attention_weights, state)`; `encode(source_ids)` gives its first
    state. `greedy` and `beam` run inside the graph (`tf.function`).
    """

    def __init__(self, model, source_tokenizer, target_tokenizer, name=None):
        super().__init__(name=name)
        self.model = model
        self.source_tokenizer = source_tokenizer
        self.target_tokenizer = target_tokenizer
        self.source_embedding = model.get_layer(model_lib.SOURCE_EMBEDDING)
        self.encoder = model.get_layer(model_lib.ENCODER)
        self.bridge = model.get_layer(model_lib.BRIDGE)
        names = {layer.name for layer in model.layers}
        # decoder_init="mean": s_0 reads the masked mean of the memory.
        self.encoder_mean = (
            model.get_layer(model_lib.ENCODER_MEAN) if model_lib.ENCODER_MEAN in names else None
        )
        self.target_embedding = model.get_layer(model_lib.TARGET_EMBEDDING)
        self.decoder = model.get_layer(model_lib.DECODER)
        # A tied model scores with its target embedding (reverse call; no
        # output layer of its own); the baseline then has a readout to the
        # embedding size before it.
        tied = isinstance(self.target_embedding, TiedEmbedding)
        self.readout = model.get_layer(model_lib.READOUT) if model_lib.READOUT in names else None
        self.output_layer = None if tied else model.get_layer(model_lib.LOGITS)
        self.has_attention = hasattr(self.decoder, "get_decode_state")

    # ------------------------------------------------------------ pieces

    def logits(self, outputs):
        """Decoder outputs (..., d) → logits (..., V), as in the trained model."""
        if self.readout is not None:
            outputs = self.readout(outputs)
        if self.output_layer is None:
            return self.target_embedding(outputs, reverse=True)
        return self.output_layer(outputs)

    def _encode_source(self, source_ids):
        """source_ids (B, S) → memory (B, S, M), s_0 (B, units), mask (B, S)."""
        source_ids = tf.convert_to_tensor(source_ids, tf.int32)
        mask = tf.not_equal(source_ids, 0)  # (B, S)
        embedded = self.source_embedding(source_ids)  # (B, S, E)
        memory, forward, backward = self.encoder(embedded, mask=mask, training=False)
        if self.encoder_mean is not None:
            summary = self.encoder_mean(memory, mask=mask)  # (B, M)
        else:
            summary = tf.concat([forward, backward], axis=-1)  # (B, M)
        return memory, self.bridge(summary), mask

    def encode(self, source_ids):
        """source_ids (B, S) int32 → the first decoder state (a dict)."""
        memory, initial, mask = self._encode_source(source_ids)
        if self.has_attention:
            return self.decoder.get_decode_state(memory, initial, mask)
        # The baseline keeps a memory mask only to report zero attention.
        return {"h": initial, "memory_mask": tf.cast(mask, initial.dtype)}

    def step(self, tokens, state, attention_override=None):
        """tokens (B,) int32, state → logits (B, V), weights (B, S), state."""
        embedded = self.target_embedding(tokens)  # (B, E)
        if self.has_attention:
            output, weights, state = self.decoder.step(
                embedded, state, attention_override=attention_override
            )
        else:
            output, new = self.decoder.cell(embedded, [state["h"]], training=False)
            weights = tf.zeros_like(state["memory_mask"])
            state = dict(state, h=new[0])
        return self.logits(output), weights, state

    def teacher_forced_logits(self, source_ids, decoder_input_ids, attention_override=None):
        """Logits (B, T, V) along given decoder inputs, optionally overriding
        the attention weights ("uniform", "permute" or fixed weights)."""
        memory, initial, mask = self._encode_source(source_ids)
        targets = self.target_embedding(decoder_input_ids)
        target_mask = tf.not_equal(decoder_input_ids, 0)
        if not self.has_attention:
            outputs = self.decoder(targets, initial_state=initial, mask=target_mask, training=False)
            return self.logits(outputs)
        outputs, _, _ = self.decoder(
            targets,
            memory,
            initial_state=initial,
            target_embeddings_mask=target_mask,
            memory_mask=mask,
            attention_override=attention_override,
            training=False,
        )
        return self.logits(outputs)

    # ------------------------------------------------------------ search

    def greedy(self, source_ids, max_length=None, attention_override=None):
        """Greedy decoding; returns the dict of `greedy_search`."""
        source_ids = tf.convert_to_tensor(source_ids, tf.int32)
        state = self.encode(source_ids)
        batch = tf.shape(source_ids)[0]
        start = tf.fill([batch], tf.constant(self.target_tokenizer.start_id, tf.int32))
        return greedy_search(
            lambda t, s: self.step(t, s, attention_override),
            state,
            start,
            self.target_tokenizer.end_id,
            self._max_length(source_ids, max_length),
            tf.shape(source_ids)[1],
        )

    def beam(
        self,
        source_ids,
        beam_width=4,
        length_penalty=0.6,
        coverage_penalty=0.0,
        max_length=None,
    ):
        """Beam search; returns the dict of `beam_search`."""
        source_ids = tf.convert_to_tensor(source_ids, tf.int32)
        state = self.encode(source_ids)
        batch = tf.shape(source_ids)[0]
        start = tf.fill([batch], tf.constant(self.target_tokenizer.start_id, tf.int32))
        return beam_search(
            self.step,
            state,
            start,
            self.target_tokenizer.end_id,
            self._max_length(source_ids, max_length),
            tf.shape(source_ids)[1],
            beam_width=beam_width,
            length_penalty=length_penalty,
            coverage_penalty=coverage_penalty,
            source_mask=tf.not_equal(source_ids, 0),
        )

    @staticmethod
    def _max_length(source_ids, max_length):
        if max_length is not None:
            return max_length
        # French runs a little longer than English; 2·S + 10 never cuts a
        # Multi30k sentence.
        return 2 * tf.shape(source_ids)[1] + 10

    # -------------------------------------------------------------- text

    def tokenize_source(self, sentences):
        """A list of str → (B, S) int32 ids, 0-padded."""
        ragged = self.source_tokenizer.tokenize(tf.constant(list(sentences)))
        return tf.cast(ragged.to_tensor(), tf.int32)

    def detokenize(self, tokens):
        """(B, T) ids → list of str (lowercased, space-split punctuation)."""
        text = self.target_tokenizer.detokenize(tokens)
        return [t.decode("utf-8") for t in text.numpy()]
