"""Mixed precision: checking a policy before training, and float32 copies for export.

Under `mixed_float16` or `mixed_bfloat16` a Keras layer keeps its variables in
float32 and computes in float16 (bfloat16). Training on a GPU or TPU is then
faster; but a model that computes in float16 cannot become a builtin-only
TFLite model (float16 `MatMul`, `AddV2`, `BatchMatMulV2` are not TFLite
builtins), and a phone runs float32 anyway. `float32_copy` rebuilds a model's
architecture with every dtype policy set to float32 and copies its weights (the
variables are float32 already under a mixed policy, so nothing is rounded);
`keras_attention.export` does this for every model it exports, and
`float32_generator` for a `Seq2SeqGenerator`.

Backend-agnostic: Keras only, no TensorFlow.
"""

import contextlib

import keras
import numpy as np

POLICIES = ("float32", "mixed_float16", "mixed_bfloat16")
# What each mixed policy computes in, for the messages.
_COMPUTE = {"mixed_float16": "float16", "mixed_bfloat16": "bfloat16"}
# Compute dtypes a float32 copy replaces (a layer built with `dtype="float16"`
# keeps float16 variables; its copy gets float32 ones, cast from them).
_REDUCED = ("float16", "bfloat16")


class PolicyError(ValueError):
    """A dtype policy the package does not know, or that this backend and
    device cannot compute in."""


def check_policy(policy):
    """Checks that Keras can train in `policy` here; returns its name.

    The name must be one of `POLICIES`. A mixed policy is then tried on the
    current backend and its default device: one training step of a small
    Dense and GRU model (matmuls, a recurrence, their gradients, the loss
    scaling of `mixed_float16`) in that policy. A runtime that cannot compute
    in float16 or bfloat16 fails there, in a second, with the backend, the
    device and its own error named, instead of minutes into a run. The global
    policy is left as it was.

    Mixed precision pays off on GPUs (float16 on compute capability 7.0 and
    later, bfloat16 on 8.0 and later) and TPUs (bfloat16); on a CPU it runs,
    but usually slower than float32.

    Args:
        policy: "float32", "mixed_float16" or "mixed_bfloat16".

    Returns:
        The policy name, to pass to `keras.config.set_dtype_policy`.

    Raises:
        PolicyError: an unknown name, or a runtime that cannot train in it.
    """
    if not isinstance(policy, str) or policy not in POLICIES:
        raise PolicyError(
            f"Invalid value for argument `policy`. Expected one of {POLICIES}. "
            f"Received: policy={policy!r}"
        )
    if policy == "float32":
        return policy
    try:
        _probe(policy)
    except Exception as error:  # whatever the runtime raises, said in one line
        first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise PolicyError(
            f"Invalid value for argument `policy`: Keras on {keras.backend.backend()!r} "
            f"({_device()}) cannot train in {_COMPUTE[policy]}. Received: "
            f"policy={policy!r}. The runtime said: {type(error).__name__}: {first_line[:300]}. "
            "Train in float32 (the default), or on a device that computes in "
            f"{_COMPUTE[policy]} (a GPU, or a TPU for bfloat16)."
        ) from error
    return policy


def _probe(policy):
    """One training step of a tiny Dense and GRU model in `policy`."""
    with policy_scope(policy):
        inputs = keras.Input((3, 4))
        hidden = keras.layers.GRU(4, return_sequences=True)(inputs)
        outputs = keras.layers.Dense(2, dtype="float32")(hidden)  # float32 logits
        model = keras.Model(inputs, outputs)
        model.compile(optimizer="sgd", loss="mse")
        x = np.ones((2, 3, 4), "float32")
        loss = model.train_on_batch(x, np.zeros((2, 3, 2), "float32"))
        if not np.isfinite(float(np.asarray(loss))):
            raise FloatingPointError(f"the loss of one step was {float(np.asarray(loss))}")


@contextlib.contextmanager
def policy_scope(policy):
    """Keras' global dtype policy set to `policy` (None: left as it is) while
    the block runs, then put back: layers made inside keep `policy`."""
    if policy is None:
        yield
        return
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(policy)
    try:
        yield
    finally:
        keras.config.set_dtype_policy(previous)


def _device():
    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        return str(jax.devices()[0].platform)
    if backend == "torch":
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    if backend == "tensorflow":
        import tensorflow as tf

        return "gpu" if tf.config.list_logical_devices("GPU") else "cpu"
    return "its default device"


def reduced_precision_layers(layer):
    """The `(layer name, policy name)` of every layer inside `layer` (a Keras
    layer or model, itself included) that computes in float16 or bfloat16,
    read from its config: nested layers (a decoder's attention, a
    `Bidirectional`'s GRUs) included. Empty for a float32 model."""
    found = []
    _walk_policies(keras.saving.serialize_keras_object(layer), None, found.append)
    return found


def float32_copy(model):
    """A float32 copy of a Keras layer or model, with its weights.

    The copy has the same architecture and layer names, every dtype policy
    (mixed or float16/bfloat16, nested layers included) replaced by float32,
    and the same weights: float32 variables are copied as they are, reduced
    ones cast to float32. The model itself is left untouched. A model that
    already computes in float32 everywhere is returned as it is.

    Functional and Sequential models are cloned layer by layer
    (`keras.models.clone_model`), so a layer class needs only `get_config`
    and `from_config` (the same as for a `.keras` file); another layer or
    model is rebuilt from its config.

    Args:
        model: a built Keras layer or model.

    Raises:
        ValueError: a layer or model that is not built, or whose copy does not
            hold the same variables (named).
    """
    if not reduced_precision_layers(model):
        return model
    if not model.built:
        raise ValueError(
            f"Invalid value for argument `model`. Expected a built layer or model "
            f"(its weights are copied). Received: {model.name!r}, not built"
        )
    # Sub-layers that a layer creates without a `dtype` take the global
    # policy: float32 while the copy is built.
    with policy_scope("float32"):
        if isinstance(model, keras.Model) and _is_graph_model(model):
            copy = keras.models.clone_model(model, clone_function=_float32_layer)
        else:
            config = keras.saving.serialize_keras_object(model)
            config.pop("compile_config", None)
            copy = keras.saving.deserialize_keras_object(_float32_config(config))
            if not copy.built:
                copy.build_from_config(model.get_build_config())
    _copy_weights(model, copy)
    return copy


def _is_graph_model(model):
    """A Sequential or functional model (`keras.Model(inputs, outputs)`,
    whose class Keras names `Functional`): one that `clone_model` clones
    layer by layer."""
    return isinstance(model, keras.Sequential) or type(model).__name__ == "Functional"


def float32_generator(generator):
    """A `Seq2SeqGenerator` that computes in float32, from a generator whose
    model computes in float16 or bfloat16 (trained under a mixed policy).

    A generator of `Seq2SeqGenerator.from_model` is built again, with the same
    ids and bounds, from `float32_copy` of its model: the same weights, every
    layer in float32. A generator whose layers compute in float32 already is
    returned as it is. `keras_attention.export` calls this on every generator
    it exports, so a model trained under `mixed_float16` or `mixed_bfloat16`
    exports as a float32 one does.

    Args:
        generator: a `Seq2SeqGenerator`, or an `EnsembleGenerator` (each of
            its `members` copied so).

    Raises:
        ValueError: a reduced-precision generator that this cannot rebuild:
            one built with the explicit constructor (its pieces may be plain
            functions), or given another decoder by `with_decoder`. Build such
            a generator from float32 copies of its layers (`float32_copy`).
    """
    members = getattr(generator, "members", None)
    if members is not None:  # an EnsembleGenerator
        copies = [float32_generator(member) for member in members]
        if all(copy is member for copy, member in zip(copies, members, strict=True)):
            return generator
        return type(generator)(copies)
    pieces = [generator.model, generator.encoder, generator.target_embedding]
    pieces += [getattr(generator.decoder, "layer", generator.decoder), generator.readout]
    reduced = []
    for piece in pieces:
        if isinstance(piece, keras.Layer):
            reduced += [r for r in reduced_precision_layers(piece) if r not in reduced]
    if not reduced:
        return generator
    model = generator.model
    decoder = getattr(generator.decoder, "layer", generator.decoder)
    if model is None or not any(layer is decoder for layer in _all_layers(model)):
        names = ", ".join(f"{name!r} ({policy})" for name, policy in reduced[:5])
        raise ValueError(
            f"The generator computes in reduced precision ({names}), and only a "
            "generator of `Seq2SeqGenerator.from_model` can be copied to float32 "
            "here. Build this one from float32 copies of its layers "
            "(`keras_attention.backend.precision.float32_copy(layer)`)."
        )
    # The generator's own models (the encoder's, the step's) are made by
    # `from_model`: in float32 too, whatever the global policy still is (a
    # script that trained under `mixed_float16` exports before resetting it).
    with policy_scope("float32"):
        copy = type(generator).from_model(
            float32_copy(model),
            generator.start_id,
            generator.end_id,
            max_source_length=generator.max_source_length,
            max_output_length=generator.max_output_length,
        )
    copy.source_spec = generator.source_spec
    return copy


def _all_layers(model):
    """The layers of `model`, and those of the models among them."""
    for layer in model.layers:
        yield layer
        if isinstance(layer, keras.Model):
            yield from _all_layers(layer)


def _float32_layer(layer):
    config = _float32_config(layer.get_config())
    return type(layer).from_config(config)


def _copy_weights(source, copy):
    """Copies `source`'s variables into `copy`'s, pairwise in order, after
    checking that they match (shape and path)."""
    theirs, ours = source.weights, copy.weights
    if len(theirs) != len(ours):
        raise ValueError(
            f"The float32 copy of {source.name!r} holds {len(ours)} variables where "
            f"the model holds {len(theirs)}: its layers create different variables "
            "under float32. Build the model again under float32 and copy the weights."
        )
    for old, new in zip(theirs, ours, strict=True):
        if tuple(old.shape) != tuple(new.shape):
            raise ValueError(
                f"The float32 copy of {source.name!r} has variable {new.path!r} of "
                f"shape {tuple(new.shape)} where {old.path!r} has {tuple(old.shape)}."
            )
        value = keras.ops.convert_to_numpy(old)
        if str(new.dtype).startswith("float"):
            value = value.astype(new.dtype)
        new.assign(value)


def _policy_name(value):
    """The policy name a config's `dtype` entry holds, or None."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "DTypePolicy" in str(value.get("class_name", "")):
        return value.get("config", {}).get("name")
    return None


def _walk_policies(value, name, found):
    """Calls `found((layer name, policy))` for each reduced dtype in a config."""
    if isinstance(value, dict):
        if value.get("class_name") == "__keras_tensor__":
            return  # a tensor between layers, whose dtype its layer's policy gives
        config = value.get("config") if isinstance(value.get("config"), dict) else value
        layer = config.get("name", name) if isinstance(config, dict) else name
        for key, item in value.items():
            policy = _policy_name(item) if key == "dtype" else None
            if policy is not None:
                if _is_reduced(policy):
                    found((layer, policy))
            else:
                _walk_policies(item, layer, found)
    elif isinstance(value, list | tuple):
        for item in value:
            _walk_policies(item, name, found)


def _is_reduced(policy):
    return policy.startswith("mixed_") or policy in _REDUCED


def _float32_config(value):
    """A config with every reduced `dtype` policy replaced by float32."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            policy = _policy_name(item) if key == "dtype" else None
            if policy is not None and _is_reduced(policy):
                out[key] = "float32"
            else:
                out[key] = _float32_config(item)
        return out
    if isinstance(value, list):
        return [_float32_config(item) for item in value]
    return value
