"""The public API (`vpub_spark.publish`, `open_release`, `Release`): a release published
from a data path, a config file or a mapping is the one `vpub publish` writes, it audits,
it answers `vpub query`'s estimate, and bad input is refused with nothing written;
`import vpub_spark` imports nothing heavy."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import yaml
from release_helpers import contents, same_contents, write_table

import vpub_spark
from vpub_spark.errors import SpecError

RULES = ["age, gender -> disease", "zip -> disease"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    rng = np.random.default_rng(3)
    n = 600
    frame = pd.DataFrame(
        {
            "age": rng.choice(["20", "30", "40", "50"], n),
            "gender": rng.choice(["F", "M"], n),
            "zip": rng.choice(["z1", "z2", "z3"], n),
            "disease": rng.choice(["flu", "hiv", "cold", "gout", "acne"], n),
        }
    )
    return write_table(frame, tmp_path_factory.mktemp("t") / "t")


def test_publish_from_data_returns_the_audited_release(data, tmp_path):
    rel = vpub_spark.publish(
        data, rules=RULES, privacy=3, method="uad", output=tmp_path, engine="inprocess", seed=5
    )
    assert isinstance(rel, vpub_spark.Release) and rel.manifest["privacy"]["l"] == 3
    assert rel.audit(source=str(data / "data")).passed
    assert set(rel.timings) and rel.tables == [t["name"] for t in rel.manifest["tables"]]
    everyone = "age in ('20', '30', '40', '50')"
    assert rel.query(everyone) == pytest.approx(600)
    opened = vpub_spark.open_release(rel.path)
    assert opened.manifest == rel.manifest
    first = rel.tables[0]
    assert len(opened.to_pandas(first)) > 0
    with pytest.raises(SpecError, match="no table 'nope'"):
        opened.to_arrow("nope")


def test_query_gives_what_vpub_query_prints(data, tmp_path, capsys):
    from vpub_spark.cli import main

    rel = vpub_spark.publish(
        data, rules=RULES, privacy={"l": 2}, output=tmp_path, engine="inprocess", seed=5
    )
    where = "age = '30' and gender = 'F'"
    assert main(["query", rel.path, "--where", where]) == 0
    printed = capsys.readouterr().out.split("estimate:")[1].split()[0].replace(",", "")
    assert float(printed) == pytest.approx(rel.query(where), abs=0.05)


def test_a_config_file_or_mapping_gives_the_release_vpub_publish_writes(data, tmp_path):
    from vpub_spark.cli import main

    cfg = {
        "input": {"path": str(data)},
        "privacy": {"l": 2},
        "rules": RULES,
        "method": "gd",
        "engine": "inprocess",
        "output": {"path": str(tmp_path / "cli"), "release_id": "r"},
        "seed": 9,
    }
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(cfg))
    assert main(["publish", "--config", str(path)]) == 0
    from_file = vpub_spark.publish(path, output=tmp_path / "file")
    from_mapping = vpub_spark.publish(cfg, output=tmp_path / "mapping")
    for rel in (from_file, from_mapping):
        assert same_contents(contents(tmp_path / "cli" / "r"), contents(rel.path))


def test_bad_input_is_refused_and_nothing_is_written(data, tmp_path):
    with pytest.raises(SpecError, match="method"):
        vpub_spark.publish(
            data, rules=RULES, method="magic", output=tmp_path / "out", engine="inprocess"
        )
    with pytest.raises(SpecError, match="rules must be a non-empty list"):
        vpub_spark.publish(data, rules=[], output=tmp_path / "out", engine="inprocess")
    assert not list((tmp_path).rglob("manifest.json"))


def test_importing_the_package_imports_nothing_heavy():
    probe = "import sys, vpub_spark; print(sorted(m.split('.')[0] for m in sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True).stdout
    assert not {"pandas", "pyarrow", "numpy", "pyspark"} & set(eval(loaded))


def test_open_store_answers_with_an_interval_that_holds_the_true_count(tmp_path):
    from release_helpers import job_table, marginal_release

    marginal_release(tmp_path, seed=3, n=800)
    store = vpub_spark.open_store(tmp_path / "private" / "s")
    frame = job_table(3, 800)
    answer = store.count("age = '20'")
    truth = int((frame["age"].astype(str) == "20").sum())
    assert answer.low <= truth <= answer.high
    with pytest.raises(vpub_spark.VpubError):
        vpub_spark.open_store(tmp_path / "out")
