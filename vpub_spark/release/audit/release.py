"""The auditor (docs/explanation/auditor.md): re-checks a release from its files alone.

It shares no code with the writers or the kernels (the source fingerprint's definition
aside): it reads the manifest and the Parquet files with pyarrow and checks that the
manifest's schema is GNF for its rules (000 Definition 5) with the verdicts it records
(m-invariant marginals: the same signatures in every marginal, 002 Theorems 3-4), that
every table covers every row, and each table with its kind's checks
(release/audit/checks.py, through the registry in release/kinds.py): per anatomy table that
QIT and ST agree on the groups and their sizes and that in every group no sensitive
value has a share above 1/l; per multi-SA table, the condition of 000 Appendix B in
every group and how suppressed groups look; per generalized marginal (002), that every
group is m-unique and its box an interval of the published domain; per projection,
that it is aggregated. With the source data it also checks that every table's multisets equal the
source's projections (nothing lost, nothing invented), reading the source with the
table spec the manifest records.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ...engines import make_engine
from ...engines.base import Engine
from ...errors import VpubError
from ...gnf import check_gnf
from ...model import SHARED_GROUPING, PublishedTable, Schema
from ...rules import parse_rules
from ..kinds import table_kind
from ..layout import FORMAT_VERSION, GROUP, MANIFEST, PRIVATE
from ..reader import UNREADABLE, ReleaseReader, open_release
from ..secret import keyed, proves, read_secret
from ..signing import SIGNATURE, verify
from .checks import AuditReport, Checker, row_multisets
from .criteria import criteria_checks
from .distributed import (
    checksums_agree,
    combined_checks,
    file_group_ranges,
    groups_apart,
    is_unit_kind,
    sha256_of,
    summaries,
)
from .invariance import invariance_checks
from .source import SourceCounts, difference, labels

REQUIRED = (
    "format_version",
    "release_id",
    "created_at",
    "software_version",
    "randomness",
    "source",
    "privacy",
    "rules",
    "method",
    "tables",
    "gnf",
)


def audit_release(
    path: str | Path | ReleaseReader,
    source: str | None = None,
    require_committed: bool = True,
    engine: Engine | None = None,
    verify_key: str | None = None,
    distributed: bool = False,
    secret: str | None = None,
) -> AuditReport:
    """Every check of a release again, from its files (docs/explanation/auditor.md).

    Args:
        path: the release's directory or URI, or a reader opened on it: a holding
            reader (`ReleaseReader.holding_parts`) keeps the parts the audit read for
            its caller.
        source: the source data: every table's multisets are compared with it too.
        require_committed: fail a release without its `_SUCCESS` (a stage is audited
            before it has one).
        engine: reads `source` and, `distributed`, runs the per-table checks; default:
            one made by name, in process. With Spark only aggregates reach the auditor.
        verify_key: an Ed25519 public key the manifest's signature must verify with.
        distributed: anatomy and generalized tables are audited file set by file set in
            the engine's tasks, only their summaries reaching this process
            (`release/audit/distributed.py`).
        secret: the owner's run record, private store or seed file: the manifest's
            proof and keyed source fingerprint are checked with it.

    Returns:
        The report: every check, passed or failed, with its details."""
    report = AuditReport((path.path if isinstance(path, ReleaseReader) else Path(path)).name)
    check = report.check
    try:
        rel = _opened(path, in_place=distributed and engine is not None)
    except VpubError as e:
        check("manifest", False, str(e))
        return report
    if not distributed:  # each part read whole once, its columns then served from memory
        rel = rel.holding_parts()
    seed = _secrecy_checks(rel, rel.manifest, secret, check)  # even of an unreadable one
    read = _manifest_checks(rel, require_committed, check)
    if read is None:
        return report
    m, l, rows, rules, tables = read
    _path_checks(m, check)
    _signature_checks(rel, m, verify_key, report)
    if m["privacy"].get("model") == "m-invariance":
        invariance_checks(rel, tables, check)
    else:
        _schema_checks(m, tables, rules, check)
    units = summaries(rel, l, engine) if distributed and engine is not None else None
    _every_table_checks(rel, m, tables, l, rows, units, check)
    criteria_checks(rel, m, check)
    _shared_grouping_checks(rel, m, check)
    _suppression_checks(m, check)
    if source is not None:
        _source_checks(rel, tables, source, check, engine, seed)
    return report


def _opened(path: str | Path | ReleaseReader, in_place: bool) -> ReleaseReader:
    """The release at `path` opened (`open_release`); a reader is taken as it is."""
    return path if isinstance(path, ReleaseReader) else open_release(path, in_place=in_place)


def _every_table_checks(
    rel: ReleaseReader,
    m: dict,
    tables: list[PublishedTable],
    l: int,
    rows: int,
    units: dict | None,
    check: Checker,
) -> None:
    """The tables on disk are the manifest's, and each table's checks: here, or from the
    summaries its file sets gave in the engine's tasks (`units`)."""
    on_disk = rel.table_names()
    listed = {t.name for t in tables}
    check(
        "tables on disk",
        on_disk == listed,
        f"on disk {sorted(on_disk)}, in the manifest {sorted(listed)}",
    )
    for entry, t in zip(m["tables"], tables, strict=True):
        try:
            if units is not None and is_unit_kind(t.kind):
                _table_facts(entry, t, rows, check)
                combined_checks(entry, t.name, rows, units.get(t.name, []), check)
                continue
            _table_checks(rel, entry, t, l, rows, check)
        except UNREADABLE as e:
            check(f"{t.name}: readable", False, str(e))


def _signature_checks(
    rel: ReleaseReader, m: dict, verify_key: str | None, report: AuditReport
) -> None:
    """With a key, the manifest's signature; without one, a warning if it is signed."""
    if verify_key is not None:
        ok, why = verify(rel.path, verify_key)
        report.check("signature", ok, why)
    elif m.get("signed_by"):
        report.warnings.append(
            f"the release is signed ({m['signed_by']}) but no --verify-key was given: its signature was not checked"
        )


def _secrecy_checks(rel: ReleaseReader, m: dict, secret: str | None, check: Checker) -> int | None:
    """No public file names the seed (release/secret.py): not the manifest (any key
    holding `seed` with a number), the release id, the release's other text files, nor
    the Parquet files' metadata. With the owner's `secret`, the proof is checked; the
    seed is returned for the keyed source fingerprint."""
    found = [*_numeric_seeds(m, "manifest"), *_seeds_in_files(rel)]
    if SEED_TEXT.search(str(m.get("release_id", ""))):
        found.append(f"release id {m.get('release_id')}")
    check(
        "secrecy: no seed in a public file", not found, "; ".join(found[:5]) or "the seed is secret"
    )
    if secret is None:
        return None
    seed = read_secret(secret)
    check(
        "secrecy: the owner's proof",
        proves(seed, m),
        "the seed made this release"
        if proves(seed, m)
        else "the given seed did not make this release (or its files changed)",
    )
    return seed


SEED_TEXT = re.compile(r"seed[\"'\s:=_-]*(0x[0-9a-f]+|\d+)", re.IGNORECASE)


def _numeric_seeds(v: object, where: str) -> list[str]:
    """Every key path of a JSON value whose key names a seed and whose value is a number."""
    if isinstance(v, dict):
        out = []
        for k, x in v.items():
            if "seed" in str(k).lower() and _numeric(x):
                out.append(f"{where}.{k} = {x}")
            out += _numeric_seeds(x, f"{where}.{k}")
        return out
    if isinstance(v, list):
        return [f for i, x in enumerate(v) for f in _numeric_seeds(x, f"{where}[{i}]")]
    return []


def _numeric(x: object) -> bool:
    if isinstance(x, bool):
        return False
    if isinstance(x, int | float):
        return True
    try:
        int(str(x), 0)
        return True
    except ValueError:
        return False


def _seeds_in_files(rel: ReleaseReader) -> list[str]:
    """A seed in the release's other public files: text files, Parquet key-value metadata."""
    out: list[str] = []
    skip = (MANIFEST, SIGNATURE)
    for f in sorted(
        p
        for p in rel.path.rglob("*")
        if p.is_file() and p.name not in skip and not p.name.startswith(".")
    ):
        if f.suffix == ".parquet":
            try:
                meta = pq.read_metadata(f).metadata or {}
            except (pa.ArrowException, OSError, UnicodeDecodeError):
                continue  # unreadable: its checksum and its table's checks fail it
            out += [
                f"{f.name}: metadata {k.decode(errors='replace')}"
                for k in meta
                if b"seed" in k.lower()
            ]
        elif f.stat().st_size < 1 << 20 and SEED_TEXT.search(f.read_text(errors="replace")):
            out.append(f"{f.relative_to(rel.path)} names a seed")
    return out


def within(published: pd.DataFrame, expected: pd.DataFrame, suppressed: int) -> tuple[bool, str]:
    """Whether `published` is `expected` less `suppressed` rows: no combination above."""
    cols = [c for c in expected.columns if c != "count"]
    merged = expected.merge(
        published, on=cols, how="outer", suffixes=("_source", "_release")
    ).fillna(0)
    gap = merged["count_source"] - merged["count_release"]
    above, missing = int((gap < 0).sum()), int(gap.sum())
    return (
        above == 0 and missing == suppressed,
        f"{above} combinations above the source; {missing} rows fewer (suppressed: {suppressed})",
    )


def _suppression_checks(m: dict, check: Checker) -> None:
    """The suppressed rows add up and stay within the budget."""
    s = m.get("suppression")
    if not s:
        return
    rows, total = int(s.get("rows", 0)), int(m["source"]["rows"]) + int(s.get("rows", 0))
    check(
        "suppression: per rule",
        sum(int(v) for v in s.get("per_rule", {}).values()) == rows,
        f"{rows} rows in total",
    )
    check(
        "suppression: budget",
        rows <= float(s.get("budget", 0)) * total,
        f"{rows} of {total} rows suppressed, budget {float(s.get('budget', 0)):g}",
    )


def _manifest_checks(rel: ReleaseReader, require_committed: bool, check: Checker):
    """The manifest's fields, version and commit marker; (manifest, l or m, rows, rules,
    tables) when it is readable, else None."""
    m = rel.manifest
    missing = [k for k in REQUIRED if k not in m]
    if not check(
        "manifest fields",
        not missing,
        f"missing: {', '.join(missing)}" if missing else "all present",
    ):
        return None
    check(
        "format version",
        m["format_version"] == FORMAT_VERSION,
        f"{m['format_version']} (this auditor reads {FORMAT_VERSION})",
    )
    if require_committed:
        check(
            "committed",
            rel.committed,
            "_SUCCESS present" if rel.committed else "no _SUCCESS: the release was never committed",
        )
    try:
        privacy = m["privacy"]
        l = int(
            privacy["l"] if privacy.get("model", "l-diversity") == "l-diversity" else privacy["m"]
        )
        rows = int(m["source"]["rows"])
        rules = parse_rules(m["rules"])
        tables = [PublishedTable.from_entry(t) for t in m["tables"]]
    except (VpubError, KeyError, TypeError, ValueError) as e:
        check("manifest schema", False, f"unreadable: {e}")
        return None
    return m, l, rows, rules, tables


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _path_checks(m: dict, check: Checker) -> None:
    """A release names its private store only by its id, and shows no absolute path of
    the machine that made it: source, config, parts (docs/explanation/architecture.md,
    "Private state")."""
    places = [m.get("source", {}).get("path"), m.get("config")]
    places += [p.get("path") for t in m.get("tables", []) for p in (t.get("parts") or {}).values()]
    absolute = sorted(
        {
            s
            for s in _strings(places)
            if s.startswith(("/", "~", "file:")) or s[1:3] in (":/", ":\\")
        }
    )
    check(
        "no local paths",
        not absolute,
        "none" if not absolute else f"absolute paths: {', '.join(absolute[:3])}",
    )
    state = ((m.get("config") or {}).get("marginals") or {}).get("state")
    private = state in (None, "", PRIVATE)
    check(
        "private store unnamed",
        private,
        "named only by store.store_id" if private else "the manifest records the store's path",
    )


def _schema_checks(m: dict, tables: list[PublishedTable], rules, check: Checker) -> None:
    gnf = check_gnf(Schema(tuple(tables)), rules)
    why = "; ".join(f"rule {v.index + 1} '{v.rule}': {v.reason}" for v in gnf.violated)
    check("GNF", gnf.ok, why or f"{len(rules)} rules, each unreachable or guarded")
    recorded = m["gnf"].get("verdicts") if isinstance(m["gnf"], dict) else None
    check(
        "GNF verdicts as recorded",
        recorded == [v.as_dict() for v in gnf.verdicts],
        "the manifest's verdicts match a fresh check",
    )
    for entry, t in zip(m["tables"], tables, strict=True):
        check(
            f"{t.name}: kind",
            entry.get("kind") == t.kind,
            f"{entry.get('kind')}; sensitive: {t.sensitive or ', '.join(t.sensitive_set) or None}",
        )


def _shared_grouping_checks(rel: ReleaseReader, m: dict, check: Checker) -> None:
    """Tables said to publish one grouping (`grouping: shared`) group the same people
    alike: their QITs, on the attributes none of them holds as sensitive, with the
    group id, are one multiset."""
    entries = [t for t in m["tables"] if t.get("grouping") == SHARED_GROUPING]
    if not entries:
        return
    sensitive = {t.get("sensitive") for t in entries}
    common = [a for a in entries[0]["attributes"] if a not in sensitive]
    common = [a for a in common if all(a in t["attributes"] for t in entries)]
    try:
        qits = [rel.read(t["name"], "qit", [GROUP, *common]) for t in entries]
        seen = row_multisets(qits, [GROUP, *common])  # columns of other types: unreadable
    except UNREADABLE as e:
        check("shared grouping", False, f"unreadable: {e}")
        return
    apart = [
        t["name"]
        for t, rows in zip(entries, seen, strict=True)
        if not all(np.array_equal(a, b) for a, b in zip(rows, seen[0], strict=True))
    ]
    check(
        "shared grouping",
        len(entries) > 1 and not apart,
        f"tables {', '.join(apart)} group people unlike {entries[0]['name']}"
        if apart
        else f"{len(entries)} table(s) marked shared",
    )


def _table_facts(entry: dict, t: PublishedTable, rows: int, check: Checker) -> None:
    """What every table's manifest entry must say: its kind's parts, every row."""
    parts = set(entry.get("parts", {}))
    check(f"{t.name}: parts", parts == set(table_kind(t.kind).parts), f"{sorted(parts)}")
    check(
        f"{t.name}: rows",
        entry.get("rows") == rows,
        f"manifest says {entry.get('rows')}, the source had {rows}",
    )


def _table_checks(
    rel: ReleaseReader, entry: dict, t: PublishedTable, l: int, rows: int, check: Checker
) -> None:
    """What every table must show (its entry's facts, its files), then its kind's checks."""
    _table_facts(entry, t, rows, check)
    _checksum_checks(rel, t.name, entry, check)
    table_kind(t.kind).check(rel, entry, t, l, rows, check)
    if is_unit_kind(t.kind):
        groups_apart(t.name, file_group_ranges(rel, entry), check)


def _checksum_checks(rel: ReleaseReader, name: str, entry: dict, check: Checker) -> None:
    """The SHA-256 of every part's files on disk against the manifest's."""
    digests = {}
    for part in entry.get("parts") or {}:
        files = rel.part_files(name, part)
        digests[part] = {f: sha256_of(rel.local_file(name, part, f)) for f in files}
    checksums_agree(entry, name, digests, check)


def _source_checks(
    rel: ReleaseReader,
    tables: list[PublishedTable],
    source: str,
    check: Checker,
    engine: Engine | None = None,
    seed: int | None = None,
) -> None:
    """The source read with the recorded table spec (by `engine`: aggregates only reach
    the auditor), its fingerprint (keyed by the secret seed: checked when the owner's
    `seed` is given), and every table's multisets against it."""
    from ...kernels.partitioning import ContentShards, combine_counts, fingerprint
    from ...tablespec import table_spec_from_dict

    engine = engine or make_engine("inprocess")  # the caller's, else one by name
    loaded = engine.load(source, table_spec_from_dict(rel.manifest["source"]["table_spec"]))
    suppressed = int((rel.manifest.get("suppression") or {}).get("rows", 0))
    recorded = rel.manifest["source"]["rows"] + suppressed
    check(
        "source: rows",
        loaded.rows == recorded,
        f"source has {loaded.rows}, the manifest says {recorded}"
        + (f" ({suppressed} suppressed)" if suppressed else ""),
    )
    if (
        not suppressed and seed is not None
    ):  # the fingerprint is of the rows published; with suppression, the tables are compared within it below
        shards = combine_counts(engine.shard_counts(loaded, [], ContentShards(0)), [], {})
        same = keyed(
            seed,
            fingerprint(shards, {a: loaded.dictionaries[a].labels for a in loaded.names}).encode(),
        ) == rel.manifest["source"].get("fingerprint")
        check(
            "source: fingerprint",
            same,
            "the manifest's fingerprint"
            if same
            else "the source differs from the one the release was made from",
        )

    def source_counts(cols: list[str]) -> pd.DataFrame:
        c = engine.combination_counts(loaded, cols)
        for a in cols:
            c[a] = np.asarray(loaded.dictionaries[a].labels, dtype=object)[c[a].to_numpy()]
        return labels(c)

    counts = SourceCounts(rel, source_counts)
    for t in tables:
        try:
            _table_against_source(t, counts, source_counts, check, suppressed)
        except UNREADABLE as e:
            check(f"{t.name}: readable", False, str(e))


def _table_against_source(
    t: PublishedTable, counts: SourceCounts, source_counts, check: Checker, suppressed: int = 0
) -> None:
    """A table's value counts (its kind says which) equal the source's; with `suppressed`
    rows, the source's less exactly that many (no combination above the source's)."""
    for cols, published in table_kind(t.kind).source(counts, t, check):
        expected = source_counts(cols)
        if suppressed:
            ok, why = within(published, expected, suppressed)
            check(
                f"{t.name}: ({', '.join(cols)}) is the source less {suppressed} suppressed rows",
                ok,
                why,
            )
            continue
        same = published.equals(expected)
        check(
            f"{t.name}: ({', '.join(cols)}) equals the source",
            same,
            "same multiset" if same else difference(published, expected),
        )
