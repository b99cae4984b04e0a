"""Reading the three pieces of a functional teacher-forced model around its decoder.

    source ─► encoder ─► memory, s_0, memory mask ─┐
    token  ─► target embedding ─► y_{t-1} ─────────┴► decoder.step ─► readout ─► logits

`ModelGraph(model)` finds them and rebuilds each as a Keras model made of the
model's own layers (so the weights are shared). It reads the model through
public Keras API only: the functional graph that `model.get_config()`
describes (each layer's name and the arguments of each of its calls, tensors
named by `[layer name, call index, output index]`), `model.get_layer(name)`
for the layer objects, and layer calls on new `keras.Input`s to rebuild a
piece. Operations that are not layers (`ops.not_equal(source, 0)`, `x[:, -1]`)
hold no weights and are rebuilt from their config.
"""

import dataclasses
import inspect
import numbers
import warnings

import keras
import numpy as np
from keras import ops

from keras_attention.attention.base_attention import BaseAttention
from keras_attention.attention.masked_softmax import MaskedSoftmax
from keras_attention.decoders.base_decoder import BaseDecoder


@keras.saving.register_keras_serializable(package="keras_attention")
class _KerasMaskOf(keras.layers.Layer):
    """Returns the Keras mask that rides on its input as a bool tensor.

    inputs (B, T, ...) with mask (B, T) → the mask; all True without one. Added
    to a model's graph by `from_model` so that a derived encoder returns the
    memory mask that the decoder received in the model.
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def call(self, inputs, mask=None):
        if mask is None:
            return ops.ones(ops.shape(inputs)[:2], dtype="bool")
        return ops.cast(mask, "bool")

    def compute_output_spec(self, inputs, mask=None):
        return keras.KerasTensor(inputs.shape[:2], dtype="bool")

    def compute_mask(self, inputs, mask=None):
        return None


@keras.saving.register_keras_serializable(package="keras_attention")
class _SourcePositions(keras.layers.Layer):
    """The real positions of a source without a Keras mask: ids ≠ 0 for
    token ids, every position for features. (B, S[, F]) → bool (B, S)."""

    def call(self, inputs):
        if len(inputs.shape) == 2:
            return ops.not_equal(inputs, 0)
        return ops.ones(ops.shape(inputs)[:2], dtype="bool")

    def compute_output_spec(self, inputs):
        return keras.KerasTensor(inputs.shape[:2], dtype="bool")


HOW = (
    " Build the generator with `Seq2SeqGenerator(encoder, target_embedding, "
    "decoder, readout, start_id, end_id)` instead (see its docstring)."
)


@dataclasses.dataclass(frozen=True)
class Ref:
    """A tensor of the graph: output `index` of call `node` of layer `layer`."""

    layer: str
    node: int
    index: int

    @property
    def call(self):
        return (self.layer, self.node)


class FunctionalGraph:
    """The graph of a functional model as `model.get_config()` describes it.

    Calls are `(layer name, call index)`; their arguments are the config's
    with every tensor replaced by a `Ref`. `rebuild` calls the model's own
    layers again on new inputs.

    Raises:
        ValueError: when the model's config does not describe a functional
            graph (a subclassed model, or one whose config cannot be written).
    """

    def __init__(self, model):
        name = getattr(model, "name", None)
        try:
            config = model.get_config() if isinstance(model, keras.Model) else None
        except Exception as error:  # a layer without get_config, for one
            raise ValueError(
                "Invalid value for argument `model`. Expected a functional keras.Model "
                f"whose graph `get_config()` describes; {type(model).__name__} {name!r}'s "
                f"get_config() raised {type(error).__name__}: {error}." + HOW
            ) from error
        if not isinstance(config, dict) or not {"layers", "input_layers", "output_layers"} <= set(
            config
        ):
            raise ValueError(
                "Invalid value for argument `model`. Expected a functional keras.Model "
                "(built with keras.Input), whose graph can be read. Received: "
                f"{type(model).__name__} {name!r}." + HOW
            )
        self.model = model
        self.entries = {entry["name"]: entry for entry in config["layers"]}
        self.inputs = _refs(config["input_layers"])
        self.outputs = _refs(config["output_layers"])
        self.specs = {}  # Ref → (shape, dtype) as recorded where it is read
        parsed = {
            layer: [_parse_call(node, self.specs) for node in entry.get("inbound_nodes", [])]
            for layer, entry in self.entries.items()
        }
        # A nested functional model's first call in its config is call 1 (call
        # 0 is its own graph); the first call a config lists is the smallest
        # index the graph refers to, for every call listed is read.
        used = list(self.outputs)
        for calls in parsed.values():
            for args, kwargs in calls:
                used += flat_refs((args, kwargs))
        first = {}
        for ref in used:
            first[ref.layer] = min(first.get(ref.layer, ref.node), ref.node)
        self.calls = {
            (layer, first.get(layer, 0) + i): arguments
            for layer, calls in parsed.items()
            for i, arguments in enumerate(calls)
        }
        self._layers = {layer.name: layer for layer in model.layers}
        self._operations = {}

    # ------------------------------------------------------------ reading

    def layer(self, name):
        """The layer object of the model (its weights), or for an operation
        that is not a layer, one rebuilt from its config (it has no weights)."""
        if name in self._layers:
            return self.model.get_layer(name)
        if name not in self._operations:
            self._operations[name] = keras.saving.deserialize_keras_object(self.entries[name])
        return self._operations[name]

    def calls_of(self, name):
        """The call keys of layer `name` in the model's graph, in order."""
        return sorted(call for call in self.calls if call[0] == name)

    def arguments(self, call):
        """The arguments of `call` by parameter name (positional ones bound to
        the names of the layer's `call`)."""
        args, kwargs = self.calls[call]
        layer = self.layer(call[0])
        try:
            bound = inspect.signature(layer.call).bind_partial(*args, **kwargs)
            return dict(bound.arguments)
        except (TypeError, ValueError):
            named = {f"arg{i}": a for i, a in enumerate(args)}
            named.update(kwargs)
            return named

    def input_refs(self, call):
        """Every tensor `call` reads."""
        return flat_refs(self.calls.get(call, ([], {})))

    def upstream(self, ref, stop=()):
        """The tensors that `ref` depends on, `ref` first, walking back one call
        at a time and not past the tensors in `stop`; lazily, so a caller may
        stop early. A tensor read by several calls may come more than once."""
        seen, stack = set(), [ref]
        while stack:
            r = stack.pop()
            yield r
            if r in stop or r.call in seen:
                continue
            seen.add(r.call)
            stack.extend(self.input_refs(r.call))

    def inputs_reached(self, ref):
        """Indices of the model inputs that the tensor `ref` depends on."""
        inputs = {r: i for i, r in enumerate(self.inputs)}
        return {inputs[r] for r in self.upstream(ref, stop=inputs) if r in inputs}

    def reaches(self, ref, target):
        """Whether the tensor `ref` depends on the tensor `target`."""
        return any(r == target for r in self.upstream(ref))

    # ---------------------------------------------------------- rebuilding

    def rebuild(self, feeds, wanted, masks=True):
        """Calls the model's layers again on new tensors.

        Args:
            feeds: `{Ref: tensor}`, the new tensors that stand for graph tensors
                (a model input, or the decoder's outputs).
            wanted: a structure of `Ref`s.
            masks: whether to pass the `mask` arguments of the calls; False
                for the readout, whose target mask is computed from the
                target input that it does not take.

        Returns:
            The structure of `wanted` with the new tensors.
        """
        outputs = {}

        def tensor(ref):
            if ref in feeds:
                return feeds[ref]
            if ref.call not in outputs:
                if ref.call not in self.calls:
                    raise ValueError(
                        f"The graph of {self.model.name!r} reads the input {ref.layer!r}, "
                        "which this piece does not take." + HOW
                    )
                args, kwargs = self.calls[ref.call]
                if not masks:
                    kwargs = {k: v for k, v in kwargs.items() if k != "mask"}
                args = _replace(args, tensor)
                kwargs = _replace(kwargs, tensor)
                result = self.layer(ref.layer)(*args, **kwargs)
                outputs[ref.call] = keras.tree.flatten(result)
            return outputs[ref.call][ref.index]

        return _replace(wanted, tensor)


class ModelGraph:
    """The encoder, target embedding, readout and decoder of a functional
    teacher-forced model, each piece a Keras model of the model's own layers.

    Attributes:
        decoder: the model's decoder layer.
        encoder_model: source → [memory, memory mask, *initial states] (a
            model without attention: [mask, *initial states]).
        target_embedding: target ids (B, T) → the decoder's inputs.
        readout: the decoder's outputs (B, T, d_out) → logits (B, T, V).
        source_spec: `(shape without batch, dtype)` of the source input.
        source_vocabulary: `(input_dim, layer name)` of the smallest
            `Embedding` that reads the source input, or None.
        target_vocabulary_size: the size of the logits' last axis, or None.

    Raises:
        ValueError: naming the model and layer, for a graph it cannot read.
    """

    def __init__(self, model):
        graph = FunctionalGraph(model)
        self.graph = graph
        if len(graph.inputs) != 2 or len(graph.outputs) != 1:
            fix = ""
            if len(graph.inputs) == 2 and len(graph.outputs) > 1:
                fix = (
                    " If the first output is the logits (the others, say, attention "
                    "weights), pass `keras.Model(model.inputs, model.outputs[0])`."
                )
            raise ValueError(
                f"The model {model.name!r} has {len(graph.inputs)} input(s) and "
                f"{len(graph.outputs)} output(s); expected two inputs [source, target_in] "
                "and one output, the logits." + fix + HOW
            )
        size = model.outputs[0].shape[-1]
        self.target_vocabulary_size = None if size is None else int(size)
        decoders = [layer for layer in model.layers if isinstance(layer, BaseDecoder)]
        nested = _nested_decoders(model)
        if not decoders and not nested:
            recurrent = self._recurrent_decoder()
            if recurrent is None:
                raise ValueError(
                    f"The model {model.name!r} has no BahdanauDecoder or LuongDecoder "
                    "layer (nor a GRU/LSTM decoder that reads the target input)." + HOW
                )
            self._read_recurrent(*recurrent)
            return
        if len(decoders) + len(nested) > 1:
            names = ", ".join(repr(d.name) for d in decoders + [d for d, _ in nested])
            raise ValueError(
                f"The model {model.name!r} has {len(decoders) + len(nested)} decoders "
                f"({names}); a generator runs exactly one." + HOW
            )
        if nested:
            decoder, owner = nested[0]
            raise ValueError(
                f"The decoder {decoder.name!r} is inside the nested model {owner!r} of "
                f"{model.name!r}; a generator reads the decoder's call in the model's "
                "own graph." + HOW
            )
        self._read_attentional(decoders[0])

    def _read_attentional(self, decoder):
        """A model whose decoder is a `BahdanauDecoder` or `LuongDecoder`."""
        graph, model = self.graph, self.graph.model
        calls = graph.calls_of(decoder.name)
        if len(calls) != 1:
            raise ValueError(
                f"The decoder {decoder.name!r} is called {len(calls)} times in the graph "
                f"of {model.name!r} (shared); expected one call." + HOW
            )
        call = calls[0]
        arguments = graph.arguments(call)
        target_ref, memory_ref = arguments.get("target_embeddings"), arguments.get("memory")
        if not isinstance(target_ref, Ref) or not isinstance(memory_ref, Ref):
            raise ValueError(
                f"The decoder {decoder.name!r} is called without target embeddings and "
                "memory tensors." + HOW
            )
        # Which model input feeds which side of the decoder.
        memory_inputs = graph.inputs_reached(memory_ref)
        target_inputs = graph.inputs_reached(target_ref)
        if len(memory_inputs) != 1 or len(target_inputs) != 1 or memory_inputs == target_inputs:
            raise ValueError(
                f"Cannot tell the source input from the target input of {model.name!r}: "
                f"the decoder {decoder.name!r}'s memory reads input(s) "
                f"{_input_names(memory_inputs, model)} and its target embeddings read "
                f"{_input_names(target_inputs, model)}; expected the memory to read the "
                "source only and the embeddings the target only." + HOW
            )
        source_index, target_index = memory_inputs.pop(), target_inputs.pop()
        initial_state = arguments.get("initial_state")
        memory_mask = arguments.get("memory_mask")
        for name, value in (("initial_state", initial_state), ("memory_mask", memory_mask)):
            for ref in flat_refs(value):
                reached = graph.inputs_reached(ref)
                if reached and reached != {source_index}:
                    raise ValueError(
                        f"The decoder {decoder.name!r}'s `{name}` reads the target input "
                        f"{model.inputs[target_index].name!r}; a generator computes it from "
                        "the source." + HOW
                    )
        source = _new_input(model.inputs[source_index])
        memory, states, mask = graph.rebuild(
            {graph.inputs[source_index]: source}, [memory_ref, initial_state, memory_mask]
        )
        if mask is None:
            mask = _KerasMaskOf(name=f"{decoder.name}_memory_mask")(memory)
        states = None if states is None else keras.tree.flatten(states)
        self.encoder_model = keras.Model(
            source, [memory, mask, *(states or [])], name=f"{model.name}_encoder"
        )
        self._has_state = bool(states)
        self._no_memory = False
        self._finish(decoder, call, source_index, target_index, target_ref)
        self._check_source_padding()

    def _read_recurrent(self, layer, call, target_index):
        """A model whose decoder is a plain recurrent layer (no attention)."""
        graph, model = self.graph, self.graph.model
        source_index = 1 - target_index
        arguments = graph.arguments(call)
        initial_state = arguments.get("initial_state")
        for ref in flat_refs(initial_state):
            if graph.inputs_reached(ref) - {source_index}:
                raise ValueError(
                    f"The decoder {layer.name!r}'s `initial_state` reads the target input "
                    f"{model.inputs[target_index].name!r}; a generator computes it from "
                    "the source." + HOW
                )
        source = _new_input(model.inputs[source_index])
        states = graph.rebuild({graph.inputs[source_index]: source}, initial_state)
        states = keras.tree.flatten(states)
        mask = _SourcePositions(name=f"{layer.name}_source_positions")(source)
        self.encoder_model = keras.Model(source, [mask, *states], name=f"{model.name}_encoder")
        self._has_state = bool(states)
        self._no_memory = True
        self._finish(layer, call, source_index, target_index, graph.calls[call][0][0])

    def _finish(self, decoder, call, source_index, target_index, target_ref):
        """The target embedding, readout, source spec and vocabularies."""
        graph, model = self.graph, self.graph.model
        target = _new_input(model.inputs[target_index])
        self.target_embedding = keras.Model(
            target,
            graph.rebuild({graph.inputs[target_index]: target}, target_ref),
            name=f"{model.name}_target_embedding",
        )
        output = Ref(call[0], call[1], 0)
        _check_readout(graph, decoder.name, call, output)
        if output == graph.outputs[0]:
            self.readout = keras.layers.Identity(name=f"{model.name}_readout")
        else:
            shape, dtype = graph.specs[output]
            outputs = keras.Input(tuple(shape[1:]), dtype=dtype, name=f"{decoder.name}_outputs")
            self.readout = keras.Model(
                outputs,
                graph.rebuild({output: outputs}, graph.outputs[0], masks=False),
                name=f"{model.name}_readout",
            )
            check_readout_steps(graph, decoder.name, output)
            _check_readout_acts_on_each_step(graph, decoder.name, output, self.readout)
        # The decoder's outputs carry the target mask in `teacher_forced_logits`;
        # the logits need none (the model's own readout ignored it too).
        self.readout.supports_masking = True
        self.decoder = decoder
        source = model.inputs[source_index]
        self.source_spec = (tuple(source.shape[1:]), str(source.dtype))
        self.source_vocabulary = None
        for layer in model.layers:
            if not isinstance(layer, keras.layers.Embedding):
                continue
            reads = any(
                graph.inputs[source_index] in graph.input_refs(c)
                for c in graph.calls_of(layer.name)
            )
            if reads and (
                self.source_vocabulary is None or layer.input_dim < self.source_vocabulary[0]
            ):
                self.source_vocabulary = (int(layer.input_dim), layer.name)

    def _check_source_padding(self):
        """Warns when the decoder reads the padding of a token-id source as real
        positions: a padded batch and the same sources unpadded (one at a
        time, as an app feeds a TFLite model) then decode differently."""
        shape, dtype = self.source_spec
        if len(shape) != 1 or "int" not in dtype or shape[0] == 1:
            return
        length = 2 if shape[0] is None else shape[0]
        probe = np.zeros((1, length), "int32")
        probe[0, 0] = 1 if self.source_vocabulary is None or self.source_vocabulary[0] > 1 else 0
        mask = keras.ops.convert_to_numpy(self.encoder_model(probe, training=False)[1])
        if not mask[0, 1:].any():
            return
        model, decoder = self.graph.model.name, self.decoder.name
        where = f"The decoder {decoder!r} of {model!r} reads padding (id 0) in the source as "
        if self.source_vocabulary is not None:
            layer = self.graph.model.get_layer(self.source_vocabulary[1])
            if not getattr(layer, "mask_zero", True):
                where = (
                    f"The Embedding {layer.name!r} that reads the source of {model!r} has "
                    f"mask_zero=False, so the decoder {decoder!r} reads padding (id 0) as "
                )
        warnings.warn(
            where + "real positions: a padded batch and the same sources without padding "
            "(one at a time, as an app feeds a TFLite model) decode differently. Build the "
            "source Embedding with mask_zero=True, or pass the decoder "
            "`memory_mask=keras.ops.not_equal(source, 0)`, and train again.",
            UserWarning,
            stacklevel=3,
        )

    def _recurrent_decoder(self):
        """`(layer, call, target input index)` of the one recurrent layer of the
        model's graph that reads one input only, returns sequences and takes
        an initial state, or None."""
        graph, found = self.graph, []
        for layer in graph.model.layers:
            if not isinstance(layer, keras.layers.RNN) or not layer.return_sequences:
                continue
            for call in graph.calls_of(layer.name):
                args = graph.calls[call][0]
                if not args or not isinstance(args[0], Ref):
                    continue
                reached = graph.inputs_reached(args[0])
                if len(reached) == 1 and graph.arguments(call).get("initial_state") is not None:
                    found.append((layer, call, reached.pop()))
        return found[0] if len(found) == 1 else None

    def encoder(self, source):
        outputs = keras.tree.flatten(self.encoder_model(source, training=False))
        if self._no_memory:
            states = list(outputs[1:])
            state = None if not states else states[0] if len(states) == 1 else states
            return None, state, outputs[0]
        memory, mask = outputs[0], outputs[1]
        if not self._has_state:
            return memory, None, mask
        states = list(outputs[2:])
        return memory, states[0] if len(states) == 1 else states, mask


def check_special_ids(start_id, end_id, target_vocabulary_size):
    """The START and END ids of `from_model` against the model's target vocabulary.

    Raises:
        ValueError: naming the argument, for an id that is not a non-negative
            integer, a `start_id` outside [1, target_vocabulary_size) (0 is the
            padding id, which the model's target mask drops), an `end_id`
            outside [0, target_vocabulary_size) (no logit could pick it: no
            output would ever end), or START equal to END (every output would
            end at its first token).
    """
    for name, value in (("start_id", start_id), ("end_id", end_id)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
            raise ValueError(
                f"Invalid value for argument `{name}`. Expected a non-negative integer "
                f"token id. Received: {name}={value!r}"
            )
        if name == "start_id" and value == 0:
            raise ValueError(
                "Invalid value for argument `start_id`. Expected a token id other than 0, "
                "the padding id: the model's target mask drops the positions that read "
                "it, so the first step would see no START. Received: start_id=0"
            )
    if target_vocabulary_size is not None and start_id >= target_vocabulary_size:
        raise ValueError(
            "Invalid value for argument `start_id`. Expected an id in [1, "
            f"{target_vocabulary_size}), the model's target vocabulary (its logits "
            f"have {target_vocabulary_size} entries). Received: start_id={start_id}"
        )
    if target_vocabulary_size is not None and end_id >= target_vocabulary_size:
        raise ValueError(
            "Invalid value for argument `end_id`. Expected an id in [0, "
            f"{target_vocabulary_size}), the model's target vocabulary (its logits "
            f"have {target_vocabulary_size} entries): no output could end on "
            f"{end_id}. Received: end_id={end_id}"
        )
    if start_id == end_id:
        raise ValueError(
            "Invalid value for argument `end_id`. Expected an id other than start_id: "
            f"every output would end at its first token. Received: start_id={start_id}, "
            f"end_id={end_id}"
        )


def _new_input(tensor):
    """A new `keras.Input` like the model input `tensor`."""
    return keras.Input(tuple(tensor.shape[1:]), dtype=tensor.dtype, name=tensor.name)


def _nested_decoders(model):
    """`(decoder, nested model name)` for each decoder inside a nested model."""
    found = []
    for layer in model.layers:
        if isinstance(layer, keras.Model):
            inner = [x for x in layer.layers if isinstance(x, BaseDecoder)]
            found += [(x, layer.name) for x in inner]
            found += [(x, layer.name) for x, _ in _nested_decoders(layer)]
    return found


def _input_names(indices, model):
    if not indices:
        return "none"
    return ", ".join(repr(model.inputs[i].name) for i in sorted(indices))


def _check_readout(graph, decoder_name, decoder_call, allowed):
    """The path from the decoder to the logits must read its outputs only."""
    model = graph.model
    inputs = set(graph.inputs)
    stack, seen = [graph.outputs[0]], set()
    while stack:
        ref = stack.pop()
        if ref == allowed or ref in inputs:
            continue
        if ref.call == decoder_call:
            raise ValueError(
                f"The readout of {model.name!r} reads the decoder {decoder_name!r}'s "
                "attention weights or final state; a generator's readout reads only "
                "its outputs (the first of the three)." + HOW
            )
        if ref.call in seen:
            continue
        seen.add(ref.call)
        # The target mask that rides on the decoder's outputs (a `mask`
        # argument, e.g. of TimeDistributed) is dropped from the readout.
        args, kwargs = graph.calls.get(ref.call, ([], {}))
        read = flat_refs((args, {k: v for k, v in kwargs.items() if k != "mask"}))
        for x in read:
            if x in inputs or (graph.inputs_reached(x) and not graph.reaches(x, allowed)):
                raise ValueError(
                    f"The layer {ref.layer!r} between the decoder {decoder_name!r} "
                    f"and the logits of {model.name!r} reads more than the decoder's "
                    "outputs (a tensor computed from the model's inputs); a generator's "
                    "readout reads only the decoder's outputs." + HOW
                )
            stack.append(x)
    if not graph.reaches(graph.outputs[0], allowed):
        raise ValueError(
            f"The output of {model.name!r} does not read the decoder {decoder_name!r}'s "
            "outputs." + HOW
        )


# The attribute by which a layer of one's own declares that its output at each
# target step reads its input at that step alone (docs/api.md, `from_model`).
ACTS_ON_EACH_STEP = "acts_on_each_step"

# Layers whose output at a position reads their input at that position alone,
# whatever their arguments (Dropout's kind act only in training, which a
# generator never runs).
_STEP_WISE_LAYERS = (
    keras.layers.Dense,
    keras.layers.Embedding,  # ReversibleEmbedding too, tied readouts called with reverse=True
    keras.layers.TimeDistributed,
    keras.layers.Activation,
    keras.layers.Identity,
    keras.layers.ReLU,
    keras.layers.ELU,
    keras.layers.LeakyReLU,
    keras.layers.Rescaling,
    keras.layers.Dropout,
    keras.layers.GaussianDropout,
    keras.layers.GaussianNoise,
    keras.layers.AlphaDropout,
    keras.layers.ActivityRegularization,
    keras.layers.Add,
    keras.layers.Subtract,
    keras.layers.Multiply,
    keras.layers.Average,
    keras.layers.Maximum,
    keras.layers.Minimum,
)
# Layers that act on each position but along `axis`, which must not be the
# batch or time axis.
_ALONG_AN_AXIS = (
    keras.layers.LayerNormalization,
    keras.layers.RMSNormalization,
    keras.layers.UnitNormalization,
    keras.layers.BatchNormalization,  # its moving statistics, outside training
    keras.layers.Softmax,
    keras.layers.Concatenate,
    MaskedSoftmax,
)
# Operations of `keras.ops` (and `keras.activations`) that act element by
# element (broadcasting a constant), by class name in the model's config.
_ELEMENTWISE_OPERATIONS = frozenset(
    "Abs Absolute Add Subtract Multiply Divide TrueDivide FloorDivide Mod Power Negative "
    "Reciprocal Exp Expm1 Log Log1p Sqrt Rsqrt Square Sign Floor Ceil Round Clip Cast "
    "Maximum Minimum Where Sin Cos Tanh Erf Sigmoid HardSigmoid Relu ReLU Relu6 Silu "
    "HardSilu Gelu GELU Elu ELU Selu SELU Softplus Softsign LeakyRelu LeakyReLU "
    "Exponential Linear Mish Tanhshrink".split()
)


def check_readout_steps(graph, decoder_name, output):
    """The readout's logits at step t must read the decoder's outputs at step t
    alone, at any distance: a generator runs the readout on one step at a time.

    Decided from the layers between the decoder's outputs `output` (a `Ref`)
    and the logits: each must be known to act on each step (`Dense`,
    `Embedding` and tied `ReversibleEmbedding`, `TimeDistributed`,
    activations, the `Dropout` kind, the merging layers, a normalization or
    softmax along an axis other than time, an `EinsumDense` that keeps the
    time axis, a `Conv1D` of kernel size 1 and stride 1, an element-wise
    `keras.ops` operation, a nested model of such layers), or declare it by
    a true `acts_on_each_step` attribute. Anything else (a wider `Conv1D`,
    a recurrent layer, attention over the target steps, pooling, a shift, a
    `Lambda`, a layer of one's own without the attribute) is refused.

    Raises:
        ValueError: naming the layer nearest the decoder that is refused, and why.
    """
    refused = {}  # call → why
    for call, layer, rank in _readout_calls(graph, output):
        why = _why_not_per_step(layer, rank)
        if why:
            refused[call] = why
    if not refused:
        return
    # The one nearest the decoder: no other refused call between it and the decoder.
    call = next(
        c
        for c in refused
        if not ({r.call for r in graph.upstream(Ref(*c, 0), stop={output})} - {c}) & set(refused)
    )
    why = refused[call]
    raise ValueError(
        f"The layer {call[0]!r} between the decoder {decoder_name!r} and the logits of "
        f"{graph.model.name!r} may mix target steps: {why}. A generator runs the readout "
        "on one step at a time, so its tokens would not be the model's. Between the "
        "decoder and the logits, use layers that act on each step alone (Dense, "
        "LayerNormalization, Dropout, TimeDistributed, Conv1D with kernel_size=1), or "
        f"give a layer of your own the class attribute `{ACTS_ON_EACH_STEP} = True` if "
        "its output at each step reads that step alone."
    )


def _readout_calls(graph, output):
    """`(call, layer, rank of its first input)` for each call between the
    tensor `output` and the logits (not those that compute a `mask` argument
    from the target: they do not read the decoder's outputs)."""
    found = {}
    for ref in graph.upstream(graph.outputs[0], stop={output}):
        if ref == output or ref.call in found or not graph.reaches(ref, output):
            continue
        read = [r for r in graph.input_refs(ref.call) if graph.reaches(r, output)]
        shape = graph.specs.get(read[0], (None, None))[0] if read else None
        found[ref.call] = (graph.layer(ref.layer), None if shape is None else len(shape))
    return [(call, layer, rank) for call, (layer, rank) in found.items()]


def _why_not_per_step(layer, rank):
    """Why `layer` (called on tensors of `rank`, time the axis 1) may read
    other steps than its own, or None where it acts on each step alone."""
    kind = type(layer).__name__
    declared = getattr(layer, ACTS_ON_EACH_STEP, None)
    if declared is not None:
        return None if declared else f"the {kind} declares {ACTS_ON_EACH_STEP} = False"
    if isinstance(layer, _STEP_WISE_LAYERS):
        return None
    if isinstance(layer, _ALONG_AN_AXIS):
        axes = layer.axis if isinstance(layer.axis, (list, tuple)) else [layer.axis]
        if rank is not None and not {a % rank for a in axes} & {0, 1}:
            return None
        return f"a {kind} along axis {layer.axis} reads the time axis (1)"
    if isinstance(layer, keras.layers.EinsumDense):
        if _einsum_keeps_steps(layer.equation, rank):
            return None
        return f"an EinsumDense '{layer.equation}' reads the time axis (1)"
    if isinstance(layer, keras.layers.Conv1D):
        if tuple(layer.kernel_size) == (1,) and tuple(layer.strides) == (1,):
            return None
        return (
            f"a Conv1D of kernel_size={layer.kernel_size[0]}, strides={layer.strides[0]}, "
            f"dilation_rate={layer.dilation_rate[0]} and padding={layer.padding!r} reads "
            "other steps (up to (kernel_size - 1) · dilation_rate away)"
        )
    if isinstance(layer, keras.Model):
        return _why_not_a_per_step_model(layer)
    if isinstance(layer, (keras.layers.RNN, keras.layers.Bidirectional)):
        return f"a recurrent {kind} carries a state from step to step"
    if isinstance(layer, (keras.layers.Attention, keras.layers.MultiHeadAttention)):
        return f"an attention layer ({kind}) reads every step"
    if isinstance(layer, BaseAttention):
        return f"an attention layer ({kind}) reads every step"
    if isinstance(layer, keras.layers.Lambda):
        return "a Lambda's function cannot be read"
    if not isinstance(layer, keras.layers.Layer):  # an operation of keras.ops
        if kind in _ELEMENTWISE_OPERATIONS:
            return None
        if kind in ("Softmax", "LogSoftmax") and rank and layer.axis % rank > 1:
            return None
        return f"the operation {kind} is not known to act on each step alone"
    return (
        f"{kind} is not known to act on each step alone and declares no "
        f"`{ACTS_ON_EACH_STEP}` attribute"
    )


def _why_not_a_per_step_model(model):
    """Why a model nested in the readout may mix steps, or None."""
    if isinstance(model, keras.Sequential):
        for layer in model.layers:
            try:
                rank = len(layer.input.shape)
            except (AttributeError, ValueError):  # a layer never called
                rank = None
            why = _why_not_per_step(layer, rank)
            if why:
                return f"its layer {layer.name!r}: {why}"
        return None
    try:
        inner = FunctionalGraph(model)
    except ValueError:
        return f"the model {type(model).__name__} is not functional: its layers cannot be read"
    for ref in inner.inputs:  # each input as if it were the decoder's outputs
        for call, layer, rank in _readout_calls(inner, ref):
            why = _why_not_per_step(layer, rank)
            if why:
                return f"its layer {call[0]!r}: {why}"
    return None


def _einsum_keeps_steps(equation, rank):
    """Whether an `EinsumDense` equation over a (B, T, ...) input of `rank`
    keeps the batch and time axes in place and sums over neither."""
    if rank is None or "->" not in equation or equation.count(",") != 1:
        return False
    inputs, output = equation.split("->")
    lhs, kernel = inputs.split(",")
    filler = "".join(chr(0x2460 + i) for i in range(max(rank - len(lhs.replace("...", "")), 0)))
    lhs, output = lhs.replace("...", filler), output.replace("...", filler)
    if len(lhs) != rank or "..." in kernel:
        return False
    return lhs[1] not in kernel and lhs[0] not in kernel and output[:2] == lhs[:2]


def _check_readout_acts_on_each_step(graph, decoder_name, output, readout):
    """The second line behind `check_readout_steps`, for the layers that
    declare `acts_on_each_step`: checked numerically, the readout of 4
    random steps at once must equal the readout of each step alone. It
    cannot see a layer that reads steps 4 or more away (hence the layers
    decide first). On failure each tensor of the readout is probed the same
    way, to name the first layer that mixes steps.
    """
    shape, dtype = graph.specs[output]
    if shape is None or len(shape) < 3 or None in shape[2:] or shape[1] not in (None, 4):
        return  # no time axis to probe, or a fixed number of steps
    steps = 4
    rng = np.random.default_rng(0)
    together = rng.standard_normal((1, steps, *shape[2:])).astype(dtype or "float32")
    alone = together.reshape((steps, 1, *shape[2:]))  # each step a sequence of its own

    def mixes_steps(piece):
        a = keras.ops.convert_to_numpy(piece(together, training=False))
        b = keras.ops.convert_to_numpy(piece(alone, training=False))
        if a.ndim < 3 or a.shape[:2] != (1, steps) or b.shape[:2] != (steps, 1):
            return False  # no time axis left: the logits' probe decides
        a, b = a.astype("float64"), b.reshape(a.shape).astype("float64")
        # NaN weights give NaN at the same places both ways: not mixing steps
        # (`load_run` and the search report them).
        scale = np.abs(a[np.isfinite(a)]).max(initial=1.0)
        return not np.allclose(a, b, rtol=1e-3, atol=1e-5 * scale, equal_nan=True)

    if not mixes_steps(readout):
        return
    inputs = readout.inputs[0]
    offending = set()
    for ref in dict.fromkeys(graph.upstream(graph.outputs[0], stop={output})):
        # Not the target mask of a `mask` argument: it does not read the outputs.
        if ref != output and graph.reaches(ref, output):
            piece = keras.Model(inputs, graph.rebuild({output: inputs}, ref, masks=False))
            if mixes_steps(piece):
                offending.add(ref)
    # The first: an offending tensor that reads no offending tensor.
    culprit = next(
        (r for r in offending if not offending & set(graph.input_refs(r.call))),
        graph.outputs[0],
    )
    raise ValueError(
        f"The layer {culprit.layer!r} between the decoder {decoder_name!r} and the logits "
        f"of {graph.model.name!r} mixes target steps: its output at a step reads the "
        "decoder's outputs at other steps. A generator runs the readout on one step at "
        "a time, so its tokens would not be the model's. Between the decoder and the "
        "logits, use layers that act on each step alone (Dense, LayerNormalization, "
        "Dropout, TimeDistributed, Conv1D with kernel_size=1)."
    )


def _refs(structure):
    """The `Ref`s of a config's `input_layers` / `output_layers`."""
    if (
        isinstance(structure, (list, tuple))
        and len(structure) == 3
        and isinstance(structure[0], str)
        and all(isinstance(i, int) for i in structure[1:])
    ):
        return [Ref(structure[0], structure[1], structure[2])]
    if isinstance(structure, dict):
        structure = list(structure.values())
    return [ref for item in structure for ref in _refs(item)]


def _parse_call(node, specs):
    """One call of a layer's `inbound_nodes` → `(args, kwargs)`, each tensor a
    `Ref` (its recorded shape and dtype go to `specs`)."""
    if isinstance(node, dict):
        return _parse(node.get("args", []), specs), _parse(node.get("kwargs", {}), specs)
    # The older form: a list of `[layer, call, index(, kwargs)]`.
    tensors = [Ref(item[0], item[1], item[2]) for item in node]
    kwargs = node[0][3] if node and len(node[0]) > 3 else {}
    return [tensors[0] if len(tensors) == 1 else tensors], dict(kwargs)


def _parse(value, specs):
    """A serialized argument → Python values, each tensor a `Ref`."""
    if isinstance(value, list):
        return [_parse(v, specs) for v in value]
    if isinstance(value, tuple):
        return tuple(_parse(v, specs) for v in value)
    if not isinstance(value, dict):
        return value
    kind = value.get("class_name")
    if kind == "__keras_tensor__":
        config = value["config"]
        ref = Ref(*config["keras_history"][:3])
        specs.setdefault(ref, (config.get("shape"), config.get("dtype")))
        return ref
    if kind == "__tuple__":
        return tuple(_parse(v, specs) for v in value["config"]["value"])
    if kind is not None and "config" in value:
        return keras.saving.deserialize_keras_object(value)
    return {k: _parse(v, specs) for k, v in value.items()}


def _replace(value, tensor):
    """`value` with each `Ref` replaced by `tensor(ref)`."""
    if isinstance(value, Ref):
        return tensor(value)
    if isinstance(value, list):
        return [_replace(v, tensor) for v in value]
    if isinstance(value, tuple):
        return tuple(_replace(v, tensor) for v in value)
    if isinstance(value, dict):
        return {k: _replace(v, tensor) for k, v in value.items()}
    return value


def flat_refs(value):
    """Every `Ref` in a structure of arguments."""
    found = []
    _replace(value, found.append)
    return found
