"""`parse_options` (vpub_spark/options.py): a dataclass read from YAML by its fields'
types and `option` metadata alone, every bad value refused in one line naming its key."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from vpub_spark.engines.settings import SparkSettings
from vpub_spark.errors import SpecError
from vpub_spark.options import option, parse_options


@dataclass(frozen=True)
class Section:
    name: str = option("", doc="a name", required=True)
    mode: str = option("a", doc="a choice", choices=("a", "b"))
    rows: int = option(10, doc="a count", minimum=1)
    share: float | None = option(0.5, doc="a share")
    flag: bool = option(False, doc="a switch")
    cols: tuple[str, ...] | None = option(None, doc="names")
    groups: tuple[tuple[str, ...], ...] = option((), doc="name lists")
    weights: tuple[tuple[str, int], ...] | None = option(None, doc="a mapping")
    parts: int | None = option(None, doc="a count or auto", shown="auto", minimum=1)
    internal: int = 0  # no option: never read from YAML


def test_every_type_is_read_and_the_rest_keeps_its_default():
    s = parse_options(
        Section,
        {
            "name": "x",
            "mode": "b",
            "rows": 3,
            "share": None,
            "flag": True,
            "cols": "a, b",
            "groups": [["a"], ["a", "b"]],
            "weights": {"a": 1, "b": 0},
            "parts": "auto",
        },
        "sec",
    )
    assert s == Section(
        "x", "b", 3, None, True, ("a", "b"), (("a",), ("a", "b")), (("a", 1), ("b", 0))
    )
    assert parse_options(Section, {"name": "y", "parts": 4}, "sec") == Section("y", parts=4)


@pytest.mark.parametrize(
    ("d", "message"),
    [
        ({}, "sec.name is required"),
        ({"name": ""}, "sec.name is required"),
        ({"name": "x", "colour": 1}, "sec has unknown keys colour; known: name, mode"),
        ({"name": "x", "mode": "c"}, "sec.mode must be one of a, b, not 'c'"),
        ({"name": "x", "rows": 0}, "sec.rows must be a whole number >= 1, not 0"),
        ({"name": "x", "rows": True}, "sec.rows must be a whole number >= 1, not True"),
        ({"name": "x", "rows": None}, "sec.rows may not be empty"),
        ({"name": "x", "share": "half"}, "sec.share must be a number >= 0, not 'half'"),
        ({"name": "x", "flag": "yes"}, "sec.flag must be true or false, not 'yes'"),
        ({"name": ["x"]}, "sec.name must be a string, not ['x']"),
        ({"name": "x", "cols": []}, "sec.cols must be a non-empty list of attribute names"),
        ({"name": "x", "groups": "a"}, "sec.groups must be a list of attribute lists"),
        ({"name": "x", "groups": [[]]}, "each of sec.groups must be a non-empty list"),
        ({"name": "x", "weights": [1]}, "sec.weights must be a mapping, not [1]"),
        ({"name": "x", "weights": {"a": -1}}, "sec.weights.a must be a whole number >= 0"),
        ({"name": "x", "parts": 0}, "sec.parts must be a whole number >= 1, not 0"),
        ({"name": "x", "internal": 1}, "sec has unknown keys internal"),
        ("x", "sec must be a mapping of its settings, not 'x'"),
    ],
)
def test_a_bad_value_is_refused_in_one_line_naming_its_key(d, message):
    with pytest.raises(SpecError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_options(Section, d, "sec")


def test_spark_settings_read_any_property_value_as_text_in_one_order():
    s = SparkSettings.from_dict(
        {"conf": {"spark.x.b": True, "spark.x.a": 8}, "shuffle_partitions": "auto"}
    )
    assert s.conf == (("spark.x.a", "8"), ("spark.x.b", "True")) and s.shuffle_partitions is None
    with pytest.raises(SpecError, match="spark.shuffle_partitions must be a whole number >= 1"):
        SparkSettings.from_dict({"shuffle_partitions": 0})
    with pytest.raises(SpecError, match="spark has unknown keys mastr"):
        SparkSettings.from_dict({"mastr": "local"})
