"""Greedy and beam-search decoding inside the graph, on every Keras backend."""

from keras_attention.decoding.beam_search import beam_search
from keras_attention.decoding.greedy_search import greedy_search

__all__ = ["beam_search", "greedy_search"]
