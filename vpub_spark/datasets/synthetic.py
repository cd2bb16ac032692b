"""Deterministic synthetic microdata with realistic skew and dependence.

Each generator is a random Bayesian network drawn from the seed:
- attributes in schema order; attribute i gets up to two parents among the earlier ones;
- a root's distribution is Zipf-Mandelbrot, p(rank r) ∝ 1/(r + 4), over a seeded
  permutation of its values (skewed, but the large domains stay 10-eligible);
- a child's distribution depends on a context of its parents' values (hashed into at
  most 64 contexts), each context a Dirichlet draw around that Zipf base with total
  concentration 2·|domain| — so attributes are correlated, as in census data.
Rows are made in blocks of `BLOCK_ROWS`; block b uses the generator seeded with
(seed, b), so the data do not depend on how blocks are spread over Spark tasks.
Values are the integers 1..|domain| (000 Table 5's convention).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pyarrow as pa

from ..errors import SpecError
from ..model import Attribute, TableSpec

BLOCK_ROWS = 100_000
MAX_CONTEXTS = 64
DEPENDS_ON = 3  # `dependent`: the attributes the sensitive one may follow

# name -> ((attribute, domain size), ...); the last attribute is the usual sensitive one.
SCHEMAS: dict[str, tuple[tuple[str, int], ...]] = {
    # IPUMS SAL, 004 §9: Age, Gender, Marital-status, Birth-place, Education, Occupation, Race, Salary
    "sal": (
        ("age", 79),
        ("gender", 2),
        ("marital", 6),
        ("birthplace", 57),
        ("education", 17),
        ("occupation", 25),
        ("race", 8),
        ("salary", 50),
    ),
    # IPUMS OCC, 003 Table 8 (Occupation 50 values, sensitive) over SAL's other attributes
    "occ": (
        ("age", 79),
        ("gender", 2),
        ("marital", 6),
        ("birthplace", 57),
        ("education", 17),
        ("race", 8),
        ("salary", 50),
        ("occupation", 50),
    ),
    # Texas inpatient discharges, 000 Table 5b (18 attributes)
    "texas": (
        ("thcic", 323),
        ("gender", 2),
        ("pat_zip", 1581),
        ("county", 241),
        ("pat_age", 22),
        ("race", 5),
        ("ad_diag", 3391),
        ("prn_diag", 3488),
        ("diag1", 3881),
        ("diag2", 4193),
        ("diag3", 4251),
        ("p_icd9", 1708),
        ("hcfa_mdc", 24),
        ("hcfa_drg", 396),
        ("apr_drg", 297),
        ("rsk_mor", 6),
        ("and_md", 15000),
        ("surgeon", 17432),
    ),
    # CENSUS of 002 §4 (attributes of M1..M5: Age, Occupation, Gender, Education, Marital,
    # Race); domain sizes as in the CENSUS set of Xiao & Tao's m-invariance experiments.
    "census": (
        ("age", 79),
        ("gender", 2),
        ("education", 17),
        ("marital", 6),
        ("race", 9),
        ("work_class", 10),
        ("birthplace", 83),
        ("occupation", 50),
    ),
}


def schema(name: str) -> tuple[tuple[str, int], ...]:
    if name not in SCHEMAS:
        raise SpecError(f"unknown generator {name!r}; choose one of {', '.join(SCHEMAS)}")
    return SCHEMAS[name]


def arrow_schema(name: str) -> pa.Schema:
    """The schema of `generate_block`'s batches: one int32 column per attribute."""
    return pa.schema([(a, pa.int32()) for a, _ in schema(name)])


def table_spec(name: str) -> TableSpec:
    """The table spec of a generated data set: numeric attributes with values 1..|domain|."""
    return TableSpec(
        tuple(Attribute(a, "numeric") for a, _ in schema(name)), name=name, missing="reject"
    )


@dataclass(frozen=True)
class Node:
    domain: int
    parents: tuple[int, ...]
    hashes: tuple[np.ndarray, ...]  # per parent: value -> context offset
    contexts: int
    cdf: np.ndarray  # (contexts, domain), each row a CDF shifted by its row index
    top: int  # the value the Zipf base ranks first (0-based)


@lru_cache(maxsize=16)
def network(name: str, seed: int) -> tuple[Node, ...]:
    rng = np.random.default_rng([seed, 0x5EED])
    nodes = []
    for i, (_, d) in enumerate(schema(name)):
        k = int(rng.integers(0, min(i, 2) + 1))
        parents = tuple(sorted(int(p) for p in rng.choice(i, size=k, replace=False))) if k else ()
        space = int(np.prod([schema(name)[p][1] for p in parents])) if parents else 1
        contexts = min(MAX_CONTEXTS, space)
        hashes = tuple(rng.integers(0, contexts, size=schema(name)[p][1]) for p in parents)
        base = 1.0 / (np.arange(1, d + 1) + 4.0)
        base = base[rng.permutation(d)] / base.sum()
        probs = rng.dirichlet(base * 2.0 * d, size=contexts) if parents else base[None, :]
        cdf = np.cumsum(probs, axis=1)
        cdf /= cdf[:, -1:]
        cdf += np.arange(contexts)[:, None]
        nodes.append(Node(d, parents, hashes, contexts, cdf.ravel(), int(np.argmax(base))))
    return tuple(nodes)


def block_rows(rows: int, block: int) -> int:
    return max(0, min(BLOCK_ROWS, rows - block * BLOCK_ROWS))


def dependent(
    codes: list[np.ndarray], domain: int, seed: int, dependence: float, rng: np.random.Generator
) -> np.ndarray:
    """The last attribute with a share `dependence` of its rows replaced by a seeded
    function of the first `DEPENDS_ON` attributes (a knob for how strongly the
    QI determine the sensitive attribute; 0 leaves the network's draw as it is, 1 makes
    it a function of them). Decision: the first three in schema order (age, gender and
    education in census and sal), which every marginal of 002's M3..M5 holds, so the
    dependence shows within a marginal and not only across the whole table. The function
    maps those values through seeded random weights, so equal combinations get equal
    values."""
    used = codes[: min(DEPENDS_ON, len(codes) - 1)]
    weights = np.random.default_rng([seed, 0xDE9]).integers(1, 1 << 30, size=len(used))
    key = np.zeros(len(codes[-1]), dtype=np.int64)
    for c, w in zip(used, weights, strict=True):
        key = (key * 31 + c.astype(np.int64) * int(w)) % (1 << 31)
    chosen = rng.random(len(key)) < dependence
    return np.where(chosen, key % domain, codes[-1])


def with_top_share(
    values: np.ndarray, top: int, share: float, rng: np.random.Generator
) -> np.ndarray:
    """`values` with round(share * n) of its n rows holding `top`: rows of other values,
    chosen at random, turned into `top`, or rows of `top`, chosen at random, given the
    values of other rows drawn at random (so the other values keep their proportions
    and their dependence on the QI). A knob for how skewed the sensitive attribute is
    (a top share near 1/m leaves no m-eligible cut of the table)."""
    if not 0 < share < 1:
        raise SpecError(f"the top share must be in (0, 1), not {share}")
    out = np.asarray(values).copy()
    is_top = out == top
    want, have = int(round(share * len(out))), int(is_top.sum())
    if want > have:
        out[rng.choice(np.flatnonzero(~is_top), want - have, replace=False)] = top
    elif want < have:
        others = out[~is_top]
        if not len(others):
            raise SpecError(f"every row holds the top value; a share of {share} cannot be made")
        out[rng.choice(np.flatnonzero(is_top), have - want, replace=False)] = rng.choice(
            others, have - want
        )
    return out


def generate_block(
    name: str,
    seed: int,
    rows: int,
    block: int,
    dependence: float = 0.0,
    top_share: float | None = None,
) -> pa.RecordBatch:
    """Rows [block·BLOCK_ROWS, ...) of the `rows`-row data set `name` (vectorized); with
    `dependence` > 0 the last attribute follows the QI (`dependent`); with `top_share`
    its most likely value holds that share of every block's rows (`with_top_share`)."""
    n = block_rows(rows, block)
    rng = np.random.default_rng([seed, block])
    nodes = network(name, seed)
    codes: list[np.ndarray] = []
    for node in nodes:
        ctx = np.zeros(n, dtype=np.int64)
        for p, h in zip(node.parents, node.hashes, strict=True):
            ctx += h[codes[p]]
        ctx %= node.contexts
        u = rng.random(n) + ctx
        value = np.searchsorted(node.cdf, u, side="right") - ctx * node.domain
        codes.append(np.clip(value, 0, node.domain - 1))
    if dependence > 0:  # its own random stream: dependence 0 gives the same data as before
        codes[-1] = dependent(
            codes, nodes[-1].domain, seed, dependence, np.random.default_rng([seed, block, 0xDE9])
        )
    if top_share is not None:  # its own stream too
        rng_top = np.random.default_rng([seed, block, 0x7095])
        codes[-1] = with_top_share(codes[-1], nodes[-1].top, top_share, rng_top)
    names = [a for a, _ in schema(name)]
    return pa.RecordBatch.from_arrays(
        [pa.array((c + 1).astype(np.int32)) for c in codes], names=names
    )


def blocks(rows: int) -> int:
    return -(-rows // BLOCK_ROWS)
