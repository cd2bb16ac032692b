"""The public API, for a notebook or an orchestrator task: publish, open, query and audit
releases without the command line (docs/how-to/python-api.md). Everything here is
re-exported at the package's top level (`vpub_spark.publish`, ...); the modules below it
are internal."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from .config import (
    PublishConfig,
    config_from_dict,
    load_config,
    privacy_section,
    rules_section,
    with_overrides,
)
from .errors import SpecError

if TYPE_CHECKING:
    from .statdb.db import StatDB
    from .utility.check import CheckReport
from .release.audit.checks import AuditReport


@dataclass(frozen=True)
class Release:
    """A committed release, read from its files: what `publish` returns and
    `open_release` opens.

    Attributes:
        path: the release's directory (a URI for one on an object store).
        manifest: its manifest (tables, privacy, rules, lineage, checksums).
        timings: the seconds of each publishing step (empty for an opened release).
    """

    path: str
    manifest: dict
    timings: Mapping[str, float] = field(default_factory=dict)

    @cached_property
    def _files(self):
        from .release.reader import open_release as open_files

        return open_files(self.path)

    @property
    def tables(self) -> list[str]:
        """The names of its tables, in manifest order."""
        return [str(t["name"]) for t in self.manifest["tables"]]

    def audit(self, source: str | None = None) -> AuditReport:
        """Re-check the release from its files alone (`vpub audit`).

        Args:
            source: the source data, to compare every table with it too.

        Returns:
            The audit's report (`.passed`, `.failures`, `.checks`).
        """
        from .release.audit.release import audit_release

        return audit_release(self.path, source=source)

    def query(self, where: str) -> float:
        """The estimated `COUNT(*) WHERE <where>` of the source, from the release alone
        (`vpub query`).

        Args:
            where: a condition in the release's labels, e.g. `age between 30 and 40 and
                sex = 'F'` (docs/reference/query-grammar.md).

        Returns:
            The estimate.

        Raises:
            SpecError: the condition does not parse or names no published attribute.
        """
        from .utility.queries import estimate_count
        from .utility.release_models import release_models
        from .utility.where import parse_where

        models, domains = release_models(self._files)
        rows = int(self.manifest["source"]["rows"])
        return float(estimate_count(models, parse_where(where, domains), rows, domains))

    def to_arrow(self, table: str, part: str | None = None) -> pa.Table:
        """One table's files as Arrow (its first part when `part` is not given: an
        anatomy table's `qit`, a projection's `counts`; `st` for its sensitive table).

        Raises:
            SpecError: no such table or part.
        """
        entry = next((t for t in self.manifest["tables"] if t["name"] == table), None)
        if entry is None:
            raise SpecError(f"no table {table!r} in this release; it has {', '.join(self.tables)}")
        parts = list(entry.get("parts") or {})
        chosen = part or (parts[0] if parts else "")
        if chosen not in parts:
            raise SpecError(f"table {table} has no part {chosen!r}; it has {', '.join(parts)}")
        return self._files.read(table, chosen)

    def to_pandas(self, table: str, part: str | None = None):
        """`to_arrow` as a pandas DataFrame."""
        return self.to_arrow(table, part).to_pandas()


def open_release(path: str | Path) -> Release:
    """Open a committed release, as `vpub query` and `vpub audit` do.

    Args:
        path: its directory, or an `s3://` URI.

    Returns:
        The release (its manifest read; tables read when asked for).

    Raises:
        VpubError: not a committed release, or unreadable.
    """
    from .release.reader import open_release as open_files

    files = open_files(path)
    release = Release(str(path), files.manifest)
    release.__dict__["_files"] = files  # the reader just opened, kept (`_files` is cached)
    return release


def publish(
    source: Any,
    *,
    rules: Any = None,
    privacy: Mapping[str, Any] | int | None = None,
    method: str | None = None,
    output: str | Path | None = None,
    release_id: str | None = None,
    engine: str | None = None,
    table: str | Path | Mapping[str, Any] | None = None,
    seed: int | None = None,
    overwrite: bool = False,
) -> Release:
    """Publish a release, as `vpub publish` does, and return it.

    Args:
        source: a job config (a YAML file's path, a mapping as the YAML reads, or a
            `PublishConfig`), the data to publish (a CSV or Parquet file or directory,
            or a data set written by `vpub datasets`), or the rows as a frame: a pandas
            DataFrame or pyarrow Table (in process unless `engine="spark"`), or a
            pyspark DataFrame (on its own session).
        rules: privacy rules (`["a, b -> s", ...]` or `{"random": {"c": 5}}`): with data.
        privacy: the privacy model (`{"l": 5}`, `{"model": "m-invariance", "m": 4}`) or
            just l.
        method: `uad`, `gd`, `marginals`, ... (docs/reference/config.md).
        output: the output root; release_id: the release's directory name in it.
        engine: `auto`, `inprocess` or `spark`.
        table: a table-spec YAML or a preset name, for data without its `table.yaml`;
            for a frame, per column, attribute options replacing the inferred ones
            (`{"age": {"bins": [[0, 29], [30, 120]]}}`).
        seed: an explicit seed (reproducible; keep it private); default: a secret one.
        overwrite: replace a committed release with the same id.

    Returns:
        The committed, audited release.

    Raises:
        VpubError: a config or rule that is wrong or cannot be met, data that do not fit,
            a frame column of a type that cannot be an attribute, an output that cannot
            be written (nothing is left half-written).
    """
    from .frames import is_frame

    shape = (rules, privacy, method, output, table)
    given = {"release_id": release_id, "engine": engine, "seed": seed, "overwrite": overwrite}
    return (_publish_frame if is_frame(source) else _publish_source)(source, shape, given)


def _publish_source(source, shape: tuple, given: dict) -> Release:
    """`publish` of a config or a path, on the engine the config chooses."""
    from .engines import engine_for
    from .engines.settings import SparkSettings
    from .publishing.pipeline import publish as run
    from .storage import local_path

    cfg = with_overrides(_config(source, *shape), **given)
    where = local_path(cfg.input_path)
    chosen, _ = engine_for(cfg.engine, SparkSettings.load(cfg.spark), where, cfg.workers)
    result = run(replace(cfg, engine=chosen.name), chosen)
    return Release(str(result.path), result.manifest, dict(result.timings))


def _publish_frame(data, shape: tuple, given: dict) -> Release:
    """`publish` of a frame: its spec inferred (`frames.frame_input`); a Spark
    DataFrame on its own session, an Arrow or pandas frame in process unless
    `engine="spark"`."""
    from .engines import make_engine, session_engine
    from .engines.settings import SparkSettings
    from .frames import frame_input
    from .publishing.pipeline import publish as run

    rules, privacy, method, output, table = shape
    if table is not None and not isinstance(table, Mapping):
        raise SpecError("table: for a frame, a mapping of columns to attribute options")
    frame = frame_input(data, table)
    if frame.on_spark and given["engine"] == "inprocess":
        raise SpecError("a Spark DataFrame is published on its session: engine spark")
    d: dict[str, Any] = {"input": {"path": frame.name}}
    d |= {"rules": rules} if rules is not None else {}
    cfg = _config(d, None, privacy, method, output, None)
    name = "spark" if frame.on_spark or given["engine"] == "spark" else "inprocess"
    cfg = with_overrides(cfg, **(given | {"engine": name}))
    chosen = (
        session_engine(data.sparkSession)
        if frame.on_spark
        else make_engine(cfg.engine, SparkSettings.load(cfg.spark), cfg.workers)
    )
    result = run(cfg, chosen, frame=frame)
    return Release(str(result.path), result.manifest, dict(result.timings))


def _config(source, rules, privacy, method, output, table) -> PublishConfig:
    """The job config `publish` runs: `source`'s, or one built around data."""
    if isinstance(source, PublishConfig):
        cfg = source
    elif isinstance(source, Mapping):
        cfg = config_from_dict(dict(source), "the config")
    elif str(source).endswith((".yaml", ".yml")):
        cfg = load_config(source)
    else:
        d: dict[str, Any] = {"input": {"path": str(source)}}
        if table is not None:
            d["input"]["table"] = table
        d |= {"rules": rules} if rules is not None else {}
        return _config(d, None, privacy, method, output, None)
    if privacy is not None:
        section = {"l": privacy} if isinstance(privacy, int) else dict(privacy)
        cfg = replace(cfg, privacy=privacy_section(section))
    if rules is not None:
        cfg = replace(cfg, rules=rules_section(rules))
    return with_overrides(
        cfg,
        method=method,
        output_path=None if output is None else str(output),
        table=table,
    )


def check(
    data: Any,
    *,
    qi: list[str] | str,
    sa: str,
    model: str | None = None,
    ordered: bool = False,
    engine: str = "inprocess",
    weight: str | None = None,
) -> CheckReport:
    """Measure a table's privacy as it stands (k, distinct, entropy and recursive l, t)
    and check it against a model, as `vpub check` does.

    Args:
        data: a CSV or Parquet file or directory, or a frame: a pandas DataFrame, a
            pyarrow Table, or a pyspark DataFrame (checked on its session).
        qi: the quasi-identifiers (a list, or `"age, sex"`).
        sa: the sensitive attribute.
        model: thresholds, e.g. `"k=5,distinct_l=3"` (docs/explanation/privacy-models.md);
            None: measure only.
        ordered: the sensitive values are numbers (for t-closeness's ordered distance).
        engine: `inprocess` or `spark` for data given as a path or a pandas/Arrow frame.
        weight: a column of per-row weights (an export's); None: every row once.

    Returns:
        The report (`.passed`, `.measured`, `.checks`, `.as_dict()`).

    Raises:
        VpubError: an unknown column, a model that does not parse, data that cannot be read.
    """
    from .engines import make_engine, session_engine
    from .frames import is_frame, is_spark_frame
    from .privacy import thresholds_from_text
    from .utility.check import Model, check_frame, check_table

    names = [a.strip() for a in qi.split(",")] if isinstance(qi, str) else list(qi)
    rules = Model(thresholds_from_text(model))
    if not is_frame(data):
        return check_table(make_engine(engine), str(data), names, sa, rules, ordered, weight=weight)
    chosen = session_engine(data.sparkSession) if is_spark_frame(data) else make_engine(engine)
    return check_frame(chosen, data, names, sa, rules, ordered, weight=weight)


def open_store(path: str | Path, verify_key: str | None = None) -> StatDB:
    """Open a bucket store (`vpub statdb build`, or a marginals release's private state)
    to answer counting queries with guaranteed intervals, as `vpub statdb query` does:
    `open_store(p).count("age between 30 and 40")`.

    Args:
        path: the store's directory (private: the owner's).
        verify_key: a PEM public key to check store.json's signature with.

    Returns:
        The store (`.count(where, method, version=None)`, `.latest`).

    Raises:
        VpubError: not a store, a failed integrity check or signature.
    """
    from .statdb.db import StatDB

    return StatDB.open(str(path), verify_key)
