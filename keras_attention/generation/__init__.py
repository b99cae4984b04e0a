"""Generation with a trained model: reading its graph, the generator, the search."""

from keras_attention.generation.search import beam_search
from keras_attention.generation.search import greedy_search

__all__ = ["beam_search", "greedy_search"]
