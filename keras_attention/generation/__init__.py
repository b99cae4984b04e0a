"""Generation with a trained model: reading its graph, the generator, the search,
several generators decoding as one (`EnsembleGenerator`), many sources
decoded in batches of similar length (`decode_batches`), and decoding while
the source arrives (`SimultaneousGenerator`)."""

from keras_attention.generation.decode_batches import decode_batches
from keras_attention.generation.ensemble import EnsembleGenerator
from keras_attention.generation.search import beam_search
from keras_attention.generation.search import greedy_search
from keras_attention.generation.simultaneous_generator import SimultaneousGenerator

__all__ = [
    "EnsembleGenerator",
    "SimultaneousGenerator",
    "beam_search",
    "decode_batches",
    "greedy_search",
]
