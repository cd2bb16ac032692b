"""The comparison configs shipped with vpub_bench (vpub_bench/conf/) name their inputs,
outputs and table specs relative to themselves: each must land in the checkout
(`out/`, `data/`, `conf/tables/`), as the Makefile's targets and the docs' commands
expect."""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "vpub_bench" / "conf"


def test_every_path_of_a_shipped_config_lands_in_the_checkout():
    configs = sorted(CONF.glob("*.yaml"))
    assert len(configs) >= 20
    for path in configs:
        d = yaml.safe_load(path.read_text())
        places = {"input": d["input"]["path"], "output": d["output"]["path"]}
        table = d["input"].get("table", "")
        if table.endswith(".yaml"):
            places["table"] = table
        for what, where in places.items():
            target = (CONF / where).resolve()
            top = {"input": ("out", "data"), "output": ("out",), "table": ("conf",)}[what]
            assert target.relative_to(ROOT).parts[0] in top, (path.name, what, where)
            if what == "table":
                assert target.is_file(), (path.name, where)
