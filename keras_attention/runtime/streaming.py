"""Running a simultaneous decoder's TFLite model (`export_simultaneous_tflite`):
`SimultaneousLite`, the app's side of the streaming loop.

The model holds no state: the app carries the stream's state, a dict of
tensors, through the signatures `start`, `read` and `write`, merging each
call's outputs into it. `SimultaneousLite` does that, keeps the read/write
trace as `SimultaneousStream` does ("R" per read, "W" per write), and decodes
a whole source as if it arrived one token at a time (`translate`).

Needs numpy and `ai-edge-litert` (or an interpreter the app made), and imports
nothing of the package, so an app can load this file by its path.
"""

import numpy as np

READ = "R"
WRITE = "W"
# What `write` answers when it writes nothing (never an id).
NO_TOKEN = -1
# The outputs that are answers, not state entries.
_ANSWERS = ("accepted", "token", "weights", "log_prob")


class SimultaneousLite:
    """One stream at a time through a simultaneous decoder's TFLite model.

    Args:
        model: the `.tflite` file's path, or a LiteRT `Interpreter` of it
            (`ai_edge_litert.interpreter.Interpreter`) the app made.

    Attributes:
        state: the stream's state (name → numpy array), as the model left it.
        tokens: the tokens written (END included).
        actions: the trace, one "R" per accepted read, one "W" per write.
        attention: the weights (W,) of each written token.
        log_prob: the sum of the written tokens' log-probabilities.
        width: W, the most source tokens a stream holds.
    """

    def __init__(self, model):
        interpreter = model
        if not hasattr(model, "get_signature_runner"):
            from ai_edge_litert.interpreter import Interpreter

            interpreter = Interpreter(model_path=str(model))
        signatures = interpreter.get_signature_list()
        missing = {"start", "read", "write"} - set(signatures)
        if missing:
            raise ValueError(
                "Invalid value for argument `model`. Expected a model of "
                "`export_simultaneous_tflite` (signatures start, read, write); it lacks "
                f"{sorted(missing)}. Its signatures: {sorted(signatures)}"
            )
        self.interpreter = interpreter
        self._start = interpreter.get_signature_runner("start")
        self._read = interpreter.get_signature_runner("read")
        self._write = interpreter.get_signature_runner("write")
        self.width = int(self._read.get_input_details()["source"]["shape"][1])
        self.reset()

    def reset(self):
        """Starts a new, empty stream."""
        self.state = dict(self._start())
        self.tokens = []
        self.actions = ""
        self.attention = []
        self.log_prob = 0.0
        self.source_ended = False

    @property
    def done(self):
        """Whether the output is done: END written, the bound reached, or the
        source ended empty."""
        return bool(self.state["done"][0])

    @property
    def read_count(self):
        return int(self.state["read_count"][0])

    def read(self, token):
        """Reads the next source token; returns whether the model accepted it.

        False, and nothing changed, for a token outside [1, source
        vocabulary) or a stream that holds `width` tokens already.

        Raises:
            ValueError: the source has ended (`end_source`), as the Keras
                stream's `read`.
        """
        if self.source_ended:
            raise ValueError("The source has ended: `read` after `end_source`.")
        outputs = self._read(token=np.asarray([token], np.int32), **self.state)
        accepted = bool(outputs["accepted"][0])
        self._merge(outputs)
        if accepted:
            self.actions += READ
        return accepted

    def end_source(self):
        """Says the source is whole: from now on every `write` writes (until done)."""
        self.source_ended = True

    def write(self):
        """Writes the next token: the id, or None (read first, or done)."""
        ended = np.asarray([self.source_ended])
        outputs = self._write(source_ended=ended, **self.state)
        token = int(outputs["token"][0])
        self._merge(outputs)
        if token == NO_TOKEN:
            return None
        self.tokens.append(token)
        self.actions += WRITE
        self.attention.append(np.asarray(outputs["weights"][0]))
        self.log_prob += float(outputs["log_prob"][0])
        return token

    def translate(self, source):
        """Decodes a whole source as if it arrived one token at a time.

        Args:
            source: token ids (no padding 0).

        Returns:
            `(tokens, actions)`: the tokens written, END included, and the
            read/write trace.

        Raises:
            ValueError: the model refused a token (outside the vocabulary, or
                past `width`): named with its position.
        """
        self.reset()
        for position, token in enumerate(source):
            if not self.read(int(token)):
                raise ValueError(
                    f"The model refused source token {int(token)} at position {position}: "
                    f"ids must be in [1, source vocabulary) and at most width={self.width} "
                    "tokens are read."
                )
            while not self.done and self.write() is not None:
                pass
        self.end_source()
        while not self.done:
            self.write()
        return tuple(self.tokens), self.actions

    def _merge(self, outputs):
        for name, value in outputs.items():
            if name not in _ANSWERS:
                self.state[name] = value
