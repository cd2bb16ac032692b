"""Spark schemas for the pyarrow schemas of the engine's Python tasks."""

from __future__ import annotations


def struct_type(schema):
    """A pyspark StructType for a pyarrow schema (int32/int64/float64/string/bool/binary
    columns)."""
    from pyspark.sql import types as T

    kinds = {
        "int32": T.IntegerType(),
        "int64": T.LongType(),
        "double": T.DoubleType(),
        "string": T.StringType(),
        "bool": T.BooleanType(),
        "binary": T.BinaryType(),
    }
    return T.StructType([T.StructField(f.name, kinds[str(f.type)], True) for f in schema])
