"""The decoders that run an attention layer in their recurrence, over any Keras RNN cell."""
