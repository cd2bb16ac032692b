"""An input's data files and format, found without reading them: light enough for the
command line to decide on an engine before it imports the data libraries."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from ..errors import DataError, SpecError

Format = Literal["csv", "parquet"]


def detect_format(path: str | Path, fmt: str | None = None) -> Format:
    """CSV or Parquet, from `fmt`, the file's extension or the files of a directory."""
    if fmt is not None:
        if fmt not in ("csv", "parquet"):
            raise SpecError(f"input format must be csv or parquet, not {fmt!r}")
        return fmt  # type: ignore[return-value]
    p = Path(path)
    if not p.exists():
        raise SpecError(f"input not found: {p}")
    names = [p.name] if p.is_file() else [f.name for f in p.rglob("*") if f.is_file()]
    names = [n for n in names if not n.startswith(("_", "."))]
    if any(n.endswith(".parquet") for n in names):
        return "parquet"
    if any(n.endswith((".csv", ".csv.gz")) for n in names):
        return "csv"
    raise SpecError(f"{p}: no .csv or .parquet files found (set input.format to say which)")


def data_files(path: str | Path, kind: Format) -> list[str]:
    """The data files of an input: the file itself, or a directory's `.csv` / `.csv.gz`
    or `.parquet` files (names starting with `_` or `.` left out), sorted."""
    p = Path(path)
    if p.is_file():
        return [str(p)]
    ext = (".csv", ".csv.gz") if kind == "csv" else (".parquet",)
    files = sorted(
        str(f)
        for f in p.rglob("*")
        if f.is_file() and f.name.endswith(ext) and not f.name.startswith(("_", "."))
    )
    if not files:
        raise DataError(f"{path}: no {kind} files")
    return files


__all__ = ["Format", "data_files", "detect_format"]
