"""m-invariant marginals across a release, from its files (002 Theorems 3-4): every
table a generalized marginal of one sensitive attribute, and the same multiset of group
signatures in every marginal, compared exactly and without a Python loop per group."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...kernels.arrays import lex_order
from ...model import PublishedTable
from ..layout import GROUP
from ..reader import ReleaseReader
from .checks import Checker


def invariance_checks(rel: ReleaseReader, tables: list[PublishedTable], check: Checker) -> None:
    """m-invariant marginals (002 Theorems 3-4) are not judged by GNF (000), which would
    flag any two tables sharing the sensitive attribute: they are safe together because
    every tuple keeps its signature. From the files: every table is a generalized
    marginal of one sensitive attribute, and every marginal shows the same multiset of
    group signatures (a bucket with c tuples per value becomes c groups with its
    signature in every marginal). Which tuple has which signature is checked by the
    private audit (`vpub audit --state`)."""
    kinds = {t.kind for t in tables}
    sens = {t.sensitive for t in tables}
    check(
        "m-invariance: one sensitive attribute, generalized marginals",
        kinds == {"generalized"} and len(sens) == 1,
        f"kinds {sorted(kinds)}, sensitive {sorted(map(str, sens))}",
    )
    if kinds != {"generalized"} or len(sens) != 1:
        return
    s = str(next(iter(sens)))
    sts = {t.name: rel.read(t.name, "st", [GROUP, s]) for t in tables}
    labels = sorted({str(v) for st in sts.values() for v in _dictionary(st[s]).to_pylist()})
    rank = {v: i for i, v in enumerate(labels)}  # sorting by rank = sorting the labels
    multisets = {name: signature_counts(st, s, rank) for name, st in sts.items()}
    first = next(iter(multisets.values()))
    differ = [n for n, v in multisets.items() if not _same(v, first)]
    check(
        "m-invariance: the same signatures in every marginal",
        not differ,
        f"{len(first)} distinct signatures in {len(tables)} marginals"
        if not differ
        else f"{', '.join(differ)} differ from {tables[0].name}",
    )


def _dictionary(column: pa.ChunkedArray) -> pa.Array:
    return pc.dictionary_encode(column.combine_chunks()).dictionary


def signature_counts(st: pa.Table, s: str, rank: dict[str, int]) -> tuple[np.ndarray, ...]:
    """A marginal's multiset of group signatures (each group's sensitive labels, sorted,
    as ranks in `rank`; one ST row, one label): the distinct signatures, each as a row
    of int64 words packing its ranks in mixed radix (padded), sorted, and how many
    groups show each. Vectorized and exact: two marginals with the same multiset give
    equal results, with different ones different results."""
    encoded = pc.dictionary_encode(st[s].combine_chunks())
    ranks = np.array([rank[str(v)] for v in encoded.dictionary.to_pylist()] + [-2], np.int64)
    index = encoded.indices.fill_null(len(ranks) - 1).to_numpy(zero_copy_only=False)
    value = ranks[index.astype(np.int64)]
    group = st[GROUP].combine_chunks().fill_null(-1).to_numpy(zero_copy_only=False)
    order = lex_order([group.astype(np.int64) + 1, value + 2])  # ids >= -1, ranks >= -2
    group, value = group[order], value[order]
    if not len(group):
        return np.zeros((0, 0), np.int64), np.zeros(0, np.int64)
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    sizes = np.diff(np.r_[starts, len(group)])
    width, radix = int(sizes.max()), len(rank) + 2  # ranks -2 (a null), -1 (padding), 0..
    matrix = np.full((len(starts), width), -1, np.int64)
    owner = np.repeat(np.arange(len(starts)), sizes)
    matrix[owner, np.arange(len(group)) - starts[owner]] = value
    per_word = max(1, int(62 // np.log2(radix)))  # ranks packed into each int64 word
    words = []
    for at in range(0, width, per_word):
        word = np.zeros(len(starts), np.int64)
        for column in (matrix[:, at : at + per_word] + 2).T:
            word = word * radix + column
        words.append(word)
    order = lex_order(words) if len(words) == 1 else np.lexsort(words[::-1])
    packed = np.stack([w[order] for w in words], axis=1)
    new = np.r_[True, (packed[1:] != packed[:-1]).any(axis=1)]
    first = np.flatnonzero(new)
    return packed[first], np.diff(np.r_[first, len(packed)])


def _same(a: tuple[np.ndarray, ...], b: tuple[np.ndarray, ...]) -> bool:
    return all(x.shape == y.shape and bool((x == y).all()) for x, y in zip(a, b, strict=True))
