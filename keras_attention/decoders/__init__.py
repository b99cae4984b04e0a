"""The decoders that run an attention layer in their recurrence, over any Keras RNN cell.

`BahdanauDecoder` and `LuongDecoder` (one file each) subclass `BaseDecoder`,
which is composed of small parts: a `CellRunner` (`cell_runner.py`: the cell,
its state layout and the fused GRU/LSTM update), the loop of `call`
(`decoder_loop.py`) and the input checks (`decoder_checks.py`).
"""

__all__ = [
    "bahdanau_decoder",
    "base_decoder",
    "cell_runner",
    "decoder_checks",
    "decoder_loop",
    "luong_decoder",
    "overridden_decoder",
]
