"""The in-process engine: pyarrow IO and the same kernels, no JVM
(docs/explanation/architecture.md)."""

from __future__ import annotations

import weakref
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.dataset as ds

from ..encoding import encode_batch, raw_value_counts
from ..errors import SpecError
from ..frames import FrameInput
from ..kernels.anatomy import COUNT as ANATOMY_COUNT
from ..kernels.arrays import dense_counts
from ..kernels.classes import (
    COUNT,
    ClassJob,
    ClassSummary,
    class_counts,
    class_measures,
    distribution,
    summarize,
)
from ..model import TableSpec
from .base import (
    LoadedTable,
    ReleaseFiles,
    check_columns,
    encoding_error,
    plan_encoding,
    unreadable,
)
from .files import data_files, detect_format
from .kl_sums import kl_sums
from .parquet_load import broken_parquet, load_parquet
from .pool import LIGHT, MIN_ROWS, SLICE_ROWS, default_workers, run_tasks


def read_arrow(path: str, spec: TableSpec, fmt: str | None = None) -> pa.Table:
    """The spec's source columns; CSV (RFC 4180: `"` quotes, `""` inside them, the
    delimiter and line breaks inside them) is read as strings, like the Spark engine
    does. A file that cannot be read (corrupt, not `spec.encoding`) is a one-line error."""
    kind = detect_format(path, fmt)
    files = data_files(path, kind)
    cols = sorted({a.column for a in spec.attributes})
    if kind == "csv":
        tables = [_read_csv(f, spec, cols, path) for f in files]
        return (
            pa.concat_tables(tables)
            if tables
            else pa.table({c: pa.array([], pa.string()) for c in cols})
        )
    try:
        dataset = ds.dataset(files, format="parquet")
        check_columns(dataset.schema.names, spec, path)
        return dataset.to_table(columns=cols)
    except (pa.ArrowException, OSError) as e:
        raise broken_parquet(files, e) from None


def _read_csv(file: str, spec: TableSpec, cols: list[str], path: str) -> pa.Table:
    utf8 = spec.encoding.replace("_", "-").lower() in ("utf-8", "utf8")
    if not utf8 and (bad := encoding_error(file, spec.encoding)):
        raise bad
    read = pacsv.ReadOptions(encoding=spec.encoding)
    # RFC 4180: line breaks inside quotes (and so across pyarrow's blocks): 10-20% slower
    parse = pacsv.ParseOptions(newlines_in_values=True)
    try:
        header = pacsv.open_csv(file, read_options=read, parse_options=parse).schema.names
        check_columns(header, spec, path)
        convert = pacsv.ConvertOptions(
            column_types={c: pa.string() for c in cols}, include_columns=cols
        )
        table = pacsv.read_csv(
            file, read_options=read, parse_options=parse, convert_options=convert
        )
    except (pa.ArrowException, OSError) as e:
        raise (encoding_error(file, spec.encoding) or unreadable(file, e)) from None
    return lf_newlines(table)


def lf_newlines(table: pa.Table) -> pa.Table:
    """CRLF inside values as LF, as Spark's CSV reader gives them (in a CRLF file), so
    both engines see the same labels. Only a column whose characters hold a CR is
    rewritten (a scan of its bytes: 0.01 s for 12M values, against 0.35 s to search
    every value)."""
    import numpy as np
    import pyarrow.compute as pc

    for i, name in enumerate(table.column_names):
        column = table.column(i)
        data = [c.buffers()[2] for c in column.chunks]
        if any(b is not None and (np.frombuffer(b, np.uint8) == 13).any() for b in data):
            table = table.set_column(i, name, pc.replace_substring(column, "\r\n", "\n"))
    return table


def _loaded(table: pa.Table, spec: TableSpec, source: str) -> LoadedTable:
    """A table's rows encoded, in this process."""
    raw, rows, missing = raw_value_counts(table, spec)
    plan, dictionaries, counts = plan_encoding(spec, raw, rows, missing)
    encoded = encode_batch(table, plan)
    return LoadedTable(
        spec, dictionaries, counts, rows, missing, encoded.to_pandas(), source=source
    )


class InProcessEngine:
    """Rows in pandas; partitions and row slices run on every core in forked workers
    (`pool.py`), through the same jobs as Spark's tasks, with the serial run's results.
    `workers`: how many (default: `VPUB_WORKERS`, else every available core); work on
    fewer than `min_rows` rows runs serially."""

    name = "inprocess"
    reads_object_stores = False
    # a release of at most this many bytes of parts is audited in this process, not on
    # the workers, where starting them costs more (docs/explanation/performance.md)
    in_driver_bytes = 8 << 20

    def __init__(self, workers: int | None = None, min_rows: int = MIN_ROWS) -> None:
        self.workers = default_workers(workers)
        self.min_rows = min_rows
        self._kept_shards: tuple | None = None  # (frame's weak reference, sharding, shards)

    @property
    def audits_in_tasks(self) -> bool:
        """On several workers, a release's files are audited on them
        (`release/audit/distributed.py`), as Spark's tasks do."""
        return self.workers > 1

    def _workers_for(self, rows: int) -> int:
        return self.workers if rows >= self.min_rows else 1

    def _light_workers_for(self, rows: int) -> int:
        """Workers for light work per row (`pool.LIGHT`)."""
        return self.workers if rows >= self.min_rows * LIGHT else 1

    def _row_slices(self, frame, fn, least: int = 1, workers: int | None = None) -> list:
        """`fn` over consecutive row slices of the frame, in order, on the workers (by
        default as many as its rows call for as light work): at least `least` slices and
        one per worker, none over `SLICE_ROWS` rows (a slice's temporary arrays stay
        small), for work whose result per row does not depend on the slice."""
        workers = min(workers or self._light_workers_for(len(frame)), max(len(frame), 1))
        count = max(workers, least, -(-len(frame) // SLICE_ROWS))
        bounds = np.linspace(0, len(frame), count + 1).astype(np.int64)
        spans = list(zip(bounds[:-1], bounds[1:], strict=True))
        return run_tasks(lambda span: fn(frame.iloc[span[0] : span[1]]), spans, workers)

    def start(self) -> float:
        return 0.0  # nothing to start

    def load(self, path: str, spec: TableSpec, fmt: str | None = None) -> LoadedTable:
        if detect_format(path, fmt) == "parquet":
            return load_parquet(path, spec, self._light_workers_for)
        return _loaded(read_arrow(path, spec, fmt), spec, str(path))

    def load_frame(self, frame: FrameInput) -> LoadedTable:
        """An Arrow table's rows (a pandas frame's, converted); a Spark DataFrame is
        refused: it is published on its own session (the Spark engine)."""
        if frame.on_spark:
            raise SpecError("a Spark DataFrame is published on its session: use engine spark")
        check_columns(frame.data.column_names, frame.spec, frame.name)
        return _loaded(frame.data.select(frame.columns), frame.spec, frame.name)

    # --- data sets -------------------------------------------------------------
    def sample(self, loaded: LoadedTable, n: int, seed: int) -> LoadedTable:
        import numpy as np

        from ..kernels.sampling import OCCURRENCE, sample_keys, with_occurrence

        df = loaded.data
        if n >= len(df):
            return loaded
        cols = list(loaded.names)
        keyed = with_occurrence(df, cols)
        keyed["__key"] = sample_keys(keyed[[*cols, OCCURRENCE]], seed)
        picked = keyed.sort_values(["__key", *cols, OCCURRENCE], kind="stable").head(n)[cols]
        picked = picked.reset_index(drop=True)
        counts = {
            a: np.bincount(picked[a].to_numpy(), minlength=loaded.dictionaries[a].size)
            for a in cols
        }
        return LoadedTable(loaded.spec, loaded.dictionaries, counts, n, 0, picked, loaded.source)

    def suppress(self, loaded: LoadedTable, attribute: str, drop, seed: int) -> LoadedTable:
        import numpy as np

        from ..kernels.sampling import OCCURRENCE, sample_keys, with_occurrence

        cols = list(loaded.names)
        keyed = with_occurrence(loaded.data, cols)
        keyed["__key"] = sample_keys(keyed[[*cols, OCCURRENCE]], seed)
        order = keyed.sort_values([attribute, "__key", *cols, OCCURRENCE], kind="stable")
        rank = order.groupby(attribute, sort=False).cumcount().to_numpy()
        gone = order.index[rank < np.asarray(drop)[order[attribute].to_numpy()]]
        kept = loaded.data.drop(index=gone).reset_index(drop=True)
        counts = {
            a: np.bincount(kept[a].to_numpy(), minlength=loaded.dictionaries[a].size) for a in cols
        }
        return LoadedTable(
            loaded.spec,
            loaded.dictionaries,
            counts,
            loaded.rows_read,
            loaded.rows_dropped + len(gone),
            kept,
            loaded.source,
        )

    def write_decoded(self, loaded: LoadedTable, directory: Path) -> None:
        import pyarrow.parquet as pq

        from ..encoding import decode_batch

        table = pa.Table.from_pandas(loaded.data, preserve_index=False)
        directory.mkdir(parents=True, exist_ok=True)
        pq.write_table(
            pa.Table.from_batches([decode_batch(table, loaded.dictionaries)]),
            directory / "part-00000.parquet",
        )

    def write_blocks(
        self, blocks: int, block, schema: pa.Schema, directory: Path, progress=None
    ) -> None:
        """The blocks one after another into one file (`schema`: each batch's own)."""
        import pyarrow.parquet as pq

        directory.mkdir(parents=True, exist_ok=True)
        writer = None
        for b in range(blocks):
            batch = block(b)
            writer = writer or pq.ParquetWriter(directory / "part-00000.parquet", batch.schema)
            writer.write_batch(batch)
            if progress:
                progress(batch.num_rows)
        if writer:
            writer.close()

    # --- publishing (publishing/ jobs do the per-partition work) --------------
    def persist(self, loaded: LoadedTable) -> LoadedTable:
        return loaded  # already in memory

    def unpersist(self, loaded: LoadedTable) -> None:
        self._kept_shards = None  # the plan's shards, if no job used them

    def rows_sample(self, loaded: LoadedTable, n: int, seed: int):
        """A seeded sample of at most n rows as a pandas frame of codes (GD's scoring)."""
        return self.sample(loaded, n, seed).data

    def shard_counts(self, loaded: LoadedTable, sensitive, sharding):
        """Partial counts per row slice, on the workers (summed by `combine_counts`);
        each row's shard is kept for the partitions of the job with this sharding
        (`_shards`), which would otherwise hash every row again."""
        import pandas as pd

        from ..kernels.partitioning import counted_shards

        def count(frame):
            return counted_shards(frame, sensitive, sharding)

        done = self._row_slices(_numbered(loaded.data, sharding), count)
        shards = np.concatenate([s for _, s in done]) if done else np.zeros(0, np.int32)
        self._kept_shards = (weakref.ref(loaded.data, self._forget_shards), sharding, shards)
        return pd.concat([c for c, _ in done], ignore_index=True)

    def _forget_shards(self, frame_ref) -> None:
        """The frame the kept shards belong to is gone: let them go too."""
        if self._kept_shards is not None and self._kept_shards[0] is frame_ref:
            self._kept_shards = None

    def _shards(self, frame, job) -> np.ndarray:
        """Each row's shard under the job: the plan's, if it counted this very frame
        with the job's sharding, else hashed again on the workers."""
        kept, self._kept_shards = self._kept_shards, None
        if kept and kept[0]() is frame and kept[1] == job.sharding:
            return kept[2]
        return np.concatenate(self._row_slices(_numbered(frame, job.sharding), job.shards))

    def combination_counts(self, loaded: LoadedTable, columns):
        """Rows per distinct combination of `columns` (codes + `count`), sorted: counted
        in a dense array over the combinations' space when it is small
        (`arrays.dense_counts`), else by pandas."""
        import pandas as pd

        cols = list(columns)
        codes = [loaded.data[c].to_numpy() for c in cols]
        radix = [len(loaded.dictionaries[c].labels) for c in cols]
        inside = all(
            len(c) and 0 <= c.min() and c.max() < r for c, r in zip(codes, radix, strict=True)
        )
        dense = dense_counts(codes, radix) if inside else None
        if dense is None:
            return loaded.data.groupby(cols, sort=True).size().rename("count").reset_index()
        return pd.DataFrame({**dict(zip(cols, dense[0], strict=True)), "count": dense[1]})

    def class_summary(self, loaded: LoadedTable, job: ClassJob) -> ClassSummary:
        counts = (
            job.weigh(loaded.data)
            if job.weigh
            else class_counts(loaded.data, job.qi, job.sensitive)
        )
        p = distribution(counts.groupby(job.sensitive)[COUNT].sum())
        m = class_measures(counts, job.qi, job.sensitive, p, job.l, job.ordered)
        m["k"] = m["k"] / job.unit if job.weigh else m["k"]
        return summarize(m, job, float(counts[COUNT].sum()) / job.unit)

    def release_kl(
        self, loaded: LoadedTable, release: ReleaseFiles, form: str | None = None
    ) -> float:
        if form is not None:
            raise SpecError(f"the in-process engine has one KL form, not {form!r}")
        labels = {a: list(loaded.dictionaries[a].labels) for a in loaded.names}
        names = list(loaded.names)
        rows = loaded.data.groupby(names, sort=False).size().rename(ANATOMY_COUNT).reset_index()
        entropy, log_p = kl_sums(release, labels, loaded.rows, [rows])
        return float(entropy) - float(log_p) / float(loaded.rows)

    def count_cubes(self, loaded: LoadedTable, luts, sizes, sets, cubes):
        recoded = {a: np.asarray(lut)[loaded.data[a].to_numpy()] for a, lut in luts.items()}
        return cubes(recoded, list(sets), sizes)

    def count_matching(self, loaded: LoadedTable, codes) -> int:
        ok = np.ones(loaded.rows, dtype=bool)
        for a, values in codes.items():
            ok &= np.isin(loaded.data[a].to_numpy(), np.asarray(values, dtype=np.int64))
        return int(ok.sum())

    def map_rows(self, frame, run, schema, parts):
        """`run` over the frame in at least `parts` slices (`_row_slices`), in order, on
        every worker: its rows are work items (queries, files to audit), not data rows."""
        import pandas as pd

        def one(rows):
            return run(rows.reset_index(drop=True))

        return pd.concat(self._row_slices(frame, one, parts, self.workers), ignore_index=True)

    def run_partitions(self, loaded: LoadedTable, plan, job):
        """Every partition through the same function the Spark tasks run, on the
        workers; the summary rows in partition order."""
        import numpy as np
        import pandas as pd

        df = loaded.data
        part = plan.part_of(self._shards(df, job))
        # a stable radix sort of 16-bit partition numbers: linear in the rows
        order = np.argsort(part.astype(np.int16 if plan.parts < 2**15 else np.int64), kind="stable")
        bounds = np.searchsorted(part[order], np.arange(plan.parts + 1))

        def one(p: int):
            return job.run(df.iloc[order[bounds[p] : bounds[p + 1]]].reset_index(drop=True), p)

        parts = range(plan.parts)
        return pd.concat(run_tasks(one, parts, self._workers_for(len(df))), ignore_index=True)

    def write_projection(self, loaded: LoadedTable, attributes, directory: str | Path) -> None:
        """A duplicate-preserving projection, aggregated (`count`)."""
        from ..encoding import write_decoded

        counts = (
            loaded.data.groupby(list(attributes), sort=True).size().rename("count").reset_index()
        )
        write_decoded(counts, loaded.dictionaries, directory, "part-00000.parquet")


class HeldSourceEngine(InProcessEngine):
    """The in-process engine holding one source it has read: `load` of that source with
    that spec returns it (a report's audit and owner's measures, forked after it was
    read, share it), anything else is read as usual."""

    def __init__(self, path: str, spec: TableSpec) -> None:
        super().__init__()
        self._held = (str(path), spec, super().load(path, spec))

    def load(self, path: str, spec: TableSpec, fmt: str | None = None) -> LoadedTable:
        if (str(path), spec) == self._held[:2] and fmt is None:
            return self._held[2]
        return super().load(path, spec, fmt)


def _numbered(frame, sharding):
    """`frame` with OCCURRENCE where the sharding reads it (kernels/partitioning.py)."""
    from ..kernels.partitioning import numbers_rows
    from ..kernels.sampling import with_occurrence

    return with_occurrence(frame, sharding.columns) if numbers_rows(sharding) else frame
