"""Mutation check: does the suite fail when the code it guards breaks?

Each mutation is one edit to the package (the auditor's l-diversity check made to pass
everything; the statistical database's store encoding one attribute with another's
labels; the Spark engine's partitions of an rda release losing a row). For each, the
script copies the checkout (`git worktree`, the current HEAD plus the working tree's
changes to tracked files), runs the tests that guard it there (they must pass), applies
the edit, runs them again and expects them to fail. It prints a line per mutation with
the test that failed, and exits 1 if any mutation survived.

    python scripts/mutation_check.py            # the guarding tests of each mutation
    python scripts/mutation_check.py --all      # the whole suite per mutation (hours)
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Mutation:
    name: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]


MUTATIONS = (
    Mutation(
        "the auditor's l-diversity check deleted (it passes every group)",
        "vpub_spark/release/audit/checks.py",
        '        f"{t.name}: {l}-diverse",\n        (top * l <= st_size).all(),',
        '        f"{t.name}: {l}-diverse",\n        True,',
        ("tests/release/test_integrity.py", "tests/release/test_release.py"),
    ),
    Mutation(
        "the statistical database's store encodes its first QI attribute wrongly",
        "vpub_spark/statdb/build.py",
        '"domains": {a: list(labels[a]) for a in [*qi, s.sensitive]},',
        '"domains": {a: list(labels[a])[:: -1 if a == qi[0] else 1] for a in [*qi, s.sensitive]},',
        ("tests/statdb/test_db.py", "tests/statdb/test_build.py"),
    ),
    Mutation(
        "the Spark engine's rda partitions lose their last row",
        "vpub_spark/engines/spark/engine.py",
        'return job.run(frame.drop(columns="__key"), part, task_id)',
        'rows = frame.drop(columns="__key")\n'
        '            if getattr(job, "algorithm", "") == "rda":\n'
        "                rows = rows.iloc[:-1]\n"
        "            return job.run(rows, part, task_id)",
        ("tests/publish/test_streamliner_release.py",),
    ),
)


def _copy(work: Path) -> None:
    """HEAD and the working tree's changes to tracked files, in `work`."""
    subprocess.run(
        ["git", "worktree", "add", "--quiet", "--detach", str(work)], cwd=ROOT, check=True
    )
    diff = subprocess.run(["git", "diff", "HEAD"], cwd=ROOT, check=True, capture_output=True)
    if diff.stdout:
        subprocess.run(["git", "apply", "-"], cwd=work, input=diff.stdout, check=True)


def _pytest(work: Path, tests: list[str]) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(work))  # the copy's package, also in Spark's workers
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-rf", "-p", "no:cacheprovider", *tests],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
    )


def _failed_test(done: subprocess.CompletedProcess) -> str:
    lines = done.stdout.strip().splitlines()
    failed = [x.removeprefix("FAILED ").split(" - ")[0] for x in lines if x.startswith("FAILED")]
    return ", ".join(failed) or (lines or ["(no output)"])[-1]


def _survives(m: Mutation, everything: bool) -> bool:
    """Whether the guarding tests (or the whole suite) pass with the mutation in place;
    first they must pass without it (the control), else the verdict would mean nothing."""
    work = Path(tempfile.mkdtemp(prefix="vpub-mutation-")) / "tree"
    tests = [] if everything else list(m.tests)
    try:
        _copy(work)
        if not everything and (control := _pytest(work, tests)).returncode != 0:
            raise SystemExit(
                f"the tests guarding {m.name!r} fail unmutated: {_failed_test(control)}"
            )
        target = work / m.path
        text = target.read_text()
        if text.count(m.old) != 1:
            raise SystemExit(f"{m.path}: the text to mutate is not there once; update {m.name!r}")
        target.write_text(text.replace(m.old, m.new))
        done = _pytest(work, tests)
        verdict = "SURVIVED" if done.returncode == 0 else f"killed by {_failed_test(done)}"
        print(f"  {m.name}: {verdict}", flush=True)
        return done.returncode == 0
    finally:
        subprocess.run(
            ["git", "worktree", "remove", "--force", str(work)],
            cwd=ROOT,
            check=False,
            capture_output=True,
        )
        shutil.rmtree(work.parent, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="run the whole suite per mutation")
    args = parser.parse_args()
    survived = [m.name for m in MUTATIONS if _survives(m, args.all)]
    print(f"{len(MUTATIONS) - len(survived)} of {len(MUTATIONS)} mutations killed")
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
