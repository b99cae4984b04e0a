"""`Translator`: encoding, one decoder step and in-graph search for a trained model.

It reuses the layers of the training model (read from its graph by
`Seq2SeqGenerator.from_model`), so a model reloaded from `.keras` translates
without rebuilding anything.
"""

import importlib
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from keras_attention.attention.wait_k_attention import check_k
from keras_attention.decoders.base_decoder import BaseDecoder
from keras_attention.files.model_file import ModelFileError
from keras_attention.files.model_file import load_model
from keras_attention.generation.search_defaults import BeamSettings
from keras_attention.generation.search_defaults import check_beam_width
from keras_attention.generation.seq2seq_generator import Seq2SeqGenerator
from keras_attention.generation.simultaneous_generator import SimultaneousGenerator
from keras_attention.translation import runs
from keras_attention.translation.runs import MODEL_FILE
from keras_attention.translation.runs import SOURCE_VOCAB
from keras_attention.translation.runs import TARGET_VOCAB
from keras_attention.translation.tokenizer import END_ID
from keras_attention.translation.tokenizer import START_ID
from keras_attention.translation.tokenizer import SubwordTokenizer


def load_run(run_dir):
    """Loads `(Translator, config)` from a training run's folder.

    An unfinished run loads too: `model.keras` holds its best epoch so far.

    Raises:
        NotADirectoryError: `run_dir` is a file.
        FileNotFoundError: naming every missing file, when the folder is
            incomplete (e.g. training never finished an epoch).
        keras_attention.translation.runs.CorruptRunError: a file is damaged
            (e.g. a truncated `model.keras`), `model.keras` cannot be loaded
            (a `Lambda` layer, an unregistered class), `config.json` lacks a key the
            commands read, or a weight of the model is not finite (NaN or
            infinite: it would translate everything to empty lines); the
            message names the file and what is wrong.
    """
    # The run folder's layout and checks are in `runs`; importing the module
    # that builds the model registers its layers (TiedEmbedding, ...) with Keras.
    importlib.import_module("keras_attention.translation.model")

    run_dir = Path(run_dir)
    config = runs.check_run(run_dir)
    try:
        model = load_model(run_dir / MODEL_FILE, compile=False)
    except ModelFileError as error:  # a Lambda layer, an unknown class: one line
        raise runs.CorruptRunError(str(error)) from None
    damaged = [
        w.path for w in model.weights if not np.all(np.isfinite(keras.ops.convert_to_numpy(w)))
    ]
    if damaged:
        raise runs.CorruptRunError(
            f"{run_dir / MODEL_FILE} is corrupt: the weight{'s' if len(damaged) > 1 else ''} "
            f"{', '.join(damaged[:3])}{' ...' if len(damaged) > 3 else ''} hold NaN or "
            "infinite values (a training that diverged?)."
        )
    translator = Translator(
        model,
        SubwordTokenizer.load(run_dir / SOURCE_VOCAB),
        SubwordTokenizer.load(run_dir / TARGET_VOCAB),
    )
    translator.policy = config.get("policy")
    if translator.policy == "milk":
        # Trained in the soft "parallel" mode; decoded with hard decisions,
        # before any search is traced (a traced search keeps its mode).
        translator.generator.decoder.attention.mode = "hard"
    return translator, config


class Translator(tf.Module):
    """Greedy and beam-search translation with a trained model and its tokenizers.

    Args:
        model: the model of `build_translator` (trained or reloaded), or any
            functional model `Seq2SeqGenerator.from_model` reads.
        source_tokenizer: `SubwordTokenizer` of the source language.
        target_tokenizer: `SubwordTokenizer` of the target language.

    The search, the step and the encoder are those of a `Seq2SeqGenerator`
    derived from the model's graph (`self.generator`); this class adds the
    text. `step(tokens, state)` returns `(logits, attention_weights, state)`;
    `encode(source_ids)` gives its first state. `greedy_graph` and `beam_graph`
    are traced code, for a `tf.function` or an export, and take and return
    what `Seq2SeqGenerator.greedy_graph` and `.beam_graph` do (tensors; the
    generator's `greedy` and `beam` take arrays and return NumPy).

    Source ids are checked before they are cast to int32 (`source_ids`):
    ids outside [0, source vocabulary) (2**32 + 5 is not 5) and float ids
    are refused. `beam_graph` refuses a beam wider than `MAX_BEAM_WIDTH` (64) or
    the target vocabulary.
    """

    def __init__(self, model, source_tokenizer, target_tokenizer, name=None):
        super().__init__(name=name)
        self.model = model
        self.source_tokenizer = source_tokenizer
        self.target_tokenizer = target_tokenizer
        self.generator = Seq2SeqGenerator.from_model(model, start_id=START_ID, end_id=END_ID)
        self.has_attention = isinstance(self.generator.decoder, BaseDecoder)
        # The read/write policy of a simultaneous run (`load_run` sets it from
        # config.json): None, "consecutive", "wait-k" or "milk".
        self.policy = None

    # ------------------------------------------------------- simultaneous

    @property
    def wait_k(self):
        """The k a wait-k run decodes with (`WaitKAttention.k`); None for
        another policy. Set it before tracing a search: a traced search keeps
        the k it was traced with."""
        if self.policy != "wait-k":
            return None
        return self.generator.decoder.attention.k

    @wait_k.setter
    def wait_k(self, k):
        if self.policy != "wait-k":
            raise ValueError(
                f"Invalid value for argument `wait_k`: the run's policy is {self.policy!r}; "
                "only a wait-k run has a k to set."
            )
        check_k("wait_k", k)
        self.generator.decoder.attention.k = int(k)

    def simultaneous_generator(self, max_source_length=None):
        """A `SimultaneousGenerator` over the model: greedy decoding while the
        source arrives, with its read/write trace (it refuses the offline
        model's bidirectional encoder and bridge)."""
        return SimultaneousGenerator(self.generator, max_source_length)

    # ------------------------------------------------------------ pieces

    def _source_vocabulary_size(self):
        """The source tokenizer's vocabulary, or without one the model's own."""
        if self.source_tokenizer is not None:
            return self.source_tokenizer.vocab_size
        return self.generator.source_vocabulary_size

    def source_ids(self, source_ids, name="source_ids"):
        """`source_ids` as an int32 tensor, checked before the cast.

        A NumPy array, a list or an eager tensor must hold integers in
        [0, source vocabulary): an int64 id of 2**32 + 5 would become 5, a
        float id 1.7 would become 1. A symbolic tensor (inside a
        `tf.function`, a SavedModel) must have an integer dtype; its values
        are checked in the graph, int32 ones too (`InvalidArgumentError`
        naming `name` and the range).

        Raises:
            ValueError: float or other non-integer ids, or an id outside the
                vocabulary (its value and position are named).
        """
        if isinstance(source_ids, tf.Tensor) and not tf.executing_eagerly():
            if not source_ids.dtype.is_integer:
                raise ValueError(
                    f"Invalid dtype for `{name}`: token ids must be integers. "
                    f"Received: {source_ids.dtype.name}"
                )
            vocabulary = self._source_vocabulary_size()
            bound = f"Ids must be in [0, {vocabulary or 'vocabulary'}), the source vocabulary"
            checks = [
                tf.debugging.assert_non_negative(
                    source_ids, message=f"Invalid token id in `{name}`: negative id. {bound}"
                )
            ]
            if vocabulary is not None:
                checks.append(
                    tf.debugging.assert_less(
                        source_ids,
                        tf.cast(vocabulary, source_ids.dtype),
                        message=f"Invalid token id in `{name}`: id at or past the source "
                        f"vocabulary. {bound}",
                    )
                )
            with tf.control_dependencies(checks):
                # tf.cast of int32 to int32 is the tensor itself, without the checks.
                return tf.identity(tf.cast(source_ids, tf.int32))
        values = np.asarray(source_ids)
        if values.dtype.kind not in "iu":
            raise ValueError(
                f"Invalid dtype for `{name}`: token ids must be integers; casting "
                f"{values.dtype} ids would change them silently. Received: {values.dtype}"
            )
        size = self._source_vocabulary_size()
        bad = (values < 0) | (values >= size)
        if bad.any():
            position = tuple(int(i) for i in np.argwhere(bad)[0])
            raise ValueError(
                f"Invalid token id in `{name}`: {int(values[position])} at {list(position)}. "
                f"Ids must be in [0, {size}), the source vocabulary."
            )
        return tf.convert_to_tensor(values.astype(np.int32))

    def encode(self, source_ids):
        """source_ids (B, S) int32 → the first decoder state (a dict)."""
        state, _ = self.generator.encode(self.source_ids(source_ids))
        return state

    def step(self, tokens, state):
        """tokens (B,) int32, state → logits (B, V), weights (B, S), state."""
        return self.generator.step(tokens, state)

    def teacher_forced_logits(self, source_ids, decoder_input_ids):
        """Logits (B, T, V) along given decoder inputs."""
        return self.generator.teacher_forced_logits(
            self.source_ids(source_ids),
            tf.convert_to_tensor(decoder_input_ids, tf.int32),
        )

    def with_decoder(self, decoder):
        """A translator that decodes with `decoder` in place of the model's.

        Everything else (the model's encoder, embeddings and readout, the
        tokenizers) is this one's, which is unchanged; see
        `Seq2SeqGenerator.with_decoder`.
        """
        translator = Translator(self.model, self.source_tokenizer, self.target_tokenizer)
        translator.generator = self.generator.with_decoder(decoder)
        translator.policy = self.policy
        return translator

    # ------------------------------------------------------------ search

    def greedy_graph(self, source_ids, max_length=None):
        """Greedy search as traced code, as `Seq2SeqGenerator.greedy_graph`.

        Args:
            source_ids: (B, S) token ids, checked by `source_ids`.
            max_length: as in `Seq2SeqGenerator.greedy`.

        Returns:
            The dict of tensors of `search.greedy_search`.
        """
        return self.generator.greedy_graph(self.source_ids(source_ids), max_length=max_length)

    def check_beam_width(self, beam_width):
        """`beam_width` as an int; `ValueError` unless in [1, bound], the bound
        `MAX_BEAM_WIDTH` or the target vocabulary, whichever is smaller."""
        return check_beam_width(beam_width, self.target_tokenizer.vocab_size)

    def beam_graph(self, source_ids, settings=None, max_length=None):
        """Beam search as traced code, as `Seq2SeqGenerator.beam_graph`.

        Args:
            source_ids: (B, S) token ids, checked by `source_ids`.
            settings: a `search_defaults.BeamSettings` (width and penalties);
                None for the defaults.
            max_length: as in `Seq2SeqGenerator.beam`.

        Returns:
            The dict of tensors of `search.beam_search`.

        Raises:
            ValueError: the beam width is not in [1, bound] (`check_beam_width`).
        """
        settings = settings or BeamSettings()
        self.check_beam_width(settings.beam_width)
        return self.generator.beam_graph(self.source_ids(source_ids), settings, max_length)

    # -------------------------------------------------------------- text

    @property
    def max_source_length(self):
        """The most source tokens (WordPiece pieces) one sentence may have,
        the generator's bound: `python -m keras_attention.translation translate` refuses a longer
        sentence, the SavedModel and TFLite exports truncate it. `greedy_graph`
        and `beam_graph` are traced code and do not check: use `source_lengths`."""
        return self.generator.max_source_length

    def tokenize_source(self, sentences):
        """A list of str → (B, S) int32 ids, 0-padded; (0, 0) for no sentence.

        An empty or blank sentence gives a row of padding only (its
        translation is empty).
        """
        ragged = self.source_tokenizer.tokenize(tf.constant(list(sentences), dtype=tf.string))
        return tf.cast(ragged.to_tensor(), tf.int32)

    def source_lengths(self, sentences):
        """A list of str → (B,) int numpy array, the source tokens of each:
        compare with `max_source_length` before decoding."""
        ragged = self.source_tokenizer.tokenize(tf.constant(list(sentences), dtype=tf.string))
        return ragged.row_lengths().numpy()

    def detokenize(self, tokens):
        """(B, T) ids → list of str (lowercased, space-split punctuation)."""
        text = self.target_tokenizer.detokenize(tokens)
        return [t.decode("utf-8") for t in text.numpy()]
