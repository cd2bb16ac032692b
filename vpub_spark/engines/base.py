"""The engine seam (docs/explanation/architecture.md, "The engine seam"): the `Engine`
and `PartitionJob` protocols, what every engine returns (`LoadedTable`), and the
engine-neutral steps of loading a table."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import pandas as pd
import pyarrow as pa

from ..encoding import Dictionary, EncodingPlan, build_dictionary
from ..errors import DataError, SpecError, without_values
from ..frames import FrameInput
from ..kernels.classes import ClassJob, ClassSummary
from ..kernels.partitioning import PartitionPlan, Sharding
from ..model import TableSpec


@dataclass
class LoadedTable:
    """An encoded table: engine-specific `data` (pandas or Spark frame of int32 codes,
    one column per attribute) plus the dictionaries and the domain profile."""

    spec: TableSpec
    dictionaries: dict[str, Dictionary]
    counts: dict[str, np.ndarray]
    rows_read: int
    rows_dropped: int
    data: Any = field(repr=False)
    source: str = ""
    direct: Any = field(default=None, repr=False)
    """The source as a Spark engine's tasks read it themselves (`spark/direct.py`), when
    `data` is exactly its rows encoded; None otherwise (a sample, a suppressed table)."""

    @property
    def rows(self) -> int:
        return self.rows_read - self.rows_dropped

    @property
    def names(self) -> tuple[str, ...]:
        return self.spec.names

    def frequencies(self) -> dict[str, tuple[tuple[str, ...], np.ndarray]]:
        return {a: (self.dictionaries[a].labels, self.counts[a]) for a in self.names}

    def profile(self) -> list[dict]:
        """Per attribute: domain size, distinct values present, most frequent value and share."""
        out = []
        for a in self.names:
            c, labels = self.counts[a], self.dictionaries[a].labels
            top = int(np.argmax(c)) if len(c) else 0
            out.append(
                {
                    "attribute": a,
                    "domain": len(labels),
                    "distinct": int((c > 0).sum()),
                    "top_value": labels[top] if len(labels) else None,
                    "top_share": float(c[top] / c.sum()) if c.sum() else 0.0,
                }
            )
        return out


@dataclass(frozen=True)
class ReleaseFiles:
    """A committed release as an engine's jobs read it, described by the layer that
    knows the release format (utility/engine_jobs.py), against one loaded source:
    - `path`, `tables` (the manifest's table entries), `size` (bytes of its parts);
    - `terms`: log p~(x) as (table index, columns, sign) terms (000 §5.1's
      junction-tree decomposition);
    - `models()`: the tables' estimate models in the source's codes (picklable: tasks
      call it);
    - `estimates(table, file, column lists)`: one file set of a table, per column
      list its keys (a frame of codes) and estimates; None when some table's kind
      cannot be estimated file set by file set;
    - `part_dir(table, part)`: the directory of one part's files."""

    path: str
    tables: tuple[dict, ...]
    size: int
    terms: tuple[tuple[int, list[str], float], ...]
    models: Callable[[], list]
    estimates: Callable[[int, str, list[list[str]]], list[tuple[pd.DataFrame, np.ndarray]]] | None
    part_dir: Callable[[str, str], Path]  # (table, part) -> its directory (release/layout.py)


@dataclass(frozen=True)
class SqlTable:
    """A Parquet directory (`path`) or set of objects on a store (`files`) to be named
    `name` in an engine's SQL catalog."""

    name: str
    path: str | None = None
    files: tuple[str, ...] = ()


class PartitionJob(Protocol):
    """The work of one partition, shipped to the tasks (small, picklable): how rows map
    to shards (`sharding`, which an engine may compute where the rows are, e.g. as
    Spark SQL; `shards(frame)` is `sharding.of(frame)`), what a partition does (`run`:
    kernels, then writing its part files), and the Arrow schema of the summary rows
    `run` returns."""

    @property
    def sharding(self) -> Sharding: ...

    @property
    def summary_schema(self) -> pa.Schema: ...

    def shards(self, frame: pd.DataFrame) -> np.ndarray: ...

    def run(self, frame: pd.DataFrame, part: int, task: int = -1) -> pd.DataFrame: ...


class Engine(Protocol):
    """The seam between the library and where the rows live: every member
    the publishers, data sets, benchmarks and the CLI use. `spark` keeps the rows in
    Spark and runs partitions as tasks; `inprocess` keeps them in pandas and runs the same
    jobs on a pool of forked workers. Only small aggregates reach the caller."""

    name: str
    reads_object_stores: bool
    """Its tasks read an input on an object store themselves (else it is copied here)."""

    @property
    def audits_in_tasks(self) -> bool:
        """A release's tables are audited in its tasks (release/audit/distributed.py), only their
        summaries reaching this process."""
        ...

    def start(self) -> float:
        """Start the engine's runtime (a Spark session); its start-up time in seconds."""
        ...

    def load(self, path: str, spec: TableSpec, fmt: str | None = None) -> LoadedTable:
        """Read and encode a source where the engine keeps rows.

        Args:
            path: a CSV or Parquet file or directory (or an object-store URI where
                `reads_object_stores`).
            spec: the table spec: attributes, bins, the missing-value policy.
            fmt: `csv` or `parquet`; None: from the files.

        Returns:
            The loaded table: its dictionaries, counts and row count here, its rows
            where the engine keeps them.

        Raises:
            DataError: the data do not fit the spec (missing values under `reject`, a
                value outside the bins, no rows).
        """
        ...

    def load_frame(self, frame: FrameInput) -> LoadedTable:
        """Encode a frame's rows (`load` for rows given as a frame, `frames.py`).

        Args:
            frame: the rows and their table spec.

        Returns:
            The loaded table, as `load` returns it.

        Raises:
            SpecError: a frame this engine cannot publish, or columns the spec names
                that the frame lacks.
            DataError: the data do not fit the spec, as for `load`.
        """
        ...

    # data sets
    def sample(self, loaded: LoadedTable, n: int, seed: int) -> LoadedTable:
        """`n` rows drawn without replacement by `seed`, as a loaded table of their own
        (the same dictionaries)."""
        ...

    def suppress(
        self, loaded: LoadedTable, attribute: str, drop: np.ndarray, seed: int
    ) -> LoadedTable:
        """The table without drop[v] rows of each code v of `attribute`: those with the
        smallest content keys (kernels/suppression.py), the same rows on both engines."""
        ...

    def write_decoded(self, loaded: LoadedTable, directory: Path) -> None:
        """The rows decoded to their labels, as Parquet files under `directory`."""
        ...

    def write_blocks(
        self,
        blocks: int,
        block: Callable[[int], pa.RecordBatch],
        schema: pa.Schema,
        directory: Path,
        progress: Callable[[int], object] | None = None,
    ) -> None:
        """Parquet files under `directory` holding the record batches `block(0)` ..
        `block(blocks - 1)` (each of `schema`), made where the engine's tasks run; the
        caller says what a block holds (`datasets/presets.py`: a generated data set's
        rows), so `block` must be picklable. `progress(rows)` after each block, where
        the engine can tell."""
        ...

    # publishing
    def persist(self, loaded: LoadedTable) -> LoadedTable:
        """The table kept where it is read fastest for the passes a publish makes (Spark:
        cached); the same table in process."""
        ...

    def unpersist(self, loaded: LoadedTable) -> None:
        """Release what `persist` kept."""
        ...

    def rows_sample(self, loaded: LoadedTable, n: int, seed: int) -> pd.DataFrame:
        """At most `n` rows drawn by `seed`, here, as codes (GD's scorer under
        `gd.score: kl-unsafe`: never the whole table)."""
        ...

    def shard_counts(
        self, loaded: LoadedTable, sensitive: Sequence[str], sharding: Sharding
    ) -> pd.DataFrame:
        """The plan's one pass: per shard, its rows and each sensitive attribute's value
        counts.

        Args:
            loaded: the source.
            sensitive: the attributes whose values are counted.
            sharding: how a row maps to its shard (a keyed hash of its content).

        Returns:
            Partial counts (`attr`, `shard`, `value`, `count`; the rows of a shard under
            `attr` ROWS), summed by `kernels/partitioning.combine_counts`.
        """
        ...

    def combination_counts(self, loaded: LoadedTable, columns: Sequence[str]) -> pd.DataFrame:
        """The count of each combination of codes of `columns` present (`count`)."""
        ...

    def run_partitions(
        self, loaded: LoadedTable, plan: PartitionPlan, job: PartitionJob
    ) -> pd.DataFrame:
        """Run `job` on every partition of `plan`: each row goes to the partition of its
        shard (`job.shards`), each partition's rows to one task, which calls `job.run`
        (kernels, then writing its part files; the kernels put the rows in a canonical
        order, so a retried task writes the same bytes).

        Args:
            loaded: the source.
            plan: the partitions (shard -> partition, their first group ids).
            job: the work of one partition (small and picklable).

        Returns:
            The summary rows every `job.run` returned (`job.summary_schema`).
        """
        ...

    def write_projection(
        self, loaded: LoadedTable, attributes: Sequence[str], directory: str | Path
    ) -> None:
        """The aggregated projection on `attributes` (each combination of labels and its
        `count`) as Parquet files under `directory`."""
        ...

    # measuring
    def class_summary(self, loaded: LoadedTable, job: ClassJob) -> ClassSummary:
        """The equivalence classes of `job.qi` measured where the rows are
        (`kernels/classes.py`); only the summary and the smallest classes come back."""
        ...

    # serving
    def map_rows(
        self,
        frame: pd.DataFrame,
        run: Callable[[pd.DataFrame], pd.DataFrame],
        schema: pa.Schema,
        parts: int,
    ) -> pd.DataFrame:
        """`run` over a small driver-side frame (a query workload, never the data) split
        into `parts` tasks (0: the engine's default parallelism); the rows `run`
        returns (`schema`), in no particular order."""
        ...


@runtime_checkable
class UtilityEngine(Protocol):
    """A capability: the utility measures computed where the rows are (`vpub utility`
    on an engine asks for it with `utility_engine`). Both engines have it; an engine
    without it is refused in one line."""

    def release_kl(
        self, loaded: LoadedTable, release: ReleaseFiles, form: str | None = None
    ) -> float:
        """The KL divergence of `release` from the loaded source (000 §5.1), computed
        where the rows are; only sums come back.

        Args:
            loaded: the release's source, loaded.
            release: the release's files, as the engine reads them.
            form: one of the engine's ways of computing it (Spark: `spark/kl.py`'s
                FORMS); default: the engine's choice.

        Returns:
            The divergence, in nats.
        """
        ...

    def count_cubes(
        self,
        loaded: LoadedTable,
        luts: Mapping[str, np.ndarray],
        sizes: Mapping[str, int],
        sets: Sequence[tuple[str, ...]],
        cubes: Callable[..., dict[tuple[str, ...], np.ndarray]],
    ) -> dict[tuple[str, ...], np.ndarray]:
        """The contingency cube of each attribute set over the source recoded into the
        release's codes, counted where the rows are.

        Args:
            loaded: the source, loaded.
            luts: per attribute, a source code -> the release's code.
            sizes: per attribute, the release's domain size (the cubes' shape).
            sets: the attribute sets.
            cubes: the counting kernel, `cubes(codes, sets, sizes)`.

        Returns:
            Each set's cube.
        """
        ...

    def count_matching(self, loaded: LoadedTable, codes: Mapping[str, Sequence[int]]) -> int:
        """How many rows hold, in every attribute of `codes`, one of its codes.

        Args:
            loaded: the source, loaded.
            codes: per attribute, the codes a row may hold.

        Returns:
            The count.
        """
        ...


def utility_engine(engine: Engine) -> UtilityEngine:
    """The engine as one that measures utility where the rows are.

    Args:
        engine: any engine.

    Returns:
        The same engine.

    Raises:
        SpecError: it has no utility measures.
    """
    if not isinstance(engine, UtilityEngine):
        raise SpecError(f"the {engine.name} engine does not measure utility")
    return engine


@runtime_checkable
class SqlEngine(Protocol):
    """A capability only some engines have (Spark's SQL catalog): `vpub releases
    register` and `--sql` ask for it with `sql_engine`, an engine without it is refused
    in one line."""

    def register_tables(self, tables: Sequence[SqlTable], views: Sequence[str]) -> str:
        """Create the tables and views in the session's SQL catalog.

        Args:
            tables: external tables (objects on a store as temporary views).
            views: CREATE VIEW statements, run after the tables.

        Returns:
            The catalog's kind (`hive`, `in-memory`).
        """
        ...

    def sql(self, query: str, limit: int) -> pd.DataFrame:
        """A SQL query's first `limit` rows, collected.

        Args:
            query: the statement.
            limit: the most rows returned.

        Returns:
            The rows.
        """
        ...

    def catalog_table(self, name: str) -> Any:
        """A table of the session's catalog, as a DataFrame of the session (`frames.py`
        publishes it).

        Args:
            name: the table's name (`db.table`).

        Returns:
            The table's DataFrame; no row is read yet.

        Raises:
            SpecError: no such table.
        """
        ...


def sql_engine(engine: Engine) -> SqlEngine:
    """The engine as a SQL engine.

    Args:
        engine: any engine.

    Returns:
        The same engine.

    Raises:
        SpecError: it has no SQL catalog.
    """
    if not isinstance(engine, SqlEngine):
        raise SpecError(f"SQL tables need a SQL catalog: use the Spark engine, not {engine.name}")
    return engine


def plan_encoding(
    spec: TableSpec, raw_counts: Mapping[str, Mapping[str, int]], rows: int, rows_missing: int
) -> tuple[EncodingPlan, dict[str, Dictionary], dict[str, np.ndarray]]:
    """Apply the missing-value policy and build every dictionary (driver side, small data)."""
    if rows == 0:
        raise DataError("the input table is empty")
    if rows_missing and spec.missing == "reject":
        raise DataError(
            f"{rows_missing} of {rows} rows have a missing value and the table spec says "
            "missing: reject (use missing: drop to drop and count them)"
        )
    if rows_missing == rows:
        raise DataError(f"all {rows} rows have a missing value; nothing is left to publish")
    dictionaries, counts, columns = {}, {}, []
    for a in spec.attributes:
        d, cc, per_code = build_dictionary(a, raw_counts.get(a.name, {}))
        dictionaries[a.name], counts[a.name] = d, per_code
        columns.append(cc)
    return EncodingPlan(tuple(columns)), dictionaries, counts


def check_columns(available: list[str], spec: TableSpec, where: str) -> None:
    missing = [a.column for a in spec.attributes if a.column not in available]
    if missing:
        raise SpecError(
            f"{where}: unknown column {', '.join(missing)}; the input has: {', '.join(available)}"
        )


def undecodable_line(path: str | Path, encoding: str) -> int | None:
    """The first line of a text file that is not valid `encoding` (1-based), or None."""
    import codecs

    decoder = codecs.getincrementaldecoder(encoding)()
    with open(path, "rb") as f:
        for number, line in enumerate(f, start=1):
            try:
                decoder.decode(line)
            except UnicodeDecodeError:
                return number
    return None


def encoding_error(path: str | Path, encoding: str) -> DataError | None:
    """The one-line error for a CSV file with bytes that are not `encoding`, if it has any."""
    line = undecodable_line(path, encoding)
    if line is None:
        return None
    return DataError(
        f"{path}: line {line} is not valid {encoding} (set `encoding:` in the table spec, e.g. latin-1)"
    )


def unreadable(path: str | Path, error: Exception) -> DataError:
    """One line naming the file and what is wrong with it (never a traceback)."""
    first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    shown = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in first)
    return DataError(f"{path}: cannot read the input: {without_values(shown)}")
