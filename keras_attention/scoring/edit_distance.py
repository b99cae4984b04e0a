"""`edit_distance`: the Levenshtein distance behind error rates (PER, CER, WER)."""


def edit_distance(a, b):
    """The fewest insertions, deletions and substitutions (each costing 1)
    that turn sequence `a` into sequence `b`; symmetric. O(len(a) · len(b))
    time, O(len(b)) memory.

    Args:
        a: a sequence of comparable items (phones, characters, words).
        b: a sequence of items comparable with `a`'s.
    """
    previous = list(range(len(b) + 1))
    for i, x in enumerate(a, start=1):
        current = [i]
        for j, y in enumerate(b, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (x != y)))
        previous = current
    return previous[-1]
