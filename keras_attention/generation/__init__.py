"""Generation with a trained model: reading its graph, the generator, the search,
and several generators decoding as one (`EnsembleGenerator`)."""

from keras_attention.generation.ensemble import EnsembleGenerator
from keras_attention.generation.search import beam_search
from keras_attention.generation.search import greedy_search

__all__ = ["EnsembleGenerator", "beam_search", "greedy_search"]
