"""Utility of a committed release against its source: KL divergence and the relative
error of a random query workload (000 §5.1, §6.1). The source is read with the table
spec the manifest records (in-process engine)."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from ..engines.inprocess import InProcessEngine
from ..engines.pool import MIN_ROWS
from ..estimate.codes import source_codes, with_unpublished
from ..release.reader import open_release
from ..tablespec import table_spec_from_dict
from .kl import kl_divergence
from .queries import Workload, relative_errors, workload
from .release_models import release_models


@dataclass(frozen=True)
class Utility:
    kl: float
    mean_relative_error: float
    median_relative_error: float
    queries: int
    redrawn: int
    kl_seconds: float
    queries_seconds: float
    errors: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False, compare=False)
    """Each query's relative error, in the workload's order (the report's histogram)."""

    @classmethod
    def of(cls, kl: float, errors: np.ndarray, redrawn: int, times: list[float]) -> Utility:
        """The figures from the KL, the workload's relative errors and its redrawn
        queries, timed by `times` (start, KL done, workload done)."""
        t0, t1, t2 = times
        return cls(
            kl,
            float(errors.mean()),
            float(np.median(errors)),
            len(errors),
            redrawn,
            t1 - t0,
            t2 - t1,
            np.asarray(errors, dtype=float),
        )


def load_release_and_source(release: str, source: str):
    rel = open_release(release)
    models, domains = release_models(rel)
    domains, codes = load_source(rel, source, domains)
    return rel, models, domains, codes


def load_source(rel, source: str, domains: dict[str, list[str]], engine=None):
    """The source, loaded in process (by `engine`, default a new in-process one) and
    coded in the release's code space (`domains`; attributes no table publishes, in a
    marginal release, are uniform over the source's labels, added to the domains
    returned)."""
    loaded = (engine or InProcessEngine()).load(
        source, table_spec_from_dict(rel.manifest["source"]["table_spec"])
    )
    domains = with_unpublished(domains, loaded)
    return domains, source_codes(loaded, domains)


def evaluate(
    release: str, source: str, qd: int = 3, p: float = 0.4, queries: int = 1000, seed: int = 0
) -> Utility:
    """`vpub utility`: KL divergence and a random workload's relative errors (000 §6.1).

    Args:
        release: the release's directory.
        source: the source it was published from, read with the manifest's table spec.
        qd: attributes per query; p: the share of each attribute's values a query holds.
        queries: the workload's size; seed: the workload's seed (public: it draws queries).

    Returns:
        The figures (`Utility`).
    """
    _, models, domains, src = load_release_and_source(release, source)
    return evaluate_loaded(models, domains, src, qd, p, queries, seed)


def evaluate_loaded(models, domains, src, qd: int, p: float, queries: int, seed: int) -> Utility:
    """`evaluate` of a release's models and its source's codes already read. From
    `MIN_ROWS` source rows the workload's exact answers are counted on a thread beside
    the KL (they read the source alone; the 10M `sal` report's owner measures: KL 4.2-4.7
    s, then the workload 2.1-2.4 s, against both in 5.6-6.0 s, while the audit ran beside
    them). `kl_seconds` is the KL's time and `queries_seconds` the workload's own (its
    answers counted, then its errors), beside the KL or after it.

    Args:
        models: the release's estimate models; domains: its code space per attribute.
        src: the source's codes in that space; qd, p, queries, seed: the workload's
            (`evaluate`'s).

    Returns:
        The figures (`Utility`).
    """

    def answer() -> tuple[Workload, float]:
        t = time.perf_counter()
        return workload(src, domains, qd, p, queries, seed), time.perf_counter() - t

    t0 = time.perf_counter()
    with ThreadPoolExecutor(1) as beside:  # a thread starts only when submitted to
        answered = beside.submit(answer) if len(src) >= MIN_ROWS else None
        kl = kl_divergence(models, src, domains)
        t1 = time.perf_counter()
        wl, answering = answered.result() if answered is not None else answer()
    t = time.perf_counter()
    errors = relative_errors(models, wl, len(src), domains)
    done = t1 + answering + time.perf_counter() - t
    return Utility.of(kl, errors, wl.redrawn, [t0, t1, done])
