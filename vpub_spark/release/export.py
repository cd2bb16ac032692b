"""Analysis-ready export: one table of a release as a flat CSV or Parquet file
that pandas or R opens without vpub, with a data dictionary (Markdown) beside it.

Layouts (decisions):
- **anatomy, `long`** (default): one row per published tuple and sensitive value of its
  group: the QI columns, `group_id`, the sensitive attribute and `weight` = c_g(s) / |g|,
  the probability the release gives that tuple's sensitive value. A tuple's weights sum
  to 1, all weights to the row count, so a weighted count is the anatomy estimate
  (docs/explanation/algorithms.md): `df[df.age == "37"].groupby("disease").weight.sum()`.
- **anatomy, `wide`**: one row per tuple, its group's distribution as columns
  `P(<S>=<value>)`.
- **generalized** (002, 003): one row per group and sensitive value (`long`: `<A>_min`,
  `<A>_max`, the sensitive attribute, `count`) or per group (`wide`: the box, `size`,
  the distribution).
- **projection**: its counts as published (`count` per combination).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..errors import DataError, StorageError
from ..model import joined_sensitive_tables, unsafe_option
from .layout import COUNT, GROUP, SIZE
from .reader import ReleaseReader

LAYOUTS = ("long", "wide")
FORMATS = ("csv", "parquet")


def _weights(st: pd.DataFrame, sensitive: str) -> pd.DataFrame:
    size = st.groupby(GROUP, observed=True)[COUNT].transform("sum")
    return st.assign(weight=st[COUNT] / size)[[GROUP, sensitive, "weight"]]


def _wide(st: pd.DataFrame, sensitive: str) -> pd.DataFrame:
    w = _weights(st, sensitive)
    out = w.pivot_table(
        index=GROUP, columns=sensitive, values="weight", fill_value=0.0, observed=True
    )
    return out.rename(columns=lambda v: f"P({sensitive}={v})").reset_index()


def flat(rel: ReleaseReader, table: str, layout: str = "long") -> pd.DataFrame:
    """The table as one flat frame (see the module docstring)."""
    if layout not in LAYOUTS:
        raise DataError(f"layout must be one of {', '.join(LAYOUTS)}, not {layout!r}")
    entry = rel.table(table)
    kind, s = entry.get("kind"), str(entry.get("sensitive"))
    if kind == "projection":
        return rel.read(table, "counts").to_pandas()
    if kind not in ("anatomy", "generalized"):
        raise DataError(
            f"table {table!r} is a {kind} table; export reads anatomy, generalized and projection tables"
        )
    rows = rel.read(table, "qit" if kind == "anatomy" else "groups").to_pandas()
    st = rel.read(table, "st").to_pandas()
    for frame in (rows, st):  # dictionary-encoded strings back to plain ones
        for c in frame.columns:
            if isinstance(frame[c].dtype, pd.CategoricalDtype):
                frame[c] = frame[c].astype(str)
    if layout == "wide":
        return rows.merge(_wide(st, s), on=GROUP, how="left")
    if kind == "anatomy":
        return (
            rows.merge(_weights(st, s), on=GROUP)
            .sort_values([GROUP, s], kind="stable")
            .reset_index(drop=True)
        )
    return rows.drop(columns=[SIZE], errors="ignore").merge(st, on=GROUP).reset_index(drop=True)


def _describe(column: str, entry: dict, layout: str) -> str:
    s, kind = entry.get("sensitive"), entry.get("kind")
    if column == GROUP:
        return "the group (QI-group) the row belongs to; rows of one group share its sensitive distribution"
    if column == "weight":
        return f"probability of this {s} value for this tuple (c_g(s) / |g|); weights sum to the row count"
    if column.startswith(f"P({s}="):
        return f"probability of {column[2:-1]} for every tuple of the group"
    if column == COUNT:
        return "number of source rows" + (
            " of the group with this sensitive value"
            if kind == "generalized"
            else " with these values"
        )
    if column == SIZE:
        return "number of source rows in the group"
    if column.endswith(("_min", "_max")):
        return f"{'lower' if column.endswith('_min') else 'upper'} end of the group's interval of {column[:-4]} (inclusive)"
    if column == s:
        return "sensitive attribute: a value present in the group (see weight / count)"
    return "quasi-identifier, as in the source (exact for anatomy and projections)"


def guarantee(manifest: dict) -> str:
    """The privacy guarantee in words: `l-diversity (l = 10) on 5 rules Q -> S`; a
    release made with an option named unsafe says it has no posterior guarantee, one
    of several tables of sensitive values that it holds per table
    (docs/explanation/threat-model.md)."""
    privacy = dict(manifest.get("privacy") or {})
    model = str(privacy.pop("model", "?"))
    params = ", ".join(f"{k} = {v}" for k, v in privacy.items())
    rules = len(manifest.get("rules") or [])
    on = f" on {rules} rule{'s' * (rules != 1)} Q -> S" if rules else ""
    words = f"{model} ({params}){on}" if params else f"{model}{on}"
    unsafe, joined = unsafe_option(manifest), joined_sensitive_tables(manifest)
    if unsafe:
        words += f", audited only: no posterior guarantee ({unsafe})"
    elif joined:
        words += f", posterior guarantee per table ({len(joined)} tables of sensitive values)"
    return words


def guarantee_lines(manifest: dict) -> list[str]:
    """The two guarantees in words (docs/explanation/threat-model.md): the audited one,
    proved from the files, and the posterior one, a property of the algorithm that the
    exhaustive adversary tests check; a release made with an option named unsafe
    (`marginals.assign: local-unsafe`, `gd.score: kl-unsafe`) has only the first.

    Args:
        manifest: the release's manifest.

    Returns:
        Two Markdown list items.
    """
    privacy = manifest.get("privacy", {})
    p = privacy.get("l") or privacy.get("m")
    audited = f"- Audited guarantee: no group shows one sensitive value in more than 1/{p} of its rows (proved from the published files by `vpub audit`)."
    unsafe = unsafe_option(manifest)
    if unsafe:
        return [
            audited,
            f"- Posterior guarantee: none beyond the audited one: the release was made with `{unsafe}`, which can let an adversary who knows the algorithm infer a value with probability above 1/{p}.",
        ]
    posterior = f"- Posterior guarantee: an adversary who knows the algorithm and everyone's quasi-identifiers, but not the owner's secret seed, infers no one's sensitive value with probability above 1/{p}"
    joined = joined_sensitive_tables(manifest)
    if joined:
        return [
            audited,
            f"{posterior} from any one of the tables {', '.join(joined)}; one who also knows how their sensitive attributes go together can combine the tables' groups beyond it (the threat model has a six-row case).",
        ]
    return [
        audited,
        f"{posterior} (tested exhaustively on small tables; the threat model lists what it does not cover).",
    ]


def dictionary(rel: ReleaseReader, table: str, frame: pd.DataFrame, layout: str) -> str:
    """The data dictionary (Markdown) of an exported table."""
    m, entry = rel.manifest, rel.table(table)
    privacy = m.get("privacy", {})
    level = (
        f"l = {privacy.get('l')}"
        if privacy.get("model", "l-diversity") == "l-diversity"
        else f"m = {privacy.get('m')}"
    )
    rules = (
        "; ".join(f"{', '.join(r['lhs'])} -> {r['rhs']}" for r in m.get("rules", []))
        or "(marginals: every QI -> the sensitive attribute)"
    )
    lines = [
        f"# {m['release_id']} / {table} ({entry.get('kind')}, layout {layout})",
        "",
        f"- Source rows: {m.get('source', {}).get('rows'):,}; exported rows: {len(frame):,}.",
        f"- Guarantee: {privacy.get('model', 'l-diversity')} with {level} for the rules {rules}.",
        *guarantee_lines(m),
        f"- Method: {m.get('method')}; random choices from a secret seed; created {m.get('created_at')} by vpub_spark {m.get('software_version')}; audited: {bool((m.get('audit') or {}).get('passed'))}.",
        "- Do not join this file with other releases of the same data on the row order or the group ids: they are not stable identifiers across releases.",
        "",
        "| column | type | meaning |",
        "|---|---|---|",
    ]
    lines += [
        f"| `{c}` | {frame[c].dtype} | {_describe(c, entry, layout)} |" for c in frame.columns
    ]
    return "\n".join(lines) + "\n"


def export(
    rel: ReleaseReader, table: str, out: str | Path, fmt: str = "csv", layout: str = "long"
) -> tuple[Path, Path]:
    """Write the flat table and its dictionary (`<out>.md`); their paths."""
    if fmt not in FORMATS:
        raise DataError(f"format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    frame = flat(rel, table, layout)
    path = Path(out)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        frame.to_csv(tmp, index=False) if fmt == "csv" else frame.to_parquet(tmp, index=False)
        tmp.replace(path)
        notes = path.with_suffix(path.suffix + ".md")
        notes.write_text(dictionary(rel, table, frame, layout))
    except OSError as e:
        raise StorageError(f"cannot write {path}: {e.strerror or e}") from None
    return path, notes
