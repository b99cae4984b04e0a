"""Measuring what a model produced, and showing it.

Modules: `edit_distance` (Levenshtein), `error_rates` (WER, PER, CER overall and by length),
`latency` (AP, AL and DAL of a simultaneous decoder's read/write trace) and `plots`
(attention heatmaps and lines; matplotlib, imported when a figure is drawn).

Import from the modules (`from keras_attention.scoring.edit_distance import ...`); the room
itself imports nothing, so that it costs nothing to import.
"""

__all__ = ["edit_distance", "error_rates", "latency", "plots"]
