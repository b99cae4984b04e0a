"""`EnsembleGenerator`: several trained generators decoding as one model.

A step function over the members' public `check_source`, `encode`, `step`
and `variables`, searched by a `StepSearch` as one `Seq2SeqGenerator` is.
"""

import math

from keras import ops

from keras_attention.generation.seq2seq_generator import Seq2SeqGenerator
from keras_attention.generation.step_search import Searching
from keras_attention.generation.step_search import StepSearch

# The members' states travel through the search as one flat dict, keyed
# "member{i}_{key}": a dict of named tensors is what the exports' `encode` and
# `decode_step` signatures take, one named input per entry.
_MEMBER_KEY = "member{}_{}"


class EnsembleGenerator(Searching):
    """Several `Seq2SeqGenerator`s of one target vocabulary decoding as one.

    At each step every member reads the same previous token and its own
    decoder state; the log-probability of the next token is the log of the
    mean of the members' probabilities,

        log p(y_t) = log (1/N) Σ_i softmax(logits_i)[y_t],

    so each member counts alike whatever its confidence (a mean of
    probabilities, not of logits), and the attention weights returned are
    the mean of the members'. Greedy and beam search are those of
    `Seq2SeqGenerator` (the same code, over this step), with the same
    arguments and results. An ensemble of one member decodes as that member.

    Args:
        generators: a list of at least one `Seq2SeqGenerator`, e.g. the same
            recipe trained with several seeds. They must share the target
            vocabulary (the number of logits per step, where known), `start_id`
            and `end_id`, and, where known, the shape and dtype of the source.
            Each may have its own encoder, decoder and attention.

    The source is checked by every member (each refuses an id outside its own
    source vocabulary); the bounds are the smallest of the members'
    (`max_source_length`, `max_output_length`). A source position counts as
    real (for an empty source and the coverage penalty) when any member's
    mask says so. The search's memory and time grow with the number of
    members.

    Example:

    ```python
    ensemble = EnsembleGenerator([generator_seed0, generator_seed1, generator_seed2])
    result = ensemble.beam(source_ids, beam_width=4)
    result["tokens"]      # (batch, L) int32, as Seq2SeqGenerator.beam
    ```

    Export: `keras_attention.export.export_saved_model` and `export_tflite`
    take an ensemble as they take one generator (float32 members; see
    docs/deploy.md, "Several models as one").

    Raises:
        ValueError: naming the argument and the member (`generators[i]`), for
            an empty list, a member that is not a `Seq2SeqGenerator`, or
            members that differ in target vocabulary size, `start_id`,
            `end_id` or source spec.
    """

    def __init__(self, generators):
        members = list(generators) if isinstance(generators, list | tuple) else None
        if not members:
            raise ValueError(
                "Invalid value for argument `generators`. Expected a list of at least "
                f"one Seq2SeqGenerator. Received: generators={generators!r}"
            )
        for i, member in enumerate(members):
            if not isinstance(member, Seq2SeqGenerator):
                raise ValueError(
                    "Invalid value for argument `generators`. Expected a list of "
                    f"Seq2SeqGenerator. Received: generators[{i}]={member!r}"
                )
        first = members[0]
        for name in ("start_id", "end_id", "target_vocabulary_size", "source_spec"):
            known = [(i, getattr(m, name)) for i, m in enumerate(members)]
            known = [(i, value) for i, value in known if value is not None]
            for i, value in known[1:]:
                if value != known[0][1]:
                    raise ValueError(
                        f"Invalid value for argument `generators`. Expected members with "
                        f"one {name}, as the ensemble decodes one output. Received: "
                        f"generators[{known[0][0]}].{name}={known[0][1]!r} and "
                        f"generators[{i}].{name}={value!r}"
                    )
        self.members = members
        self.start_id = first.start_id
        self.end_id = first.end_id
        self.max_source_length = min(m.max_source_length for m in members)
        self.max_output_length = min(m.max_output_length for m in members)
        self.source_spec = next((m.source_spec for m in members if m.source_spec), None)
        # The searches of one generator, over this ensemble's step.
        self.search = StepSearch(self)

    # ---------------------------------------------------------------- pieces

    @property
    def target_vocabulary_size(self):
        """The number of probabilities per step, or None when no member says."""
        sizes = [m.target_vocabulary_size for m in self.members]
        return next((s for s in sizes if s is not None), None)

    @property
    def source_vocabulary_size(self):
        """The smallest source vocabulary of the members (ids every member
        reads), or None when none says."""
        sizes = [m.source_vocabulary_size for m in self.members]
        sizes = [s for s in sizes if s is not None]
        return min(sizes) if sizes else None

    def check_source(self, source):
        """The source as every member checks it (each its own vocabulary and
        bound); the first member's converted copy."""
        checked = [m.check_source(source) for m in self.members]
        return checked[0]

    def encode(self, source):
        """source → `(decode_state, source_mask)`: every member's first state
        in one dict (keys "member{i}_{key}") and the bool mask (batch, S), True
        where any member reads the position."""
        state, mask = {}, None
        for i, member in enumerate(self.members):
            member_state, member_mask = member.encode(source)
            state.update({_MEMBER_KEY.format(i, k): v for k, v in member_state.items()})
            mask = member_mask if mask is None else ops.logical_or(mask, member_mask)
        return state, mask

    def step(self, tokens, state):
        """tokens (batch,), state → `(log_probs (batch, V), weights (batch,
        S), state)`: the log of the members' mean probabilities (float32,
        which the search's log-softmax leaves as they are up to rounding), and
        their mean attention."""
        log_probs, weights, new_state = [], [], {}
        for i, member in enumerate(self.members):
            prefix = _MEMBER_KEY.format(i, "")
            own = {k[len(prefix) :]: v for k, v in state.items() if k.startswith(prefix)}
            logits, member_weights, own = member.step(tokens, own)
            log_probs.append(ops.log_softmax(ops.cast(logits, "float32"), axis=-1))  # (B, V)
            weights.append(ops.cast(member_weights, "float32"))  # (B, S)
            # The entries a step leaves alone stay the same tensors, which the
            # TFLite export's `decode_step` tells apart from the ones it changes.
            new_state.update({prefix + k: v for k, v in own.items()})
        count = len(self.members)
        # log mean_i p_i = logsumexp_i(log p_i) - log N: stable where a member
        # gives a token a probability that underflows.
        mean_log_probs = ops.logsumexp(ops.stack(log_probs), axis=0) - math.log(count)  # (B, V)
        mean_weights = ops.mean(ops.stack(weights), axis=0)  # (B, S)
        return mean_log_probs, mean_weights, new_state

    def variables(self):
        """Every variable the members read (for compiling and export)."""
        seen = {}
        for member in self.members:
            for v in member.variables():
                seen.setdefault(id(v), v)
        return list(seen.values())

    def __repr__(self):
        return f"EnsembleGenerator({len(self.members)} members, end_id={self.end_id})"
