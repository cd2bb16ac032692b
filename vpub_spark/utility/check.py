"""`vpub check`: k-anonymity, distinct / entropy / recursive (c, l)-diversity and
t-closeness of any table (CSV or Parquet, from any tool), per equivalence class
(`kernels/classes.py`), on either engine (`Engine.class_summary`).

How values, the order and the weights are read (the export layouts it recognizes):
docs/explanation/privacy-models.md, "`vpub check`".
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from ..errors import DataError, SpecError
from ..kernels.classes import COUNT, MEASURES, ClassJob
from ..model import Attribute
from ..privacy import ALIASES, CRITERIA, thresholds, worst_of
from ..tablespec import load_table_spec, table_spec_from_dict

WORST = 5
GROUP_ID = "group_id"  # release/layout.GROUP: the column every `vpub export` layout has
UNWEIGHTED = "none"
LEVELS = {m: worst_of(m) for m in MEASURES}  # a table's level of each class measure
UNIT = 2**32  # fractional weights are counted by the kernel in 1/UNIT of a row


@dataclass(frozen=True)
class Model:
    """The thresholds to check (`privacy.CRITERIA` key -> threshold); a criterion not
    named is only measured. Recursive (c, l)-diversity's l is distinct_l's threshold
    when one is given, else 2."""

    thresholds: tuple[tuple[str, float], ...] = ()

    @classmethod
    def of(cls, **values: float) -> Model:
        """A model from keyword thresholds (`Model.of(k=5, recursive_c=3)`).

        Raises:
            SpecError: an unknown criterion or a threshold out of range.
        """
        return cls(thresholds(values.items(), "--model", ALIASES))

    @property
    def recursive_l(self) -> int:
        """Recursive (c, l)-diversity's l."""
        return int(dict(self.thresholds).get("distinct_l", 2))

    def failing(self, m: Any) -> dict[str, Any]:
        """Per requested criterion, which classes fail it (pandas or Spark columns).

        Args:
            m: the classes' measures (`kernels.classes.class_measures` columns).

        Returns:
            The criterion's label -> a boolean column, true for a failing class.
        """
        out = {}
        for key, value in self.thresholds:
            found = CRITERIA[key]
            out[found.label(value, self.recursive_l)] = ~found.meets(m[found.column], value)
        return out


@dataclass
class CheckReport:
    rows: float  # the table's (weighted) row count
    classes: int
    qi: list[str]
    sensitive: str
    measured: dict[str, float]  # the table's level of each measure
    checks: dict[str, dict] = field(default_factory=dict)  # model -> passed, classes, rows
    worst: list[dict] = field(default_factory=list)  # the smallest classes, decoded
    file_rows: int = 0  # the rows read
    weight: str | None = None  # how rows were weighted (None: each counts once)

    @property
    def passed(self) -> bool:
        return all(c["passed"] for c in self.checks.values())

    def as_dict(self) -> dict:
        return asdict(self) | {"passed": self.passed}


@dataclass(frozen=True)
class Reading:
    """How the checked file is read (docs/explanation/privacy-models.md): its weight column, a
    wide export's share columns, the sensitive attribute's declared order."""

    weight: str | None = None  # None: every row once
    shares: tuple[tuple[str, str], ...] = ()  # wide: (sensitive value, its P(S=v) column)
    order: tuple[str, ...] | None = None

    @property
    def weighted(self) -> bool:
        return self.weight is not None or bool(self.shares)

    def describe(self) -> str | None:
        if self.shares:
            return f"{self.weight or '1'} x P(...) per row (wide export)"
        return self.weight


def _number(x: float) -> float:
    """A measured count as shown: an integer when it is one (weights' rounding aside)."""
    r = round(float(x), 6)
    return int(r) if r.is_integer() else r


def columns_of(path: str) -> list[str]:
    """The column names of a CSV or Parquet file or directory (its first file)."""
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    from ..engines.files import data_files, detect_format

    kind = detect_format(path)
    first = data_files(path, kind)[0]
    try:
        if kind == "parquet":
            return list(pq.read_schema(first).names)
        return list(pacsv.open_csv(first).schema.names)
    except (pa.ArrowException, OSError) as e:
        raise DataError(f"{first}: cannot read its columns ({e})") from None


def declared_order(attr: Attribute) -> tuple[str, ...] | None:
    """An attribute's declared order of labels: `order`, its groups', or its bins' (by
    lower bound); None for plain values."""
    if attr.order is not None:
        return attr.order
    if attr.groups is not None:
        return attr.group_labels
    if attr.bins is not None:
        return tuple(b.label for b in sorted(attr.bins, key=lambda b: b.lo))
    return None


def _declared(path: str, table: str | None, sensitive: str) -> tuple[str, ...] | None:
    """The sensitive attribute's order from `table`, or from the data set's table.yaml."""
    from ..storage import is_remote

    p = Path(path)
    own = [
        q
        for q in (p / "table.yaml", p.parent / "table.yaml" if p.name == "data" else None)
        if q and q.is_file()
    ]
    spec_file = table or (None if is_remote(path) or not own else str(own[0]))
    if spec_file is None:
        return None
    attr = next(
        (a for a in load_table_spec(spec_file).attributes if sensitive in (a.name, a.column)), None
    )
    if attr is None and table is not None:
        raise SpecError(f"{table}: declares no attribute {sensitive}")
    return None if attr is None else declared_order(attr)


def reading(
    path: str, sensitive: str, weight: str | None = None, table: str | None = None
) -> Reading:
    """How to read the file at `path` (docs/explanation/privacy-models.md): `weight` a column,
    None to recognize an export's, or `UNWEIGHTED`."""
    from ..storage import is_remote

    if is_remote(path):  # no columns to look at before the engine reads it
        return Reading(
            None if weight in (None, UNWEIGHTED) else weight, (), _declared(path, table, sensitive)
        )
    cols = columns_of(path)
    prefix = f"P({sensitive}="
    shares = tuple(
        (c[len(prefix) : -1], c) for c in cols if c.startswith(prefix) and c.endswith(")")
    )
    if sensitive in cols:
        shares = ()
    elif not shares:
        raise SpecError(
            f"{path}: unknown column {sensitive}, and no {prefix}...) columns (a wide export); the input has: {', '.join(cols)}"
        )
    if weight is None and GROUP_ID in cols:
        weight = next(
            (w for w in (("size",) if shares else ("weight", "count")) if w in cols), None
        )
    elif weight == UNWEIGHTED:
        weight = None
    if weight is not None and weight not in cols:
        raise SpecError(f"{path}: unknown weight column {weight}; the input has: {', '.join(cols)}")
    return Reading(weight, shares, _declared(path, table, sensitive))


def spec_for(qi: list[str], sensitive: str, ordered: bool, how: Reading | None = None) -> dict:
    """The table spec `vpub check` reads with: labels, the sensitive attribute in its
    declared order (or as numbers when `ordered`), weights and shares as numbers."""
    how = how or Reading()
    if sensitive in qi:
        raise SpecError(f"{sensitive} is both a quasi-identifier and the sensitive attribute")
    attrs: list[dict[str, Any]] = [{"name": a} for a in qi]
    if how.shares:
        attrs += [
            {"name": f"vpubshare{i}", "source": c, "kind": "numeric"}
            for i, (_, c) in enumerate(how.shares)
        ]
    elif how.order is not None:
        attrs.append({"name": sensitive, "order": list(how.order)})
    else:
        attrs.append({"name": sensitive} | ({"kind": "numeric"} if ordered else {}))
    if how.weight is not None:
        attrs.append({"name": "vpubweight", "source": how.weight, "kind": "numeric"})
    return {"name": "checked", "attributes": attrs, "missing_values": []}


def _share_values(how: Reading, ordered: bool) -> list[str]:
    """A wide export's sensitive values, coded in order: declared, numeric (`ordered`)
    or as the columns come."""
    values = [v for v, _ in how.shares]
    if how.order is not None:
        unknown = [v for v in values if v not in how.order]
        if unknown:
            raise DataError(f"value {unknown[0]!r} is not in the declared order")
        return sorted(values, key=how.order.index)
    if ordered:
        try:
            return sorted(values, key=float)
        except ValueError:
            raise DataError(
                f"a sensitive value of the P(...) columns is not a number ({', '.join(values[:5])}); declare its order with a table spec"
            ) from None
    return values


def _weigher(
    qi: list[str], sensitive: str, luts: dict[str, np.ndarray], shares: list[tuple[int, str]] | None
):
    """Per frame of codes: the weighted (QI, sensitive) counts in 1/UNIT of a row (the
    kernel counts integers), on either engine."""

    def run(frame: pd.DataFrame) -> pd.DataFrame:
        w = (
            luts["vpubweight"][frame["vpubweight"].to_numpy()]
            if "vpubweight" in luts
            else np.ones(len(frame))
        )
        if shares is None:
            parts = [frame[qi + [sensitive]].assign(**{COUNT: w})]
        else:
            parts = [
                frame[qi].assign(
                    **{sensitive: np.int32(code), COUNT: w * luts[col][frame[col].to_numpy()]}
                )
                for code, col in shares
            ]
        out = pd.concat(parts, ignore_index=True)
        out = out[out[COUNT] > 0]
        summed = out.groupby([*qi, sensitive], sort=False, observed=True)[COUNT].sum()
        return summed.mul(UNIT).round().astype(np.int64).reset_index()

    return run


def _luts(loaded) -> dict[str, np.ndarray]:
    """Code -> number of the weight and share columns; negative weights refused."""
    luts = {}
    for a in loaded.names:
        if a == "vpubweight" or a.startswith("vpubshare"):
            values = np.array([float(x) for x in loaded.dictionaries[a].labels])
            if (values < 0).any():
                raise DataError(
                    f"weight column {loaded.spec.attribute(a).column}: negative value {values.min():g}"
                )
            luts[a] = values
    return luts


def _labels(loaded, sensitive: str) -> list[str]:
    """The sensitive attribute's labels, in code order."""
    return list(loaded.dictionaries[sensitive].labels)


def check_names(qi: list[str], sensitive: str) -> None:
    """Refuse quasi-identifiers that are none, one named twice, or the sensitive one."""
    if not qi or len(set(qi)) < len(qi) or sensitive in qi:
        raise SpecError(
            f"--qi must name distinct attributes other than the sensitive one, not {','.join(qi)!r}"
        )


def check_table(
    engine,
    path: str,
    qi: list[str],
    sensitive: str,
    model: Model,
    ordered: bool = False,
    worst: int = WORST,
    weight: str | None = None,
    table: str | None = None,
) -> CheckReport:
    """Measure (and check against `model`) the table at `path`; `weight` as `reading`;
    the QI as `check_names` allows them."""
    check_names(qi, sensitive)
    how = reading(path, sensitive, weight, table)
    try:
        loaded = engine.load(path, table_spec_from_dict(spec_for(qi, sensitive, ordered, how)))
    except DataError as e:
        if not (ordered and how.order is None and "is not a number" in str(e)):
            raise
        raise DataError(
            f"{e}; declare the order of {sensitive}'s labels in a table spec (order: or bins), e.g. --table SPEC"
        ) from None
    return _report(engine, loaded, qi, sensitive, model, ordered, worst, how)


def check_frame(
    engine,
    data: Any,
    qi: list[str],
    sensitive: str,
    model: Model,
    ordered: bool = False,
    worst: int = WORST,
    weight: str | None = None,
) -> CheckReport:
    """`check_table` of a frame (a pandas or pyspark DataFrame, a pyarrow Table:
    `frames.py`); `weight` a column of per-row weights, None for every row once."""
    from ..frames import frame_input

    check_names(qi, sensitive)
    how = Reading(weight)
    spec = table_spec_from_dict(spec_for(qi, sensitive, ordered, how))
    loaded = engine.load_frame(frame_input(data, spec))
    return _report(engine, loaded, qi, sensitive, model, ordered, worst, how)


def _report(engine, loaded, qi, sensitive, model, ordered, worst, how: Reading) -> CheckReport:
    """The measures of a loaded table and its checks against `model`."""
    values = _share_values(how, ordered) if how.shares else _labels(loaded, sensitive)
    weigh = None
    if how.weighted:
        shares = (
            [(values.index(v), f"vpubshare{i}") for i, (v, _) in enumerate(how.shares)]
            if how.shares
            else None
        )
        weigh = _weigher(qi, sensitive, _luts(loaded), shares)
    unit, l = (UNIT if weigh else 1), model.recursive_l
    summary = engine.class_summary(
        loaded, ClassJob(qi, sensitive, weigh, unit, l, ordered, model.failing, worst, LEVELS)
    )
    measured = _measured(summary.levels, l)
    checks = {
        name: {"passed": n == 0, "failing_classes": n, "rows_in_failing": _number(rows)}
        for name, (n, rows) in summary.fails.items()
    }
    classes, small, total = summary.classes, summary.smallest, summary.total
    decoded = small.assign(
        **{a: [loaded.dictionaries[a].labels[int(c)] for c in small[a]] for a in qi}
    )
    decoded["k"] = [_number(k) for k in decoded["k"]]
    return CheckReport(
        _number(total),
        classes,
        qi,
        sensitive,
        measured,
        checks,
        decoded.to_dict("records"),
        loaded.rows,
        how.describe(),
    )


def _measured(level, l: int) -> dict[str, float]:
    """The table's level of each measure from `level` (the least k, distinct and entropy
    l; the largest recursive c bound and t), as the report names them."""
    return {
        "k": _number(level["k"]),
        "distinct_l": int(level["distinct_l"]),
        "entropy_l": float(level["entropy_l"]),
        f"recursive_c (l = {l})": float(level["recursive_c"]),
        "t": float(level["t"]),
    }
