"""What a release must never show, and how a failed write ends."""

from __future__ import annotations

import json
import resource
import shutil
import subprocess

from release_helpers import RULES_1_3, TABLE1, publish_inprocess, vpub, write_table

from vpub_spark.cli import main
from vpub_spark.release.audit.release import audit_release


def test_no_absolute_path_and_no_store_path_in_a_manifest(tmp_path):
    data = write_table(TABLE1, tmp_path / "t")
    r = publish_inprocess(data, tmp_path / "out", RULES_1_3)  # absolute input and output paths
    text = (r.path / "manifest.json").read_text()
    assert str(tmp_path) not in text
    manifest = json.loads(text)
    assert manifest["source"]["path"] == ".../t" and manifest["config"]["output_path"] == ".../out"
    assert audit_release(r.path).passed


def test_the_audit_refuses_a_manifest_naming_a_local_path_or_the_store(tmp_path):
    data = write_table(TABLE1, tmp_path / "t")
    r = publish_inprocess(data, tmp_path / "out", RULES_1_3)
    for edit, failing in (
        (lambda m: m["source"].update(path="/home/owner/patients.csv"), "no local paths"),
        (
            lambda m: m["config"].update(marginals={"state": "private/store"}),
            "private store unnamed",
        ),
    ):
        copy = tmp_path / f"copy-{failing[:3]}"
        shutil.copytree(r.path, copy)
        m = json.loads((copy / "manifest.json").read_text())
        edit(m)
        (copy / "manifest.json").write_text(json.dumps(m))
        report = audit_release(copy)
        assert not report.passed and [c.name for c in report.failures] == [failing]


def test_audit_with_source_and_a_missing_part_exits_1(tmp_path, capsys):
    data = write_table(TABLE1, tmp_path / "t")
    r = publish_inprocess(data, tmp_path / "out", RULES_1_3)
    table = next((r.path / "tables").iterdir()).name
    shutil.rmtree(r.path / "tables" / table / "st")
    capsys.readouterr()
    argv = ["audit", str(r.path), "--source", str(data), "--engine", "inprocess", "--json"]
    assert main(argv) == 1
    failures = json.loads(capsys.readouterr().out)["failures"]
    assert f"{table}: readable: tables/{table}/st: missing or no Parquet files" in failures
    assert any(f.startswith(f"{table}/st: checksums:") for f in failures)


def test_a_write_that_fails_midway_is_one_line_and_commits_nothing(tmp_path):
    """A file-size limit makes the writes fail (EFBIG, as a full disk gives ENOSPC): one
    line on stderr, exit 2, no release, no staging directory, no lock left."""
    data = write_table(TABLE1, tmp_path / "t")
    conf = tmp_path / "c.yaml"
    conf.write_text(
        json.dumps(
            {
                "input": {"path": str(data)},
                "rules": RULES_1_3,
                "output": {"path": str(tmp_path / "out"), "release_id": "r"},
            }
        )
    )

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (600, 600))

    cmd = vpub("publish", "--config", str(conf), "--engine", "inprocess")
    done = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=limit, timeout=120)
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()
    assert (
        len(last) == 1
        and last[0].startswith("vpub: error: cannot write ")
        and "Traceback" not in done.stderr
    )
    assert "File too large" in last[0]
    assert list((tmp_path / "out").iterdir()) == []
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)  # no limit: commits
    assert done.returncode == 0 and audit_release(tmp_path / "out" / "r").passed
