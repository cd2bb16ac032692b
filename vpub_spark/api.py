"""The public API, for a notebook or an orchestrator task: publish, open, query and audit
releases without the command line (docs/how-to/python-api.md). Everything here is
re-exported at the package's top level (`vpub_spark.publish`, ...); the modules below it
are internal."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

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
    source: str | Path | PublishConfig | Mapping[str, Any],
    *,
    rules: Any = None,
    privacy: Mapping[str, Any] | int | None = None,
    method: str | None = None,
    output: str | Path | None = None,
    release_id: str | None = None,
    engine: str | None = None,
    table: str | None = None,
    seed: int | None = None,
    overwrite: bool = False,
) -> Release:
    """Publish a release, as `vpub publish` does, and return it.

    Args:
        source: a job config (a YAML file's path, a mapping as the YAML reads, or a
            `PublishConfig`), or the data to publish (a CSV or Parquet file or
            directory, or a data set written by `vpub datasets`).
        rules: privacy rules (`["a, b -> s", ...]` or `{"random": {"c": 5}}`): with data.
        privacy: the privacy model (`{"l": 5}`, `{"model": "m-invariance", "m": 4}`) or
            just l.
        method: `uad`, `gd`, `marginals`, ... (docs/reference/config.md).
        output: the output root; release_id: the release's directory name in it.
        engine: `auto`, `inprocess` or `spark`.
        table: a table-spec YAML or a preset name, for data without its `table.yaml`.
        seed: an explicit seed (reproducible; keep it private); default: a secret one.
        overwrite: replace a committed release with the same id.

    Returns:
        The committed, audited release.

    Raises:
        VpubError: a config or rule that is wrong or cannot be met, data that do not fit,
            an output that cannot be written (nothing is left half-written).
    """
    from .engines import engine_for
    from .engines.settings import SparkSettings
    from .publishing.pipeline import publish as run

    cfg = _config(source, rules, privacy, method, output, table)
    from .storage import local_path

    cfg = with_overrides(cfg, release_id=release_id, engine=engine, seed=seed, overwrite=overwrite)
    where = local_path(cfg.input_path)
    chosen, _ = engine_for(cfg.engine, SparkSettings.load(cfg.spark), where, cfg.workers)
    result = run(replace(cfg, engine=chosen.name), chosen)
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
