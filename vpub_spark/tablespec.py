"""Load a table spec from YAML (`input.table`; docs/reference/table-spec.md), once, at the edge.

```yaml
name: adult
missing: drop            # drop rows with a missing value (counted) | reject them (error)
missing_values: ["?", ""]
encoding: utf-8          # of CSV input (default); undecodable bytes are an error naming file and line
attributes:
  - {name: age, kind: numeric, bins: [[17, 24], [25, 34]]}        # labels "17-24", ...
  - {name: sex, kind: categorical, order: [Female, Male]}
  - name: country
    source: native-country
    groups: {US: [United-States]}
    rest: non-US                                                    # every other value
```
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from .errors import SpecError
from .model import (
    Attribute,
    CategoryGroup,
    NumericBin,
    TableSpec,
    number_label,
)
from .options import refuse_unknown, yaml_keys


def _bins(name: str, raw: Any) -> tuple[NumericBin, ...]:
    out = []
    for b in raw:
        if isinstance(b, (list, tuple)) and len(b) == 2:
            lo, hi = float(b[0]), float(b[1])
            out.append(NumericBin(f"{number_label(lo)}-{number_label(hi)}", lo, hi))
        elif isinstance(b, dict) and {"min", "max"} <= set(b):
            lo, hi = float(b["min"]), float(b["max"])
            out.append(
                NumericBin(str(b.get("label", f"{number_label(lo)}-{number_label(hi)}")), lo, hi)
            )
        else:
            raise SpecError(
                f"attribute {name}: a bin is [min, max] or {{label, min, max}}, not {b!r}"
            )
    return tuple(out)


def attribute_from_dict(d: dict) -> Attribute:
    if not isinstance(d, dict) or "name" not in d:
        raise SpecError(f"an attribute needs at least a name: {d!r}")
    refuse_unknown(d, yaml_keys(Attribute), f"attribute {d['name']}")
    groups = d.get("groups")
    return Attribute(
        name=str(d["name"]),
        kind=d.get("kind", "categorical"),
        source=str(d["source"]) if d.get("source") is not None else None,
        order=tuple(str(v) for v in d["order"]) if d.get("order") is not None else None,
        bins=_bins(d["name"], d["bins"]) if d.get("bins") is not None else None,
        groups=tuple(CategoryGroup(str(k), tuple(str(m) for m in v)) for k, v in groups.items())
        if groups is not None
        else None,
        rest=str(d["rest"]) if d.get("rest") is not None else None,
    )


def table_spec_from_dict(d: dict) -> TableSpec:
    if not isinstance(d, dict) or "attributes" not in d:
        raise SpecError("a table spec needs an `attributes` list")
    refuse_unknown(d, yaml_keys(TableSpec), "table spec")
    return TableSpec(
        attributes=tuple(attribute_from_dict(a) for a in d["attributes"]),
        name=str(d.get("name", "table")),
        missing=d.get("missing", "drop"),
        missing_values=tuple(str(v) for v in d.get("missing_values", ("?", ""))),
        encoding=str(d.get("encoding", "utf-8")),
    )


def load_yaml(path: str | Path) -> Any:
    """A YAML file's content; a missing file or a syntax error is a one-line SpecError
    naming the file, and for a syntax error its line and column."""
    p = Path(path)
    if not p.is_file():
        raise SpecError(f"file not found: {p}")
    try:
        return yaml.safe_load(p.read_text())
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"{p}:{mark.line + 1}:{mark.column + 1}" if mark else str(p)
        what = " ".join(str(e.problem or e.context or "syntax error").split())
        raise SpecError(f"{where}: not valid YAML: {what}") from None
    except yaml.YAMLError as e:
        raise SpecError(f"{p}: not valid YAML: {' '.join(str(e).split())}") from None


def load_table_spec(path: str | Path) -> TableSpec:
    try:
        return table_spec_from_dict(load_yaml(path))
    except SpecError as e:
        raise SpecError(f"{path}: {e}") from None


def table_spec_to_dict(spec: TableSpec) -> dict:
    def attr(a: Attribute) -> dict:
        d: dict[str, Any] = {"name": a.name, "kind": a.kind}
        if a.source:
            d["source"] = a.source
        if a.order:
            d["order"] = list(a.order)
        if a.bins:
            d["bins"] = [{"label": b.label, "min": b.lo, "max": b.hi} for b in a.bins]
        if a.groups:
            d["groups"] = {g.label: list(g.members) for g in a.groups}
        if a.rest:
            d["rest"] = a.rest
        return d

    return {
        "name": spec.name,
        "missing": spec.missing,
        "missing_values": list(spec.missing_values),
        "encoding": spec.encoding,
        "attributes": [attr(a) for a in spec.attributes],
    }


def write_table_spec(spec: TableSpec, path: str | Path) -> None:
    Path(path).write_text(yaml.safe_dump(table_spec_to_dict(spec), sort_keys=False))
