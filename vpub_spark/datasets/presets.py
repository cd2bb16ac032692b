"""Write the data sets: DIR/data/ (Parquet) and DIR/table.yaml (its table spec).

A directory in this layout can be given as an input path on its own: `resolve_input`
finds its table spec.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path

from ..engines.base import Engine, LoadedTable
from ..errors import SpecError
from ..lake.commit import staged_directory
from ..model import TableSpec
from ..storage import input_outline, is_remote, local_input, on_store
from ..tablespec import load_table_spec, write_table_spec
from . import adult, synthetic

DATA, SPEC = "data", "table.yaml"


@dataclass(frozen=True)
class Written:
    path: Path
    rows: int
    dropped: int
    spec: TableSpec


def resolve_input(path: str | Path, table: str | Path | None) -> tuple[str, TableSpec]:
    """(data path, table spec) from an explicit spec, or a data-set directory's table.yaml."""
    p = Path(path)
    if table is not None:
        return str(p), load_table_spec(table)
    if (p / SPEC).is_file():
        return str(p / DATA) if (p / DATA).exists() else str(p), load_table_spec(p / SPEC)
    raise SpecError(f"{p}: no table spec; pass --table FILE (or point at a directory with {SPEC})")


def resolve_table(input_path: str, table: str | None) -> tuple[str, TableSpec]:
    """(data path, table spec) for a config's input: a spec file, a preset name, or the
    input directory's own table.yaml."""
    t = table
    if t is not None and not t.endswith((".yaml", ".yml")):
        if t == "adult":
            return input_path, adult.adult_spec()
        if t in synthetic.SCHEMAS:
            data = Path(input_path) / "data"
            return str(data) if data.is_dir() else input_path, synthetic.table_spec(t)
        raise SpecError(
            f"input.table {t!r} is neither a .yaml file nor a preset (adult, {', '.join(synthetic.SCHEMAS)})"
        )
    return resolve_input(input_path, t)


def input_table(
    input_path: str, table: str | None, reads_object_stores: bool
) -> tuple[str, TableSpec]:
    """`resolve_table` for an input anywhere: an input on an object store is copied here
    for an engine that cannot read it there (`storage.local_input`); for one that can,
    only its outline is (its table.yaml: `storage.input_outline`), and the data path
    stays on the store."""
    if not is_remote(input_path):
        return resolve_table(input_path, table)
    if not reads_object_stores:
        return resolve_table(str(local_input(input_path)), table)
    outline = input_outline(input_path)
    local, spec = resolve_table(str(outline), table)
    return on_store(local, outline, input_path), spec


def write_adult(
    engine: Engine, source: str, out: str, sample: int | None, seed: int, overwrite: bool = False
) -> Written:
    adult.check_source(source)
    loaded: LoadedTable = engine.load(source, adult.adult_spec(), "csv")
    dropped = loaded.rows_dropped
    if sample is not None:
        if sample < 1:
            raise SpecError(f"--sample must be a positive number of rows, not {sample}")
        loaded = engine.sample(loaded, sample, seed)
    spec = adult.published_spec(loaded.spec, loaded.dictionaries)
    with staged_directory(out, overwrite) as stage:
        engine.write_decoded(loaded, stage / DATA)
        write_table_spec(spec, stage / SPEC)
    return Written(Path(out), loaded.rows, dropped, spec)


def write_generated(
    engine: Engine,
    name: str,
    rows: int,
    seed: int,
    out: str,
    overwrite: bool = False,
    progress=None,
    dependence: float = 0.0,
    top_share: float | None = None,
) -> Written:
    spec = synthetic.table_spec(name)
    if rows < 1:
        raise SpecError(f"--rows must be positive, not {rows}")
    if not 0 <= dependence <= 1:
        raise SpecError(f"--dependence must be in [0, 1], not {dependence}")
    if top_share is not None and not 0 < top_share < 1:
        raise SpecError(f"--top-share must be in (0, 1), not {top_share}")
    block = partial(
        synthetic.generate_block, name, seed, rows, dependence=dependence, top_share=top_share
    )
    with staged_directory(out, overwrite) as stage:
        engine.write_blocks(
            synthetic.blocks(rows), block, synthetic.arrow_schema(name), stage / DATA, progress
        )
        write_table_spec(spec, stage / SPEC)
    return Written(Path(out), rows, 0, spec)
