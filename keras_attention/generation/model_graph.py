"""Reading the three pieces of a functional teacher-forced model around its decoder.

    source ─► encoder ─► memory, s_0, memory mask ─┐
    token  ─► target embedding ─► y_{t-1} ─────────┴► decoder.step ─► readout ─► logits

`ModelGraph(model)` finds them and rebuilds each as a Keras model made of the
model's own layers (so the weights are shared).
"""

import keras
from keras import ops

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


def _history(tensor):
    history = getattr(tensor, "_keras_history", None)
    if history is None:
        return None
    operation, node_index, _ = history
    return operation, operation._inbound_nodes[node_index]


class ModelGraph:
    """Reads the encoder, target embedding and readout out of a functional model."""

    def __init__(self, model):
        how = (
            " Build the generator with `Seq2SeqGenerator(encoder, target_embedding, "
            "decoder, readout, start_id, end_id)` instead (see its docstring)."
        )
        if not isinstance(model, keras.Model) or not hasattr(model, "_nodes_by_depth"):
            raise ValueError(
                "Invalid value for argument `model`. Expected a functional keras.Model "
                f"(built with keras.Input), whose graph can be read. Received: {model!r}." + how
            )
        inputs = list(model.inputs)
        if len(inputs) != 2 or len(model.outputs) != 1:
            raise ValueError(
                f"The model {model.name!r} has {len(inputs)} input(s) and "
                f"{len(model.outputs)} output(s); expected two inputs [source, target_in] "
                "and one output, the logits." + how
            )
        decoders = [layer for layer in model._flatten_layers() if isinstance(layer, BaseDecoder)]
        if not decoders:
            recurrent = _recurrent_decoder(model, inputs)
            if recurrent is None:
                raise ValueError(
                    f"The model {model.name!r} has no BahdanauDecoder or LuongDecoder "
                    "layer (nor a GRU/LSTM decoder that reads the target input)." + how
                )
            self._read_recurrent(model, inputs, *recurrent, how)
            return
        if len(decoders) > 1:
            names = ", ".join(repr(d.name) for d in decoders)
            raise ValueError(
                f"The model {model.name!r} has {len(decoders)} decoders ({names}); "
                "a generator runs exactly one." + how
            )
        decoder = decoders[0]
        nodes = [n for n in decoder._inbound_nodes if _in_model(model, n)]
        if len(nodes) != 1:
            raise ValueError(
                f"The decoder {decoder.name!r} is called {len(nodes)} times in the graph "
                f"of {model.name!r} (inside a nested model, or shared); expected one call "
                "in the model's own graph." + how
            )
        node = nodes[0]
        args = node.arguments
        call = dict(zip(("target_embeddings", "memory"), args.args, strict=False))
        call.update(args.kwargs)
        target_kt, memory_kt = call.get("target_embeddings"), call.get("memory")
        if target_kt is None or memory_kt is None:
            raise ValueError(
                f"The decoder {decoder.name!r} is called without target embeddings and "
                "memory tensors." + how
            )
        # Which model input feeds which side of the decoder.
        memory_inputs = _inputs_reached(memory_kt, inputs)
        target_inputs = _inputs_reached(target_kt, inputs)
        if len(memory_inputs) != 1 or len(target_inputs) != 1 or memory_inputs == target_inputs:
            raise ValueError(
                f"Cannot tell the source input from the target input of {model.name!r}: "
                f"the decoder {decoder.name!r}'s memory reads input(s) "
                f"{_input_names(memory_inputs, inputs, model)} and its target "
                f"embeddings read {_input_names(target_inputs, inputs, model)}; expected "
                "the memory to read the source only and the embeddings the target only." + how
            )
        source = inputs[memory_inputs.pop()]
        target_in = inputs[target_inputs.pop()]
        initial_state = call.get("initial_state")
        for name in ("initial_state", "memory_mask"):
            value = call.get(name)
            for tensor in keras.tree.flatten(value) if value is not None else []:
                reached = _inputs_reached(tensor, inputs)
                if reached and reached != {inputs.index(source)}:
                    raise ValueError(
                        f"The decoder {decoder.name!r}'s `{name}` reads the target input "
                        f"{target_in.name!r}; a generator computes it from the source." + how
                    )
        memory_mask_kt = call.get("memory_mask")
        if memory_mask_kt is None:
            memory_mask_kt = _KerasMaskOf(name=f"{decoder.name}_memory_mask")(memory_kt)
        outputs = [memory_kt, memory_mask_kt]
        states = None if initial_state is None else keras.tree.flatten(initial_state)
        if states:
            outputs += states
        self._encoder_model = keras.Model(source, outputs, name=f"{model.name}_encoder")
        self._has_state = bool(states)
        self._single_state = states is not None and not isinstance(initial_state, (list, tuple))
        self.target_embedding = keras.Model(
            target_in, target_kt, name=f"{model.name}_target_embedding"
        )
        decoder_output = node.outputs[0]
        _check_readout(model, decoder, node, decoder_output, inputs, how)
        self.readout = keras.Model(decoder_output, model.outputs[0], name=f"{model.name}_readout")
        # The decoder's outputs carry the target mask in `teacher_forced_logits`;
        # the logits need none (the model's own readout ignored it too).
        self.readout.supports_masking = True
        self.decoder = decoder
        self.source_spec = (tuple(source.shape[1:]), str(source.dtype))

    def _read_recurrent(self, model, inputs, layer, node, target_index, how):
        """A model whose decoder is a plain recurrent layer (no attention)."""
        source = inputs[1 - target_index]
        target_in = inputs[target_index]
        initial_state = node.arguments.kwargs.get("initial_state")
        states = None if initial_state is None else keras.tree.flatten(initial_state)
        for tensor in states or []:
            if _inputs_reached(tensor, inputs) - {1 - target_index}:
                raise ValueError(
                    f"The decoder {layer.name!r}'s `initial_state` reads the target input "
                    f"{target_in.name!r}; a generator computes it from the source." + how
                )
        mask = _SourcePositions(name=f"{layer.name}_source_positions")(source)
        self._encoder_model = keras.Model(source, [mask, *(states or [])])
        self._has_state = bool(states)
        self._no_memory = True
        self.target_embedding = keras.Model(
            target_in, node.arguments.args[0], name=f"{model.name}_target_embedding"
        )
        decoder_output = node.outputs[0]
        _check_readout(model, layer, node, decoder_output, inputs, how)
        self.readout = keras.Model(decoder_output, model.outputs[0], name=f"{model.name}_readout")
        # The decoder's outputs carry the target mask in `teacher_forced_logits`;
        # the logits need none (the model's own readout ignored it too).
        self.readout.supports_masking = True
        self.decoder = layer
        self.source_spec = (tuple(source.shape[1:]), str(source.dtype))

    def encoder(self, source):
        if getattr(self, "_no_memory", False):
            outputs = keras.tree.flatten(self._encoder_model(source, training=False))
            states = list(outputs[1:])
            state = None if not states else states[0] if len(states) == 1 else states
            return None, state, outputs[0]
        outputs = self._encoder_model(source, training=False)
        memory, mask = outputs[0], outputs[1]
        if not self._has_state:
            return memory, None, mask
        states = list(outputs[2:])
        return memory, states[0] if len(states) == 1 else states, mask


def _recurrent_decoder(model, inputs):
    """`(layer, node, target input index)` of the one recurrent layer of the
    model's graph that reads one input only and returns sequences, or None."""
    found = []
    for layer in model.layers:
        if not isinstance(layer, keras.layers.RNN) or not layer.return_sequences:
            continue
        for node in layer._inbound_nodes:
            if not _in_model(model, node) or not node.arguments.args:
                continue
            reached = _inputs_reached(node.arguments.args[0], inputs)
            states = node.arguments.kwargs.get("initial_state")
            if len(reached) == 1 and states is not None:
                found.append((layer, node, reached.pop()))
    return found[0] if len(found) == 1 else None


def _in_model(model, node):
    return any(node in nodes for nodes in model._nodes_by_depth.values())


def _inputs_reached(tensor, inputs):
    """Indices of the model inputs that `tensor` depends on."""
    ids = {id(x): i for i, x in enumerate(inputs)}
    reached, seen, stack = set(), set(), [tensor]
    while stack:
        t = stack.pop()
        if id(t) in ids:
            reached.add(ids[id(t)])
            continue
        history = _history(t)
        if history is None:
            continue
        _, node = history
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.extend(node.input_tensors)
    return reached


def _input_names(indices, inputs, model):
    if not indices:
        return "none"
    return ", ".join(repr(inputs[i].name) for i in sorted(indices))


def _check_readout(model, decoder, decoder_node, decoder_output, inputs, how):
    """The path from the decoder to the logits must read its outputs only."""
    allowed = id(decoder_output)
    stack, seen = [model.outputs[0]], set()
    while stack:
        t = stack.pop()
        if id(t) == allowed:
            continue
        history = _history(t)
        if history is None:
            continue
        operation, node = history
        if node is decoder_node:
            raise ValueError(
                f"The readout of {model.name!r} reads the decoder {decoder.name!r}'s "
                "attention weights or final state; a generator's readout reads only "
                "its outputs (the first of the three)." + how
            )
        if id(node) in seen:
            continue
        seen.add(id(node))
        for x in node.input_tensors:
            if id(x) in {id(i) for i in inputs} or (
                _history(x) is not None and _inputs_reached(x, inputs) and not _reaches(x, allowed)
            ):
                raise ValueError(
                    f"The layer {operation.name!r} between the decoder {decoder.name!r} "
                    f"and the logits of {model.name!r} reads more than the decoder's "
                    "outputs (a tensor computed from the model's inputs); a generator's "
                    "readout reads only the decoder's outputs." + how
                )
            stack.append(x)
    if not _reaches(model.outputs[0], allowed):
        raise ValueError(
            f"The output of {model.name!r} does not read the decoder {decoder.name!r}'s "
            "outputs." + how
        )


def _reaches(tensor, target_id):
    """Whether `tensor` depends on the tensor whose id is `target_id`."""
    seen, stack = set(), [tensor]
    while stack:
        t = stack.pop()
        if id(t) == target_id:
            return True
        history = _history(t)
        if history is None:
            continue
        _, node = history
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.extend(node.input_tensors)
    return False
