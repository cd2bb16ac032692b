"""The Spark log file (`engines/spark/session._new_log`): owner-only, in a directory of
the user's alone; a directory others can enter, or a link to one, is never written into."""

from __future__ import annotations

import os
import stat

from vpub_spark.engines.spark.session import _new_log


def _mode(p) -> int:
    return stat.S_IMODE(os.lstat(p).st_mode)


def test_a_new_log_is_owner_only_in_the_named_private_directory(tmp_path, monkeypatch):
    logs = tmp_path / "logs"
    monkeypatch.setenv("VPUB_LOG_DIR", str(logs))
    a, b = _new_log(), _new_log()
    assert a is not None and b is not None and a != b  # never the same file twice
    assert a.parent == logs and _mode(logs) == 0o700 and _mode(a) == 0o600


def test_a_directory_others_can_enter_is_not_used(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    monkeypatch.setenv("VPUB_LOG_DIR", str(shared))
    log = _new_log()
    assert log is not None and log.parent != shared and not any(shared.iterdir())
    assert _mode(log.parent) == 0o700 and _mode(log) == 0o600


def test_a_link_in_place_of_the_directory_is_not_followed(tmp_path, monkeypatch):
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    link = tmp_path / "logs"
    link.symlink_to(target)
    monkeypatch.setenv("VPUB_LOG_DIR", str(link))
    log = _new_log()
    assert log is not None and log.parent != link and not any(target.iterdir())
