"""The private bucket store (release/stores/store.py): owner-only, never inside the public
output, never mistaken for something else; store.json sealed (its digest, the digests
of its files) and optionally signed."""

from __future__ import annotations

import hashlib
import json
import stat

import pytest

from vpub_spark.errors import SpecError, VpubError
from vpub_spark.release.stores.store import (
    SIGNATURE,
    STORE_FILE,
    STORE_FORMAT,
    check_store_location,
    content_digest,
    covered_files,
    file_digests,
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


def test_store_json_is_sealed_and_signed_or_not(tmp_path):
    """write_store adds the digest of the content; with a key, store.json.sig and
    `signed_by`; written again without a key, no signature is left behind."""
    from vpub_spark.release.signing import generate_keys

    private, _public = generate_keys(tmp_path / "keys")
    state = tmp_path / "store"
    state.mkdir()
    write_store(state, {"format": STORE_FORMAT, "store_id": "abc"}, str(private))
    meta = read_store(state)
    assert meta["digest"] == content_digest(meta) and meta["signed_by"]
    assert _mode(state / SIGNATURE) == 0o600
    write_store(state, meta)  # an old digest or signer is never kept
    again = read_store(state)
    assert "signed_by" not in again and again["digest"] == content_digest(again)
    assert sorted(p.name for p in state.iterdir()) == [STORE_FILE]


def test_the_digests_cover_buckets_and_groups_but_not_a_writers_hidden_files(tmp_path):
    for f in [
        "buckets/part-00000.parquet",
        "groups/r/t/part-00000.parquet",
        "groups/r/.t.lock",
        "groups/r/.t.staging-1/x",
        "queries.jsonl",
    ]:
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_text(f)
    assert covered_files(tmp_path) == [
        "buckets/part-00000.parquet",
        "groups/r/t/part-00000.parquet",
    ]
    digests = file_digests(tmp_path, "groups", "r", "t")
    assert list(digests) == ["groups/r/t/part-00000.parquet"]
    assert (
        digests["groups/r/t/part-00000.parquet"]
        == hashlib.sha256(b"groups/r/t/part-00000.parquet").hexdigest()
    )


def test_an_old_or_broken_store_json_is_refused_in_one_line(tmp_path):
    (tmp_path / STORE_FILE).write_text(json.dumps({"format": 1}))
    with pytest.raises(
        VpubError,
        match="store format 1 lists no digests of its files.*rebuild it with `vpub statdb build`",
    ):
        read_store(tmp_path)
    (tmp_path / STORE_FILE).write_text('{"format": 2,')
    with pytest.raises(VpubError, match="store.json: not valid JSON") as e:
        read_store(tmp_path)
    assert "\n" not in str(e.value)
