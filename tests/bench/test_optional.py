"""The bench extra: without matplotlib (or aiohttp) a run that needs it stops with one
line naming the extra, and the library's own commands never import either."""

from __future__ import annotations

import subprocess
import sys

import pytest

from vpub_bench.common import optional
from vpub_spark.errors import SpecError


def test_a_missing_module_of_the_extra_is_named_with_its_install_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(SpecError, match=r"needs matplotlib: pip install 'vpub_spark\[bench\]'"):
        optional("matplotlib.pyplot")
    assert optional("json").dumps([1]) == "[1]"


def test_the_library_commands_load_neither_matplotlib_nor_aiohttp():
    code = (
        "import sys; from vpub_spark.cli import build_parser; build_parser(); "
        "import vpub_spark.api, vpub_spark.demo, vpub_spark.publishing.pipeline; "
        "print(sorted(m for m in ('matplotlib', 'aiohttp') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
