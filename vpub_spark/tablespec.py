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
from .model import Attribute, TableSpec
from .options import parse_options


def table_spec_from_dict(d: Any) -> TableSpec:
    """A table spec from its YAML mapping, by the options `TableSpec` and `Attribute`
    declare (`options.parse_options`).

    Raises:
        SpecError: no `attributes` list, an unknown key, or a value its option refuses.
    """
    if not isinstance(d, dict) or "attributes" not in d:
        raise SpecError("a table spec needs an `attributes` list")
    return parse_options(TableSpec, d, "table spec")


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
