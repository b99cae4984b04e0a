"""A builtin-only TFLite model of a `SimultaneousGenerator`: the streaming loop
on the device.

The app holds the stream's state, a dict of tensors of static shapes (batch 1,
W = the generator's `max_source_length` source positions), and passes it
through three signatures; the model holds no variable and no state of its own:

- `start()` → the state of an empty stream;
- `read(token (1,) int32, **state)` → `accepted` (1,) bool and the entries
  the read changed: the token appended, the tokens read encoded again (the
  encoder runs over the n tokens read only: n steps, bounded by W), the
  memory, processed keys and mask padded to W;
- `write(source_ended (1,) bool, **state)` → `token` (1,) int32, `weights`
  (1, W) float32, `log_prob` (1,) float32 and the entries the write changed:
  the decoder's step over the tokens read, and the policy's answer
  (`needs_unread_source` of the attention layer), both in the graph.

The app merges each call's outputs into its state (`state.update(outputs)`,
minus `accepted`, `token`, `weights`, `log_prob`): an entry a call leaves as it
was is not among its outputs.

What the app sees, for every input (a TFLite model cannot raise):

- `token` is a written id (END included), or -1: nothing written. -1 with
  `done` False: the policy reads first (or nothing was read yet); -1 with
  `done` True: the output is done, and nothing changes any more.
- `done` (a state entry, (1,) bool) turns True when END is written; when
  `max_length` tokens are written; with no `max_length`, once the source has
  ended and the output holds greedy's bound for the n tokens read,
  min(2·n + 10, cap) (`cap` the generator's `max_output_length`); or when a
  write finds the source ended with nothing read (nothing to translate: the
  Keras stream raises there). Before the source ends, a stream without
  `max_length` that holds min(2·n + 10, cap) tokens answers -1 (read
  first): a policy that never reads stays bounded, as in the Keras stream.
- `accepted` is False, and the state unchanged, for a token outside
  [1, source vocabulary) (0 is padding) or a read when W tokens are held
  (`read_count` (1,) int32 in the state says how many): the app ends the
  source there (the Keras stream raises a `ValueError` for each).

With the same state and inputs the signatures do what
`SimultaneousStream.read` and `write` do: the same tokens, weights and
read/write trace (`keras_attention.runtime.streaming.SimultaneousLite` drives
them from Python).
"""

from pathlib import Path

import keras
import tensorflow as tf

from keras_attention.backend.precision import float32_generator
from keras_attention.export.backend import ExportModule
from keras_attention.export.backend import check_tensorflow_backend
from keras_attention.export.tflite import check_captured_variables
from keras_attention.export.tflite import check_float32
from keras_attention.export.tflite import check_quantization
from keras_attention.export.tflite import tflite_model_path
from keras_attention.export.tflite import write_tflite
from keras_attention.files.atomic import write_json
from keras_attention.generation.simultaneous_generator import SimultaneousGenerator

# The entries of the decode state that the source gives (as the Keras stream's).
MEMORY_KEYS = ("memory", "processed_keys", "memory_mask")
# The stream's own entries, beside the decode state's: the tokens read (1, W),
# their count, the last token written (START before the first), the count of
# tokens written, whether a write has found a source (the decoder's carried
# state then stays as it was), and whether the output is done.
STREAM_KEYS = ("source", "read_count", "last_token", "written", "started", "done")
# The token of a write that writes nothing: never an id.
NO_TOKEN = -1
_FORMAT_VERSION = 1


class LiteSimultaneous(ExportModule):
    """The concrete functions `start`, `read` and `write` of a
    `SimultaneousGenerator`, every weight frozen to a constant (as
    `LiteGenerator` does: `keras.StatelessScope`).

    Args:
        simultaneous_generator: a `SimultaneousGenerator`; its
            `max_source_length` is the stream's width W.
        max_length: the most tokens written, END included; None for the
            Keras stream's default (min(2·n + 10, cap) once the source has
            ended, n the tokens read).
    """

    def __init__(self, simultaneous_generator, max_length=None):
        super().__init__("TFLite export", name="lite_simultaneous")
        if not isinstance(simultaneous_generator, SimultaneousGenerator):
            raise ValueError(
                "Invalid value for argument `simultaneous_generator`. Expected a "
                "SimultaneousGenerator (keras_attention.generation). Received: "
                f"simultaneous_generator={simultaneous_generator!r}"
            )
        generator = float32_generator(simultaneous_generator.generator)
        self.generator = generator
        self.attention = generator.decoder.attention
        self.width = simultaneous_generator.max_source_length
        self.max_length = generator.check_max_length(max_length)
        self.vocabulary_size = generator.source_vocabulary_size
        frozen = [(v, tf.constant(v.numpy())) for v in generator.variables()]
        with keras.StatelessScope(state_mapping=frozen):
            self._trace()
        check_captured_variables(self.concrete_functions(), [], generator)
        check_float32(self.concrete_functions())

    def concrete_functions(self):
        """The functions to convert, one signature each."""
        return [self.start, self.read, self.write]

    # ------------------------------------------------------------- tracing

    def _trace(self):
        width = self.width
        source_spec = tf.TensorSpec([1, width], tf.int32, name="source")
        fresh = tf.function(
            self._fresh_state, input_signature=[source_spec, tf.TensorSpec([], tf.int32)]
        )
        fresh_specs = fresh.get_concrete_function().structured_outputs
        self.decode_names = sorted(fresh_specs)
        self.carried_names = [k for k in self.decode_names if k not in MEMORY_KEYS]
        specs = {k: tf.TensorSpec(v.shape, v.dtype, name=k) for k, v in fresh_specs.items()}
        specs["source"] = source_spec
        specs["read_count"] = tf.TensorSpec([1], tf.int32, name="read_count")
        specs["last_token"] = tf.TensorSpec([1], tf.int32, name="last_token")
        specs["written"] = tf.TensorSpec([1], tf.int32, name="written")
        specs["started"] = tf.TensorSpec([1], tf.bool, name="started")
        specs["done"] = tf.TensorSpec([1], tf.bool, name="done")
        self.state_names = sorted(specs)
        self.state_specs = specs
        state_specs = [specs[k] for k in self.state_names]
        self.start = _traced(self._start_fn(), "start", [])
        token = tf.TensorSpec([1], tf.int32, name="token")
        self.read = _traced(self._read_fn(), "read", [token, *state_specs])
        ended = tf.TensorSpec([1], tf.bool, name="source_ended")
        self.write = _traced(self._write_fn(), "write", [ended, *state_specs])

    def _fresh_state(self, source, count):
        """The decode state of the first `count` (>= 1) tokens of `source`
        (1, W): the encoder over them alone, its memory and mask padded to W
        positions, then the decoder's `get_decode_state`, as
        `SimultaneousStream` builds it."""
        width = self.width
        memory, initial_state, mask = self.generator.encoder(source[:, :count])  # (1, n, d)
        if mask is None:
            mask = tf.ones(tf.shape(memory)[:2], tf.bool)
        padding = width - tf.shape(memory)[1]
        memory = tf.pad(memory, [[0, 0], [0, padding], [0, 0]])
        memory = tf.reshape(memory, [1, width, memory.shape[-1]])  # (1, W, d)
        # TensorFlow 2.16's converter has no builtin PAD of booleans.
        mask = tf.pad(tf.cast(mask, tf.int32), [[0, 0], [0, padding]])
        mask = tf.reshape(tf.cast(mask, tf.bool), [1, width])  # (1, W)
        return dict(self.generator.decoder.get_decode_state(memory, initial_state, mask))

    def _start_fn(self):
        specs = None

        def start():
            state = {k: tf.zeros(s.shape, s.dtype) for k, s in specs.items()}
            state["last_token"] = tf.fill([1], tf.constant(self.generator.start_id, tf.int32))
            return state

        specs = self.state_specs
        return start

    def _read_fn(self):
        names = self.state_names
        width = self.width
        vocabulary = self.vocabulary_size

        def read(token, *values):
            state = dict(zip(names, values, strict=True))
            count = state["read_count"]  # (1,)
            ok = tf.logical_and(tf.greater(token, 0), tf.less(count, width))  # (1,)
            if vocabulary is not None:
                ok = tf.logical_and(ok, tf.less(token, vocabulary))
            positions = tf.range(width, dtype=tf.int32)[tf.newaxis]  # (1, W)
            here = tf.logical_and(tf.equal(positions, count[:, tf.newaxis]), ok[:, tf.newaxis])
            source = tf.where(here, token[:, tf.newaxis], state["source"])  # (1, W)
            new_count = count + tf.cast(ok, tf.int32)
            # A refused read at an empty stream still encodes one position
            # (an encoder cannot run over none); the result is not kept.
            fresh = self._fresh_state(source, tf.maximum(new_count[0], 1))
            out = {"accepted": ok, "source": source, "read_count": new_count}
            for key in MEMORY_KEYS:
                out[key] = _select(ok, fresh[key], state[key])
            # The carried state starts from the encoding the first write
            # found, as the Keras stream's does.
            renew = tf.logical_and(ok, tf.logical_not(state["started"]))
            for key in self.carried_names:
                out[key] = _select(renew, fresh[key], state[key])
            return out

        return read

    def _write_fn(self):
        names = self.state_names
        generator = self.generator
        attention = self.attention
        max_length = self.max_length
        cap = generator.max_output_length

        def write(source_ended, *values):
            state = dict(zip(names, values, strict=True))
            count, done = state["read_count"], state["done"]  # (1,), (1,)
            decode = {k: state[k] for k in self.decode_names}
            logits, weights, stepped = generator.step(state["last_token"], decode)
            log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)  # (1, V)
            token = tf.argmax(log_probs, axis=-1, output_type=tf.int32)  # (1,)
            attention_state = {
                key: stepped[f"attention_{key}"] for key in attention.attention_state_keys
            }
            wanted = tf.reshape(attention.needs_unread_source(attention_state, count), [1])
            if max_length is None:
                bound = tf.minimum(2 * count + 10, cap)  # greedy's, for the tokens read
            else:
                bound = tf.fill([1], tf.constant(max_length, tf.int32))
            read_any = tf.greater(count, 0)
            full = tf.greater_equal(state["written"], bound)
            # Before the source ends, a stream that holds greedy's bound for
            # the tokens read reads first; once it has ended, such a stream
            # is done (the Keras stream's `end_source`).
            capped = tf.logical_and(tf.logical_not(source_ended), full)
            if max_length is not None:
                capped = tf.zeros_like(capped)
            closed = tf.logical_and(tf.logical_and(source_ended, read_any), full)
            idle = tf.logical_or(tf.logical_or(done, capped), closed)
            active = tf.logical_and(tf.logical_not(idle), read_any)  # (1,)
            writes = tf.logical_and(active, tf.logical_or(source_ended, tf.logical_not(wanted)))
            written = state["written"] + tf.cast(writes, tf.int32)
            bounded = source_ended if max_length is None else tf.ones_like(source_ended)
            finished = tf.logical_or(
                tf.equal(token, generator.end_id),
                tf.logical_and(bounded, tf.greater_equal(written, bound)),
            )
            empty = tf.logical_and(source_ended, tf.logical_not(read_any))
            ended = tf.logical_or(tf.logical_and(writes, finished), tf.logical_or(empty, closed))
            out = {
                "token": tf.where(writes, token, NO_TOKEN),
                "weights": _select(writes, tf.cast(weights, tf.float32), 0.0),  # (1, W)
                "log_prob": tf.where(
                    writes, tf.gather(log_probs, token, axis=1, batch_dims=1), 0.0
                ),
                "last_token": tf.where(writes, token, state["last_token"]),
                "written": written,
                "started": tf.logical_or(state["started"], active),
                "done": tf.logical_or(done, ended),
            }
            for key in self.carried_names:
                out[key] = _select(writes, tf.cast(stepped[key], state[key].dtype), state[key])
            return out

        return write

    # ------------------------------------------------------------ manifest

    def manifest(self):
        """What an app needs around the model: ids, the width, the signatures."""
        g = self.generator
        read_outputs = ["accepted", "source", "read_count", *MEMORY_KEYS, *self.carried_names]
        write_outputs = ["token", "weights", "log_prob", "last_token", "written", "started"]
        write_outputs += ["done", *self.carried_names]
        return {
            "format_version": _FORMAT_VERSION,
            "kind": "simultaneous",
            "policy": type(self.attention).__name__,
            "pad_id": 0,
            "start_id": g.start_id,
            "end_id": g.end_id,
            "no_token": NO_TOKEN,
            "width": self.width,
            "max_output_length": g.max_output_length,
            "max_length": self.max_length,
            "source_vocabulary_size": self.vocabulary_size,
            "target_vocabulary_size": g.target_vocabulary_size,
            "signatures": {
                "start": {"inputs": [], "outputs": list(self.state_names)},
                "read": {"inputs": ["token", *self.state_names], "outputs": read_outputs},
                "write": {"inputs": ["source_ended", *self.state_names], "outputs": write_outputs},
            },
            "state": {
                name: {
                    "shape": self.state_specs[name].shape.as_list(),
                    "dtype": self.state_specs[name].dtype.name,
                }
                for name in self.state_names
            },
            "rules": {
                "state": "merge each call's outputs into the state; the others stay",
                "token": f"{NO_TOKEN}: nothing written (read first, or done)",
                "accepted": (
                    "False for a token outside [1, source_vocabulary_size) or a read "
                    "when `width` tokens are held; the state is unchanged"
                ),
                "done": (
                    "END written; max_length written; with no max_length, the source "
                    "ended and min(2 * read_count + 10, max_output_length) written; or "
                    "the source ended empty. A write after it writes nothing"
                ),
                "bound": (
                    "with no max_length, before the source ends, a stream holding "
                    "min(2 * read_count + 10, max_output_length) tokens answers no_token"
                ),
            },
        }


def _traced(fn, name, specs):
    """The concrete function of `fn`, named `name` (the converter names each
    signature after its function)."""
    fn.__name__ = name
    return tf.function(fn, input_signature=specs, autograph=False).get_concrete_function()


def _select(condition, yes, no):
    """`where(condition, yes, no)`, the (1,) condition reshaped to the rank of
    `yes` (1, ...), so that no shape broadcasts by accident."""
    yes = tf.convert_to_tensor(yes)
    condition = tf.reshape(condition, [1] * yes.shape.rank)
    return tf.where(condition, yes, tf.cast(no, yes.dtype))


def export_simultaneous_tflite(
    simultaneous_generator, path, max_length=None, quantization="float32"
):
    """Writes a builtin-only TFLite model of a simultaneous decoder, and its manifest.

    The signatures `start`, `read` and `write` are those of this module's
    docstring: the app carries the stream's state, tensors of static shapes,
    from call to call. `path` with the suffix `.json` receives the manifest
    (ids, the width W, the state's names, shapes and dtypes, the answers to
    bad input). Each file is written whole or not at all.

    Args:
        simultaneous_generator: a `SimultaneousGenerator`.
        path: the `.tflite` file to write.
        max_length: the most tokens written, END included; None for
            min(2·n + 10, max_output_length) once the source has ended.
        quantization: one of `keras_attention.export.VARIANTS`.

    Returns:
        The manifest dict.

    Raises:
        BackendError: Keras does not run on TensorFlow.
        ValueError: a bad argument, or a converted model that still holds a
            Flex, custom or variable operator (named).
    """
    check_tensorflow_backend("TFLite export")
    quantization = check_quantization(quantization)
    path = tflite_model_path(path)
    lite = LiteSimultaneous(simultaneous_generator, max_length=max_length)
    write_tflite(lite, path, quantization)
    manifest = lite.manifest()
    manifest["quantization"] = quantization
    manifest["model_file"] = Path(path).name
    write_json(Path(path).with_suffix(".json"), manifest)
    return manifest
