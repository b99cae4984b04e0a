"""Greedy and beam-search decoding that runs inside the TensorFlow graph."""

from keras_attention.decoding.beam_search import beam_search
from keras_attention.decoding.greedy_search import greedy_search

__all__ = ["beam_search", "greedy_search"]
