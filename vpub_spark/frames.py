"""Tables given as data frames rather than files: a pandas DataFrame or a pyarrow Table
(published in process or sent to Spark as Arrow) and a pyspark DataFrame (published on
its own session, classic or Spark Connect, its rows never written to files first). The
table spec is inferred from the schema (docs/how-to/python-api.md, "Publishing a frame")."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from .errors import SpecError
from .model import TableSpec, attribute_from_dict

SUPPORTED = "strings, booleans, dates, integers, floats and decimals"
PANDAS, ARROW, SPARK = "pandas DataFrame", "pyarrow Table", "Spark DataFrame"


@dataclass(frozen=True)
class FrameInput:
    """A frame to publish.

    Attributes:
        data: a pyarrow Table (a pandas frame converted) or a pyspark DataFrame.
        spec: its table spec (inferred, with the caller's overrides).
        name: how the manifest names the source (`pandas DataFrame`, ...).
    """

    data: Any
    spec: TableSpec
    name: str

    @property
    def columns(self) -> list[str]:
        """The columns its attributes are read from."""
        return sorted({a.column for a in self.spec.attributes})

    @property
    def on_spark(self) -> bool:
        """Whether the rows are a Spark DataFrame's (published on its session)."""
        return is_spark_frame(self.data)


def is_spark_frame(data: Any) -> bool:
    """A pyspark DataFrame, classic or Spark Connect (checked without importing pyspark)."""
    return type(data).__name__ == "DataFrame" and type(data).__module__.startswith("pyspark.sql")


def is_frame(data: Any) -> bool:
    """Whether `data` is a frame `frame_input` takes."""
    import pandas as pd

    return isinstance(data, pd.DataFrame | pa.Table) or is_spark_frame(data)


def frame_input(
    data: Any,
    table: Mapping[str, Any] | TableSpec | None = None,
    name: str = "",
    what: str = "",
) -> FrameInput:
    """A frame with its table spec: every column an attribute, its kind from its type.

    Args:
        data: a pandas DataFrame, a pyarrow Table or a pyspark DataFrame.
        table: per column, attribute options that replace the inferred ones
            (`{"age": {"bins": [[0, 29], [30, 120]]}}`, `{"grade": {"order": [...]}}`),
            or a whole table spec to use instead of inferring one.
        name: the table's name (release ids); default `table`.
        what: how the manifest names the source; default the frame's kind.

    Returns:
        The frame to publish.

    Raises:
        SpecError: a column of a type that cannot be an attribute, an override naming
            no column, or an override its option refuses.
    """
    import pandas as pd

    if isinstance(data, pd.DataFrame):
        data, kind = _arrow_of(data), PANDAS
    elif isinstance(data, pa.Table):
        kind = ARROW
    elif is_spark_frame(data):
        kind = SPARK
    else:
        raise SpecError(
            f"cannot publish a {type(data).__name__}: give a path, a config, a pandas or "
            "pyspark DataFrame or a pyarrow Table"
        )
    if isinstance(table, TableSpec):
        return FrameInput(data, table, what or kind)
    kinds = _spark_kinds(data) if kind == SPARK else _arrow_kinds(data.schema)
    return FrameInput(
        data, infer_spec(kinds, table or {}, name or "table", what or kind), what or kind
    )


def infer_spec(
    kinds: Mapping[str, str | None], overrides: Mapping[str, Any], name: str, what: str
) -> TableSpec:
    """The table spec of columns of the given kinds (None: an unsupported type).

    Decision: strings, booleans and dates are categorical (labels sorted, so ISO dates in
    time order), numbers numeric; missing values are nulls and the spec's default tokens
    (`?` and the empty string), as for a file, so a frame and the same rows written to
    Parquet publish the same release."""
    unknown = sorted(set(overrides) - set(kinds))
    if unknown:
        raise SpecError(f"table: no column {', '.join(unknown)} in the {what}")
    attributes = []
    for column, kind in kinds.items():
        given = overrides.get(column) or {}
        if not isinstance(given, Mapping):
            raise SpecError(f"table.{column} must be a mapping of attribute options")
        if kind is None and "kind" not in given:
            raise SpecError(
                f"column {column} of the {what}: its type cannot be an attribute ({SUPPORTED} can); "
                "drop or convert it"
            )
        attributes.append(attribute_from_dict({"name": column, "kind": kind} | dict(given)))
    if not attributes:
        raise SpecError(f"the {what} has no column")
    return TableSpec(attributes=tuple(attributes), name=name)


def _arrow_of(frame) -> pa.Table:
    try:
        return pa.Table.from_pandas(frame, preserve_index=False)
    except (pa.ArrowException, TypeError, ValueError) as e:
        raise SpecError(f"the pandas DataFrame cannot be read as Arrow: {e}") from None


def _arrow_kinds(schema: pa.Schema) -> dict[str, str | None]:
    types = pa.types
    out: dict[str, str | None] = {}
    for f in schema:
        t = f.type.value_type if types.is_dictionary(f.type) else f.type
        if types.is_integer(t) or types.is_floating(t) or types.is_decimal(t):
            out[f.name] = "numeric"
        elif types.is_string(t) or types.is_large_string(t) or types.is_boolean(t):
            out[f.name] = "categorical"
        else:
            out[f.name] = "categorical" if types.is_date(t) else None
    return out


_SPARK_NUMERIC = ("byte", "short", "integer", "long", "float", "double", "decimal")
_SPARK_CATEGORICAL = ("string", "varchar", "char", "boolean", "date")


def _spark_kinds(df) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for f in df.schema.fields:
        type_name = f.dataType.typeName()
        out[f.name] = (
            "numeric"
            if type_name in _SPARK_NUMERIC
            else "categorical"
            if type_name in _SPARK_CATEGORICAL
            else None
        )
    return out
