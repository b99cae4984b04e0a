"""Training past one device with TensorFlow's own `tf.distribute`.

`make_strategy("mirrored")` replicates the model on the local devices (GPUs,
or CPUs made into logical devices); `make_strategy("multi-worker")` runs one
process per machine, each told the cluster through the `TF_CONFIG` environment
variable (see docs/distributed.md). Batches are given per replica; the global
batch is `per_replica_batch * strategy.num_replicas_in_sync`.
"""

import json
import os
from pathlib import Path

import tensorflow as tf

STRATEGIES = ("one-device", "mirrored", "multi-worker")


def make_strategy(name="one-device"):
    """The `tf.distribute.Strategy` called `name` (one of `STRATEGIES`)."""
    if name == "one-device":
        return tf.distribute.get_strategy()  # the default, no-op strategy
    if name == "mirrored":
        return tf.distribute.MirroredStrategy()
    if name == "multi-worker":
        if "TF_CONFIG" not in os.environ:
            raise ValueError(
                "Invalid value for argument `strategy`. 'multi-worker' needs the "
                "TF_CONFIG environment variable describing the cluster, e.g. "
                '{"cluster": {"worker": ["host1:12345", "host2:12345"]}, '
                '"task": {"type": "worker", "index": 0}}. Received: no TF_CONFIG'
            )
        return _MultiWorkerMirroredStrategy()
    raise ValueError(
        f"Invalid value for argument `strategy`. Expected one of {STRATEGIES}. "
        f"Received: strategy={name!r}"
    )


class _MultiWorkerMirroredStrategy(tf.distribute.MultiWorkerMirroredStrategy):
    """`MultiWorkerMirroredStrategy` whose `reduce` accepts what Keras 3 asks.

    Keras 3's `fit` (TensorFlow backend) makes two calls that
    `MirroredStrategy` accepts and the multi-worker strategy does not:

    - it reduces its first input batch, a nest of per-replica tensors, in one
      call, to learn the input shapes. `MirroredStrategy` maps over the nest;
      this one fails with "Attempt to convert a value (PerReplica...) to a
      Tensor". Mapped here: one all-reduce per input tensor, on every worker.
    - it reduces each step's metric results, scalars, with `axis=0`, which
      fails with "Invalid reduction dimension 0 for input with 0
      dimensions". A scalar has no axis to average over; it is reduced
      across replicas only (`axis=None`), the mean over all workers.
    """

    def reduce(self, reduce_op, value, axis):
        parent = super()

        def reduce_one(v):
            local = v.values[0] if isinstance(v, tf.distribute.DistributedValues) else v
            scalar = tf.convert_to_tensor(local).shape.rank == 0
            return parent.reduce(reduce_op, v, None if scalar else axis)

        return tf.nest.map_structure(reduce_one, value)


def task_index():
    """This worker's index in TF_CONFIG (0 without a cluster)."""
    config = json.loads(os.environ.get("TF_CONFIG", "{}"))
    return int(config.get("task", {}).get("index", 0))


def is_chief():
    """Whether this process writes the run's files (worker 0, or no cluster)."""
    config = json.loads(os.environ.get("TF_CONFIG", "{}"))
    task = config.get("task", {})
    return task.get("type", "worker") == "chief" or (
        task.get("type", "worker") == "worker"
        and task_index() == 0
        and "chief" not in config.get("cluster", {})
    )


def worker_run_dir(run_dir):
    """The folder this process writes to: the run folder for the chief, a
    private sub-folder for the other workers (they must still save, since
    saving is collective, but must not overwrite the chief's files)."""
    run_dir = Path(run_dir)
    return run_dir if is_chief() else run_dir / f"worker_{task_index()}"


def shard_by_data(dataset):
    """Shards an in-memory dataset across workers element by element.

    The pipeline slices tensors held in memory, not files, so the default
    FILE auto-shard policy cannot apply; DATA gives each worker its own
    part of every global batch.
    """
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return dataset.with_options(options)
