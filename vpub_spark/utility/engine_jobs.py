"""The utility of a release measured where an engine's rows are (000 §5.1, §6.1): the
KL divergence (`Engine.release_kl`) and the exact answers of a query workload
(`Engine.count_cubes`, `count_matching`), the source read and counted by the engine
(`vpub utility --engine spark`); the release's estimates are computed here from its
models, as in process. `release_files` describes a release to the engine's jobs: its
files, its junction-tree terms and picklable makers of its estimate models."""

from __future__ import annotations

import time
from functools import partial

import numpy as np
import pyarrow.parquet as pq

from ..engines.base import Engine, LoadedTable, ReleaseFiles, utility_engine
from ..estimate.codes import EST, Query, recoding, with_unpublished
from ..estimate.models import AnatomyModel, ProjectionModel
from ..release.kinds import table_kind
from ..release.layout import TABLES, table_dir
from ..release.reader import ReleaseReader, open_release
from ..tablespec import table_spec_from_dict
from .evaluate import Utility
from .junction import log_terms
from .queries import CubeCounts, cubes, draw_workload, relative_errors
from .release_models import release_models

PER_FILE_KINDS = ("anatomy", "projection")
"""Table kinds whose estimates add up over their file sets (no group spans two files)."""


def release_files(rel: ReleaseReader, loaded: LoadedTable) -> ReleaseFiles:
    """`rel` as the engine's jobs read it, its models in `loaded`'s codes."""
    labels = {a: list(loaded.dictionaries[a].labels) for a in loaded.names}
    terms = log_terms([list(t["attributes"]) for t in rel.tables])
    per_file = all(t.get("kind") in PER_FILE_KINDS for t in rel.tables)
    return ReleaseFiles(
        path=str(rel.path),
        tables=tuple(rel.tables),
        size=sum(f.stat().st_size for f in rel.path.glob(f"{TABLES}/*/*/*.parquet")),
        terms=tuple((i, list(cols), sign) for i, cols, sign in terms),
        models=partial(_models, str(rel.path), labels),
        estimates=partial(_file_estimates, str(rel.path), labels) if per_file else None,
        part_dir=partial(table_dir, str(rel.path)),
    )


def _models(path: str, labels: dict[str, list[str]]) -> list:
    """The release's estimate models in the source's codes (in a task)."""
    return release_models(open_release(path), labels)[0]


def _file_estimates(
    path: str, labels: dict[str, list[str]], table: int, file: str, col_lists: list[list[str]]
) -> list[tuple]:
    """One file set of table `table`: per column list its keys and estimates (in a task)."""
    rel = open_release(path)
    entry = rel.tables[table]
    parts = {
        p: pq.read_table(rel.part_dir(entry["name"], p) / file).to_pandas() for p in entry["parts"]
    }
    model = table_kind(entry["kind"]).model(entry, parts, labels)  # in source codes
    assert isinstance(model, AnatomyModel | ProjectionModel)  # PER_FILE_KINDS
    out = []
    for cols in col_lists:
        est = model.estimates(cols)
        out.append((est, est[EST].to_numpy(np.float64)))
    return out


def engine_counts(engine: Engine, loaded: LoadedTable, luts, sizes) -> CubeCounts:
    """`CubeCounts` over a loaded source whose codes `luts` map to the release's."""
    measuring = utility_engine(engine)

    def exact(q: Query) -> int:  # a set too large for a cube: one filter per query
        codes = {
            a: [int(c) for c in np.flatnonzero(np.isin(luts[a], list(values)))]
            for a, values in q.items()
        }
        return measuring.count_matching(loaded, codes)

    return CubeCounts(
        sizes, partial(measuring.count_cubes, loaded, luts, sizes, cubes=cubes), exact
    )


def release_space(rel: ReleaseReader, loaded: LoadedTable):
    """The release's models and domains (attributes it leaves out: the source's), and
    the source's recoding into them and their sizes (`engine_counts`' arguments)."""
    models, domains = release_models(rel)
    domains = with_unpublished(domains, loaded)
    return models, domains, recoding(loaded, domains), {a: len(domains[a]) for a in loaded.names}


def engine_utility(
    engine: Engine, release: str, source: str, qd: int, p: float, queries: int, seed: int
) -> Utility:
    """`vpub utility` on an engine: the same figures as `evaluate`, the source read and
    counted by the engine."""
    rel = open_release(release)
    loaded = engine.persist(
        engine.load(source, table_spec_from_dict(rel.manifest["source"]["table_spec"]))
    )
    t0 = time.perf_counter()
    kl = utility_engine(engine).release_kl(loaded, release_files(rel, loaded))
    t1 = time.perf_counter()
    models, domains, luts, sizes = release_space(rel, loaded)
    wl = draw_workload(
        list(loaded.names),
        domains,
        qd,
        p,
        queries,
        seed,
        engine_counts(engine, loaded, luts, sizes),
    )
    errors = relative_errors(models, wl, loaded.rows, domains)
    t2 = time.perf_counter()
    return Utility.of(kl, errors, wl.redrawn, [t0, t1, t2])
