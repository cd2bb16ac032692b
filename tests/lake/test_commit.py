"""Staging (lake/commit.py, docs/reference/release-format.md): a directory appears
complete or not at all."""

from __future__ import annotations

import os
import socket
import stat

import pytest

from vpub_spark.errors import VpubError
from vpub_spark.lake.commit import OWNER, check_target, remove_stale_stages, staged_directory


def _mode(p) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def test_success_renames_the_stage_into_place(tmp_path):
    target = tmp_path / "out" / "r"
    with staged_directory(target) as stage:
        assert stage.parent == target.parent and stage.name.startswith(".r.staging-")
        assert not target.exists()  # nothing visible while staging
        assert (stage / OWNER).read_text().split() == [socket.gethostname(), str(os.getpid())]
        (stage / "f").write_text("x")
    assert (target / "f").read_text() == "x"
    assert not (target / OWNER).exists()
    assert sorted(p.name for p in target.parent.iterdir()) == ["r"]


def test_a_failure_leaves_the_target_as_it_was(tmp_path):
    target = tmp_path / "r"
    target.mkdir()
    (target / "old").write_text("kept")
    with (
        pytest.raises(RuntimeError, match="boom"),
        staged_directory(target, overwrite=True) as stage,
    ):
        (stage / "new").write_text("half")
        raise RuntimeError("boom")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r"]
    assert sorted(p.name for p in target.iterdir()) == ["old"]


def test_a_committed_target_is_refused_before_anything_is_staged(tmp_path):
    target = tmp_path / "r"
    target.mkdir()
    (target / "manifest.json").write_text("{}")
    with pytest.raises(VpubError, match="already exists and is not empty; pass --overwrite"):
        with staged_directory(target):
            pass
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r"]


def test_overwrite_replaces_the_whole_directory(tmp_path):
    target = tmp_path / "r"
    target.mkdir()
    (target / "old").write_text("x")
    with staged_directory(target, overwrite=True) as stage:
        (stage / "new").write_text("y")
    assert sorted(p.name for p in target.iterdir()) == ["new"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r"]  # the old copy is gone too


def test_private_stages_are_owner_only_whatever_the_umask(tmp_path):
    old = os.umask(0)
    try:
        with staged_directory(tmp_path / "store", private=True) as stage:
            assert _mode(stage) == 0o700
    finally:
        os.umask(old)
    assert _mode(tmp_path / "store") == 0o700


def test_an_output_that_cannot_be_created_is_a_clear_error(tmp_path):
    (tmp_path / "file").write_text("not a directory")
    with pytest.raises(VpubError, match="cannot create the output directory"):
        check_target(tmp_path / "file" / "r", overwrite=False)


def test_only_dead_local_owners_stages_are_removed(tmp_path):
    target = tmp_path / "r"
    owners = {
        "dead": f"{socket.gethostname()} 999999999",  # no such process
        "alive": f"{socket.gethostname()} {os.getpid()}",
        "remote": "another-host 1",  # cannot tell: left alone
        "unreadable": "garbage",
    }
    for name, owner in owners.items():
        stage = tmp_path / f".r.staging-{name}"
        stage.mkdir()
        (stage / OWNER).write_text(owner)
    (tmp_path / ".r.staging-ownerless").mkdir()  # killed between mkdir and its owner
    (tmp_path / ".r.staging-empty").mkdir()
    (tmp_path / ".r.staging-empty" / OWNER).write_text("")
    removed = remove_stale_stages(target)
    assert sorted(p.name for p in removed) == [
        ".r.staging-dead",
        ".r.staging-empty",
        ".r.staging-ownerless",
    ]
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == [".r.staging-alive", ".r.staging-remote", ".r.staging-unreadable"]
