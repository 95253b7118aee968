"""Expert row counts and offsets the grouped-GEMM GPU tests share: skewed
random counts, offsets from counts, and the clamp of docs/semantics.md."""


def skewed_counts(rng, experts, total, rate):
    counts = [0] * experts
    for _ in range(total):
        counts[min(int(rng.expovariate(rate)), experts - 1)] += 1
    return counts


def offsets_from(spec, experts, rows):
    """(offsets, M) from per-expert counts, or explicit offsets (E + 1 of
    them) with M = rows."""
    if len(spec) == experts + 1:
        return list(spec), rows
    offsets = [0]
    for c in spec:
        offsets.append(offsets[-1] + c)
    return offsets, offsets[-1]


def clamped_ranges(offsets, rows):
    """Expert row ranges after the clamp of docs/semantics.md."""
    ranges, end = [], min(max(offsets[0], 0), rows)
    for e in range(len(offsets) - 1):
        start = end
        end = min(max(offsets[e + 1], start), rows)
        ranges.append((start, end))
    return ranges
