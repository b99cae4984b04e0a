"""The attention layers: the contract every mechanism fills (`BaseAttention`) and the mechanisms."""
