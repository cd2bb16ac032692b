"""Code space for estimates: a release's labels as integer codes, and query masks.

Each attribute's domain is the set of labels the release itself shows (every table
covers every row, so every value present appears), ordered numerically when all labels
are numbers, else as strings; a generalized marginal's QI domains are the ones its
manifest entry lists (docs/reference/release-format.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

Query = Mapping[str, frozenset[int]]
EST = "__est"


def sort_labels(labels: Iterable[object]) -> list[str]:
    out = sorted({str(v) for v in labels})
    try:
        return sorted(out, key=float)
    except ValueError:
        return out


def shown_labels(frame: pd.DataFrame, columns: Iterable[str]) -> dict[str, set]:
    """The labels `frame` shows in each of `columns` (nulls are not labels)."""
    out: dict[str, set] = {}
    for a in columns:
        col = frame[a]
        out[a] = set(
            col.cat.categories
            if isinstance(col.dtype, pd.CategoricalDtype)
            else col.dropna().unique()
        )
    return out


def to_codes(frame: pd.DataFrame, domains: Mapping[str, Sequence[str]]) -> pd.DataFrame:
    """Labels -> codes of `domains` (-1 for a label outside the domain or null)."""
    out = frame.copy()
    for a in frame.columns:
        if a in domains:
            out[a] = _label_codes(frame[a], domains[a])
    return out


def _label_codes(column: pd.Series, domain: Sequence[str]) -> np.ndarray:
    """One column's labels -> codes of `domain`: each distinct value is looked up once
    (a release's columns have few distinct values and come as categoricals), then one
    gather; a null (suppressed) value or a label outside `domain` is -1."""
    if isinstance(column.dtype, pd.CategoricalDtype):  # its codes as they are: 3x faster
        seen, values = column.cat.codes.to_numpy(), column.cat.categories
    else:
        seen, values = pd.factorize(column)  # nulls -> -1, the lookup's last entry
    lut = pd.Categorical([str(v) for v in values], categories=list(domain)).codes
    return np.append(lut.astype(np.int32), np.int32(-1))[seen]


def recoding(loaded, domains: Mapping[str, Sequence[str]]) -> dict[str, np.ndarray]:
    """Per attribute, a lookup from a loaded source's own codes to a release's codes."""
    return {
        a: pd.Categorical(
            list(loaded.dictionaries[a].labels), categories=list(domains[a])
        ).codes.astype(np.int32)
        for a in loaded.names
    }


def with_unpublished(domains: Mapping[str, list[str]], loaded) -> dict[str, list[str]]:
    """A release's `domains` and, for the attributes no table publishes (a marginal
    release), the loaded source's labels: the estimate is uniform over them."""
    unpublished = {a: list(loaded.dictionaries[a].labels) for a in loaded.names if a not in domains}
    return {**domains, **unpublished}


def source_codes(loaded, domains: Mapping[str, Sequence[str]]) -> pd.DataFrame:
    """A loaded source table (its own codes) recoded into a release's code space."""
    # new arrays, framed as they are (copy=False: not copied again into one block)
    return pd.DataFrame(
        {a: lut[loaded.data[a].to_numpy()] for a, lut in recoding(loaded, domains).items()},
        copy=False,
    )


def mask(frame: pd.DataFrame, query: Query) -> np.ndarray:
    """Rows meeting every condition on `frame`'s columns (a lookup table per attribute:
    no hashing, one gather per condition). Codes are -1 (suppressed, `to_codes`) or a
    domain's; -1 meets no condition: it reads the table's last cell, one past every
    code, which stays False, so a query for the largest code never counts suppressed rows
    (tested with `Estimator.counts`)."""
    m = np.ones(len(frame), dtype=bool)
    for a, values in query.items():
        if a in frame.columns:
            col = frame[a].to_numpy()
            lut = np.zeros(max(int(col.max(initial=0)), max(values, default=0)) + 2, dtype=bool)
            lut[list(values)] = True
            m &= lut[col]
    return m
