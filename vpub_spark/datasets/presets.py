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
from ..model import TableSpec
from ..release.commit import staged_directory
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
) -> Written:
    spec = synthetic.table_spec(name)
    if rows < 1:
        raise SpecError(f"--rows must be positive, not {rows}")
    if not 0 <= dependence <= 1:
        raise SpecError(f"--dependence must be in [0, 1], not {dependence}")
    block = partial(synthetic.generate_block, name, seed, rows, dependence=dependence)
    with staged_directory(out, overwrite) as stage:
        engine.write_blocks(synthetic.blocks(rows), block, synthetic.arrow_schema(name), stage / DATA, progress)  # fmt: skip
        write_table_spec(spec, stage / SPEC)
    return Written(Path(out), rows, 0, spec)
