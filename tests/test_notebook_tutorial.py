"""The notebook tutorial (docs/tutorials/notebook.md): its Python cells run in order in
one namespace, in a fresh process (as a notebook's kernel is), and what they leave
behind is checked: the releases committed and audited, the estimate close to the truth."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

PAGE = Path(__file__).resolve().parents[1] / "docs" / "tutorials" / "notebook.md"

CHECKS = """
import json
print("VPUB-TUTORIAL " + json.dumps({
    "source": release.manifest["source"]["path"],
    "audited": release.audit().passed and on_spark.audit().passed,
    "engine": on_spark.manifest["engine"],
    "estimate": float(estimate),
    "truth": int(truth),
    "qit_rows": len(qit),
    "st_columns": sorted(st.columns),
}))
"""


def cells() -> list[str]:
    """The page's Python cells, in order."""
    return re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)


def test_the_tutorial_runs_as_written(tmp_path):
    script = tmp_path / "notebook.py"
    script.write_text("\n\n".join(cells()) + CHECKS)
    env = {k: v for k, v in os.environ.items() if k != "SPARK_REMOTE"}
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("VPUB-TUTORIAL "))
    seen = json.loads(line.removeprefix("VPUB-TUTORIAL "))
    assert seen["source"] == "pandas DataFrame" and seen["audited"] and seen["engine"] == "spark"
    assert seen["qit_rows"] == 5000 and "diagnosis" in seen["st_columns"]
    assert abs(seen["estimate"] - seen["truth"]) <= max(30, 0.5 * seen["truth"])
