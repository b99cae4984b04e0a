"""Serializable Bahdanau and Luong attention for Keras 3."""

from keras_attention.bahdanau_attention import BahdanauAttention
from keras_attention.bahdanau_decoder import BahdanauDecoder
from keras_attention.base_attention import BaseAttention
from keras_attention.base_decoder import BaseDecoder
from keras_attention.luong_attention import LuongAttention
from keras_attention.luong_decoder import LuongDecoder
from keras_attention.masked_softmax import MaskedSoftmax
from keras_attention.masking import masked_softmax

__version__ = "0.1.0"

__all__ = [
    "BahdanauAttention",
    "BahdanauDecoder",
    "BaseAttention",
    "BaseDecoder",
    "LuongAttention",
    "LuongDecoder",
    "MaskedSoftmax",
    "masked_softmax",
]
