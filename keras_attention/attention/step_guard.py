"""No random draw inside an attention step: a probe that makes one an error.

A step runs inside a loop over time (a scan on JAX, a `while_loop` on
TensorFlow, a `WHILE` in an exported model). A draw there leaks a tracer on
JAX, makes the exported function stateful on TensorFlow (the export then fails
with messages that name neither the draw nor the step), and differs between
backends. The contract draws before the loop, in `step_noise`.

`no_random_draws(method, layer)` is a context manager around a probe: a call
of the step made to be checked and thrown away. The block runs inside a fresh
`keras.StatelessScope` that maps each variable of `layer` to its current value.
In such a scope Keras records every variable assignment instead of making it,
and every Keras draw advances a `SeedGenerator` by assigning its state: a
`Dropout` layer's, a `keras.random` call's with a generator as its seed, the
global generator's behind `seed=None`. After the block, a recorded assignment
to anything but one of the layer's weights is a draw, and raises
`RandomDrawInStepError` naming `method` and pointing to `step_noise`. On
PyTorch, where an unseeded dropout calls torch's own generator instead, the
states of torch's generators are compared too. Nothing the block assigns
survives it, so the probe leaves every random stream as it was, and Keras is
not changed at all: no function of `keras.random` is wrapped or replaced.

`BaseAttention` probes `step_weights` on zeros right after `build_score` (a
content-only layer probes its `score`: the rest of its step is the package's),
and `attend_step` probes `step_weights` on the step's own inputs whenever the
step is traced (a compiled loop: `fit` on JAX and TensorFlow, generation, the
export) and at its first eager call with each value of `training` (PyTorch,
eager calls). The probe reads the state of random generators, not the calls
that reach them, so it cannot see:

- a draw with an integer seed (`keras.random.normal(shape, seed=3)`): it
  advances no state (and gives the same numbers at every step and call);
- a draw that bypasses Keras on TensorFlow or JAX (`tf.random.*`,
  `jax.random.*` with a key of one's own, NumPy), and on PyTorch on a device
  other than the CPU or CUDA;
- a draw on a path the probes do not take: an eager call after the first one
  with the same `training` whose step draws only for some inputs or after a
  Python attribute changed, or a subclass whose `attend_step` does not call
  the base class's.
"""

import contextlib

import keras


class RandomDrawInStepError(RuntimeError):
    """A random number was drawn inside an attention step (see the module docstring)."""


@contextlib.contextmanager
def no_random_draws(method, layer):
    """Runs a probe of an attention step; raises `RandomDrawInStepError` if it drew.

    The block runs inside a `keras.StatelessScope`: what it assigns to any
    variable is discarded. Wrap a probe with it, never a call whose effects
    must last.

    Args:
        method: what runs inside, as the message names it
            (e.g. "MyAttention.step_weights").
        layer: the layer whose step runs inside (its variables keep their
            current values inside the block; its weights may be assigned).
    """
    variables = list({id(v): v for v in layer.variables}.values())
    weights = {id(w) for w in layer.weights}
    torch_states = _torch_generator_states()
    # The values as the caller's context reads them (a tracer inside JAX's
    # `fit`, a frozen constant inside the export), so the probe computes as
    # the step it checks.
    with keras.StatelessScope(state_mapping=[(v, v.value) for v in variables]) as scope:
        before = {id(v): scope.get_current_value(v) for v in variables}
        yield
    for v in variables:
        if id(v) not in weights and scope.get_current_value(v) is not before[id(v)]:
            raise _drew(method, f"it advanced {_random_state_name(layer, v)}")
    # Keras' global generator, behind a draw with seed=None, is no variable
    # of the layer: any assignment recorded beyond the mapped ones is a draw.
    if len(scope.state_mapping) > len(variables):
        raise _drew(
            method,
            "it advanced a random state the layer does not hold, such as Keras' "
            "global SeedGenerator, which a draw with seed=None uses",
        )
    after = _torch_generator_states()
    if any(not _same_torch_state(a, b) for a, b in zip(torch_states, after, strict=False)):
        raise _drew(
            method,
            "it advanced PyTorch's global generator, as a Dropout layer or "
            "keras.random.dropout without a seed does on PyTorch",
        )


def is_traced(tensor):
    """Whether `tensor` is traced into a compiled function (a JAX tracer, a
    TensorFlow graph), not computed at once. PyTorch computes at once."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        return not tf.executing_eagerly()
    if backend == "jax":
        import jax

        return isinstance(tensor, jax.core.Tracer)
    return False


def _drew(method, what):
    return RandomDrawInStepError(
        f"{method} drew random numbers inside an attention step ({what}). A step "
        "runs inside a loop over time (a scan on JAX, a while loop on TensorFlow, a "
        "WHILE in an exported model), where a draw leaks a tracer or makes the "
        "exported function stateful. Draw the numbers of every step before the "
        "loop: override `step_noise(shape, training)` to return them, (T_dec, batch, "
        "...), and read this step's slice as the `noise` argument of step_weights "
        "(docs/custom_attention.md, 'Random numbers: before the loop')."
    )


def _random_state_name(layer, variable):
    """The random state `variable` of `layer` in the words of the layer's code:
    the public attribute that holds its generator, else its path."""
    for name, value in vars(layer).items():
        if name.startswith("_"):
            continue
        if isinstance(value, keras.random.SeedGenerator) and value.state is variable:
            return f"the SeedGenerator `self.{name}`"
        if isinstance(value, keras.layers.Layer) and any(v is variable for v in value.variables):
            return f"the random state of `self.{name}` (a {type(value).__name__})"
    return f"the random state {variable.path!r}"


def _torch_generator_states():
    """The states of PyTorch's global generators (CPU, and CUDA once it is
    started); an empty list on another backend."""
    if keras.backend.backend() != "torch":
        return []
    import torch

    states = [torch.random.get_rng_state()]
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        states += torch.cuda.get_rng_state_all()
    return states


def _same_torch_state(a, b):
    import torch

    return torch.equal(a, b)
