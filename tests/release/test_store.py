"""The private bucket store (release/store.py, DESIGN.md §9): owner-only, never inside
the public output, never mistaken for something else."""

from __future__ import annotations

import json
import stat

import pytest

from vpub_spark.errors import SpecError, VpubError
from vpub_spark.release.store import (
    STORE_FILE,
    STORE_FORMAT,
    check_store_location,
    read_store,
    restrict,
    write_store,
)


def _mode(p) -> int:
    return stat.S_IMODE(p.stat().st_mode)


@pytest.mark.parametrize("where", ["out", "out/private", "out/a/b"])
def test_a_store_inside_the_output_is_refused(tmp_path, where):
    with pytest.raises(SpecError, match="must not be inside the output directory"):
        check_store_location(tmp_path / where, tmp_path / "out")


def test_a_new_store_must_not_replace_an_existing_one(tmp_path):
    state = tmp_path / "store"
    state.mkdir()
    write_store(state, {"format": STORE_FORMAT})
    with pytest.raises(VpubError, match="already a bucket store; add marginals to it"):
        check_store_location(state, tmp_path / "out")
    check_store_location(state, tmp_path / "out", new=False)  # `marginals add` reuses it


def test_written_atomically_and_owner_only(tmp_path):
    write_store(tmp_path, {"format": STORE_FORMAT, "store_id": "abc"})
    assert _mode(tmp_path / STORE_FILE) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == [STORE_FILE]  # no temporary file left
    assert read_store(tmp_path)["store_id"] == "abc"


def test_restrict_makes_every_file_and_directory_owner_only(tmp_path):
    (tmp_path / "buckets").mkdir(mode=0o755)
    (tmp_path / "buckets" / "part-00000.parquet").write_text("x")
    (tmp_path / "buckets" / "part-00000.parquet").chmod(0o644)
    restrict(tmp_path)
    assert _mode(tmp_path) == _mode(tmp_path / "buckets") == 0o700
    assert _mode(tmp_path / "buckets" / "part-00000.parquet") == 0o600


def test_not_a_store_or_another_format_is_refused(tmp_path):
    with pytest.raises(VpubError, match="not a bucket store"):
        read_store(tmp_path)
    (tmp_path / STORE_FILE).write_text(json.dumps({"format": STORE_FORMAT + 1}))
    with pytest.raises(
        VpubError, match=f"store format {STORE_FORMAT + 1}, this version reads {STORE_FORMAT}"
    ):
        read_store(tmp_path)
