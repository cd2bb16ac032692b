"""The auditor fuzzed (Hypothesis, derandomized): every file of a signed release and of a
private store damaged at random, by a byte flipped, a truncation, a deletion, and for
Parquet files a column renamed or retyped; `vpub audit REL --verify-key` and `vpub
statdb verify STORE --verify-key` run through the real entry point in process.

The property: neither ever passes a damaged copy (exit 0), and neither ends in a
traceback (`main` returns; a refusal is one `vpub: error:` line). The integrity data
(every part's SHA-256 in the manifest, store.json's seal, the Ed25519 signature over
the manifest) is what catches most edits; tests/release/test_integrity.py shows which
semantic check catches each edit once a forger has re-signed."""

from __future__ import annotations

import contextlib
import io
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from release_helpers import RULES_1_3, TABLE1, marginals_store, publish_inprocess, write_table

from vpub_spark.cli import main
from vpub_spark.release.signing import generate_keys

CASES = settings(
    max_examples=200,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture(scope="module")
def signed(tmp_path_factory):
    """(a signed anatomy release of 000 Table 1, a signed marginals store, verify key)."""
    tmp = tmp_path_factory.mktemp("fuzz-audit")
    signing, verify = generate_keys(tmp / "keys")
    data = write_table(TABLE1, tmp / "t")
    out = {"path": str(tmp / "out"), "release_id": "r", "sign_key": str(signing)}
    release = publish_inprocess(data, tmp / "out", RULES_1_3, output=out).path
    rng = np.random.default_rng(2)
    frame = pd.DataFrame(
        {"age": rng.choice(["a1", "a2", "a3", "a4"], 90), "job": rng.choice(list("pqrs"), 90)}
    )
    store, _ = marginals_store(frame, tmp / "m", ["age"], "job", 3, 4, sign_key=str(signing))
    assert _code("audit", str(release), "--verify-key", str(verify)) == 0
    assert _code("statdb", "verify", str(store), "--verify-key", str(verify)) == 0
    return Path(release), Path(store), str(verify)


def _code(*argv: str) -> int:
    """`vpub ARGV` in process: its exit code; a refusal has exactly one error line."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(list(argv))
    errors = [x for x in err.getvalue().splitlines() if x.startswith("vpub: error:")]
    assert len(errors) == (code == 2), (argv, err.getvalue())
    return code


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def _damage(path: Path, data: st.DataObject) -> str:
    """One random damage to the file at `path`; what was done, for the failure message."""
    raw = path.read_bytes()
    kinds = ["delete"] + (["flip", "truncate"] if raw else [])
    kinds += ["rename", "retype"] if path.suffix == ".parquet" else []
    kind = data.draw(st.sampled_from(kinds))
    if kind == "delete":
        path.unlink()
    elif kind == "flip":
        at, bit = data.draw(st.integers(0, len(raw) - 1)), data.draw(st.integers(0, 7))
        path.write_bytes(raw[:at] + bytes([raw[at] ^ (1 << bit)]) + raw[at + 1 :])
        kind += f" byte {at} bit {bit}"
    elif kind == "truncate":
        at = data.draw(st.integers(0, len(raw) - 1))
        path.write_bytes(raw[:at])
        kind += f" at {at}"
    else:
        table = pq.read_table(path)
        column = data.draw(st.sampled_from(table.column_names))
        i = table.column_names.index(column)
        if kind == "rename":
            table = table.rename_columns(
                [*table.column_names[:i], column + "_", *table.column_names[i + 1 :]]
            )
        else:
            values = pa.array([str(v) for v in table.column(i).to_pylist()], pa.string())
            if pa.types.is_string(table.schema.field(i).type):
                values = pa.array(range(table.num_rows), pa.int64())
            table = table.set_column(i, column, values)
        pq.write_table(table, path)
        kind += f" {column}"
    return kind


@pytest.mark.parametrize("target", ["release", "store"])
@CASES
@given(data=st.data())
def test_no_damaged_copy_passes_its_check(signed, target, data):
    """`vpub audit` of a damaged release, `vpub statdb verify` of a damaged store."""
    release, store, verify = signed
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / target
        shutil.copytree(release if target == "release" else store, copy)
        name = data.draw(st.sampled_from(_files(copy)))
        done = _damage(copy / name, data)
        command = ["audit"] if target == "release" else ["statdb", "verify"]
        assert _code(*command, str(copy), "--verify-key", verify) != 0, (name, done)


def test_a_part_truncated_to_nothing_fails_the_audit_in_one_table(signed, tmp_path):
    """Found by the fuzzer: the secrecy check read the Parquet metadata of an empty part
    and ended in pyarrow's ArrowInvalid traceback."""
    release, _, verify = signed
    copy = tmp_path / "r"
    shutil.copytree(release, copy)
    part = next(copy.rglob("*.parquet"))
    part.write_bytes(b"")
    assert _code("audit", str(copy), "--verify-key", verify) == 1


def test_a_manifest_that_is_not_utf8_is_refused_in_one_line(signed, tmp_path):
    """Found by the fuzzer: a flipped first byte of manifest.json ended in a
    UnicodeDecodeError traceback."""
    release, _, verify = signed
    copy = tmp_path / "r"
    shutil.copytree(release, copy)
    raw = (copy / "manifest.json").read_bytes()
    (copy / "manifest.json").write_bytes(bytes([raw[0] ^ 0x80]) + raw[1:])
    assert _code("audit", str(copy), "--verify-key", verify) != 0


def test_a_part_whose_strings_are_not_utf8_fails_the_audit(signed, tmp_path):
    """Found by the fuzzer: a bit flipped inside a part's string data (byte 312 of the
    first table's ST) ended in a UnicodeDecodeError from pyarrow."""
    release, _, verify = signed
    copy = tmp_path / "r"
    shutil.copytree(release, copy)
    part = copy / "tables" / "t1" / "st" / "part-00000.parquet"
    raw = part.read_bytes()
    part.write_bytes(raw[:312] + bytes([raw[312] ^ 0x80]) + raw[313:])
    assert _code("audit", str(copy), "--verify-key", verify) == 1


def test_a_store_row_id_out_of_any_range_fails_its_verification(signed, tmp_path):
    """Found by the fuzzer: a flipped high bit of a tuple's row id made the "every tuple
    once" check allocate a count per possible id (2 TiB) and end in a MemoryError."""
    from vpub_spark.release.stores.store import ROW, bucket_files

    _, store, verify = signed
    copy = tmp_path / "s"
    shutil.copytree(store, copy)
    part = bucket_files(copy)[0]
    table = pq.read_table(part)
    rows = table.column(ROW).to_numpy().copy()
    rows[0] = 1 << 40
    i = table.column_names.index(ROW)
    pq.write_table(table.set_column(i, ROW, pa.array(rows, table.schema.field(i).type)), part)
    assert _code("statdb", "verify", str(copy), "--verify-key", verify) == 1
