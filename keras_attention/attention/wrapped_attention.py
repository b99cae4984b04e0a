"""`WrappedAttention`: what a layer that wraps another attention layer shares.

`OverriddenAttention` (an ablation) and `WaitKAttention` (a read/write
schedule) each hold a trained or trainable attention layer and run it with
something changed. They read its sizes, build it, take its processed keys
and save it in their config alike: here, once.
"""

import keras


class WrappedAttention:
    """A mixin, before the attention base class: `class X(WrappedAttention,
    BaseAttention)`. The layer keeps the wrapped layer in `self.attention`
    and calls `self._read_sizes()` at the end of its `__init__`; its
    `get_config` adds `"attention": serialize_keras_object(self.attention)`.
    """

    def _read_sizes(self):
        # The sizes of the wrapped layer, None until it is built: a decoder
        # checks `query_dim` against its units.
        self.query_dim = self.attention.query_dim
        self.key_dim = self.attention.key_dim
        self.value_dim = self.attention.value_dim

    def build(self, query_shape, value_shape, key_shape=None):
        if not self.attention.built:
            self.attention.build(query_shape, value_shape, key_shape)
        self._read_sizes()
        self.built = True

    def precompute_keys(self, key):
        """The wrapped layer's processed keys."""
        return self.attention.precompute_keys(key)

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["attention"] = keras.saving.deserialize_keras_object(config["attention"])
        return cls(**config)
