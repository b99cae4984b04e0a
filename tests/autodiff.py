"""Gradients on whichever Keras backend runs the tests.

The layers are written with `keras.ops`; their gradient tests are written once
with `gradients` and run on TensorFlow, JAX and PyTorch alike (a `where` whose
other branch is NaN differentiates differently on each).
"""

import keras
import numpy as np


def gradients(loss_fn, inputs=(), variables=()):
    """d loss / d inputs and d loss / d variables, as numpy arrays.

    Args:
        loss_fn: `loss_fn(*inputs)` → a scalar tensor, written with `keras.ops`.
        inputs: numpy arrays; `loss_fn` gets them as backend tensors.
        variables: Keras variables that `loss_fn` reads.

    Returns:
        `(input_grads, variable_grads)`, two lists of numpy arrays; a gradient
        that does not depend on the loss is None on TensorFlow and PyTorch and
        zeros on JAX.
    """
    inputs = [np.asarray(x) for x in inputs]
    variables = list(variables)
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        tensors = [tf.constant(x) for x in inputs]
        with tf.GradientTape() as tape:
            tape.watch(tensors)
            loss = loss_fn(*tensors)
        grads = tape.gradient(loss, tensors + [v.value for v in variables])
    elif backend == "jax":
        import jax

        def stateless_loss(input_values, variable_values):
            mapping = list(zip(variables, variable_values, strict=True))
            with keras.StatelessScope(state_mapping=mapping):
                return loss_fn(*input_values)

        input_grads, variable_grads = jax.grad(stateless_loss, argnums=(0, 1))(
            [jax.numpy.asarray(x) for x in inputs], [v.value for v in variables]
        )
        grads = list(input_grads) + list(variable_grads)
    elif backend == "torch":
        import torch

        tensors = [keras.ops.convert_to_tensor(x).detach().requires_grad_(True) for x in inputs]
        loss = loss_fn(*tensors)
        grads = torch.autograd.grad(loss, tensors + [v.value for v in variables], allow_unused=True)
    else:
        raise NotImplementedError(f"No gradients for the Keras backend {backend!r}.")
    grads = [None if g is None else np.asarray(keras.ops.convert_to_numpy(g)) for g in grads]
    return grads[: len(inputs)], grads[len(inputs) :]
