"""Config validation (docs/reference/config.md): every bad value gets its documented error, at
parse time or, for what a method needs, from the method registry before any work."""

from __future__ import annotations

import pytest

from vpub_spark.config import config_from_dict, with_overrides
from vpub_spark.errors import SpecError
from vpub_spark.publishing.registry import METHODS, method_for

BASE = {"input": {"path": "data"}, "rules": ["a -> b"], "engine": "inprocess"}


def _cfg(**changes):
    return config_from_dict(BASE | changes)


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"colour": "blue"}, "unknown keys colour"),
        ({"input": {}}, "input.path is required"),
        ({"input": "data"}, "input must be a mapping of its settings"),
        ({"engine": "dask"}, "engine must be one of auto, spark, inprocess"),
        ({"partitions": 0}, "partitions must be a whole number >= 1"),
        ({"seed": "x"}, "seed must be a whole number >= 0 and <= 3402823669"),
        ({"seed": -1}, "seed must be a whole number >= 0 and <= 3402823669"),
        (
            {"seed": 2.0**128},
            "seed must be a whole number >= 0 and <= 3402823669",
        ),  # keyed as 16 bytes
        ({"seed": 3, "seed_file": "s"}, "give seed or seed_file, not both"),
        ({"output": {"release_id": "../up"}}, "must be a plain, non-hidden directory name"),
        ({"output": {"release_id": ".hidden"}}, "must be a plain, non-hidden directory name"),
        ({"privacy": {"l": 1}}, "l-diversity needs an integer l >= 2"),
        (
            {"privacy": {"model": "k-anonymity"}},
            "privacy model must be l-diversity or m-invariance",
        ),
        ({"privacy": {"l": 2, "k": 3}}, "privacy has unknown keys k"),
        ({"privacy": {"model": "m-invariance", "m": 1}}, "m-invariance needs an integer m >= 2"),
        ({"rules": []}, "rules must be a non-empty list"),
        ({"rules": {"random": {"c": 2, "rhs": 1}}}, "rules.random has unknown keys rhs"),
        ({"rules": {"draw": {}}}, "rules must be a list or {random"),
        ({"gd": {"budget": 3}}, "gd has unknown keys budget"),
        ({"multi_sa": {"mode": "greedy"}}, "multi_sa.mode must be one of exact, partitioned"),
        ({"multi_sa": {"solver": "gurobi"}}, "multi_sa.solver must be one of"),
        ({"multi_sa": {"time_limit_s": 0}}, "multi_sa.time_limit_s must be positive"),
        ({"multi_sa": {"chunk_rows": 0}}, "multi_sa.chunk_rows must be a whole number >= 1"),
        ({"multi_sa": {"threads": 2}}, "multi_sa has unknown keys threads"),
        ({"multi_sa": {"chunk_rows": True}}, "multi_sa.chunk_rows must be a whole number >= 1"),
        ({"output": {"wait_s": "soon"}}, "output.wait_s must be a number >= 0, not 'soon'"),
        ({"output": {"wait_s": -5}}, "output.wait_s must be a number >= 0"),
        ({"gd": {"budget_s": float("nan")}}, "gd.budget_s must be a number >= 0"),
        ({"gd": {"sample_rows": 0}}, "gd.sample_rows must be a whole number >= 1"),
        ({"gd": {"sample_rows": 2.5}}, "gd.sample_rows must be a whole number >= 1"),
        ({"rules": {"random": {"c": 0}}}, "rules.random.c must be a whole number >= 1"),
        ({"marginals": {"sensitive": "s", "schemas": [["a"]]}}, "marginals.state is required"),
        (
            {"marginals": {"sensitive": "s", "schemas": "a", "state": "x"}},
            "marginals.schemas must be a list",
        ),
        (
            {"marginals": {"sensitive": "s", "schemas": [[]], "state": "x"}},
            "must be a non-empty list of attribute names",
        ),
        (
            {"marginals": {"sensitive": "s", "schemas": [["a"]], "state": "x", "chunk_rows": 0}},
            "marginals.chunk_rows must be a whole number >= 1",
        ),
        (
            {"marginals": {"sensitive": "s", "schemas": [["a"]], "state": "x", "tries": True}},
            "marginals.tries must be a whole number >= 1",
        ),
        (
            {"marginals": {"sensitive": "s", "schemas": [["a"]], "state": "x", "m": 3}},
            "marginals has unknown keys m",
        ),
    ],
)
def test_bad_values_get_their_error(changes, message):
    with pytest.raises(SpecError, match=message.replace("(", r"\(").replace("{", r"\{")):
        _cfg(**changes)


def test_errors_name_the_config_file():
    with pytest.raises(SpecError, match=r"^conf/x.yaml: "):
        config_from_dict(BASE | {"engine": "dask"}, "conf/x.yaml")


@pytest.mark.parametrize(
    "changes, message",
    [
        (
            {"method": "gd2"},
            "method must be one of uad, gd, single_attribute, multi_sa_bip, marginals",
        ),
        ({"method": "marginals"}, "method marginals needs privacy model m-invariance"),
        (
            {"method": "uad", "privacy": {"model": "m-invariance", "m": 4}},
            "method uad needs privacy model l-diversity",
        ),
        ({"method": "uad", "rules": None}, "method uad needs `rules`"),
        (
            {"method": "marginals", "privacy": {"model": "m-invariance", "m": 4}, "rules": None},
            "method marginals needs a `marginals:` section",
        ),
    ],
)
def test_the_method_registry_checks_what_a_method_needs(changes, message):
    cfg = _cfg(**changes)
    with pytest.raises(SpecError, match=message.replace("(", r"\(")):
        method_for(cfg)


def test_every_registered_method_accepts_its_own_example():
    examples = {
        "marginals": {
            "privacy": {"model": "m-invariance", "m": 4},
            "rules": None,
            "marginals": {"sensitive": "s", "schemas": [["a"]], "state": "x"},
        },
        **{n: {"rules": None, "streamliner": {"sensitive": "s"}} for n in ("rda", "gda", "ria")},
    }
    for name, method in METHODS.items():
        cfg = _cfg(method=name, **examples.get(name, {}))
        assert method_for(cfg) is method


def test_command_line_overrides():
    cfg = with_overrides(_cfg(), l=5, seed=9, output_path="elsewhere", release_id=None)
    assert (cfg.privacy.l, cfg.seed, cfg.output_path, cfg.release_id) == (5, 9, "elsewhere", None)
    assert with_overrides(cfg, m=4).privacy.as_dict() == {"model": "m-invariance", "m": 4}
    assert with_overrides(cfg, overwrite=True).overwrite
    with pytest.raises(SpecError, match="--state needs method marginals"):
        with_overrides(cfg, state="store")


def _project(tmp_path):
    """tmp/project/{conf/job.yaml, conf/spark.yaml, conf/table.yaml, data/t.csv, secret/seed}:
    every path in job.yaml relative to conf/."""
    import os

    import yaml
    from release_helpers import job_table

    root = tmp_path / "project"
    for d in ("conf", "data", "secret"):
        (root / d).mkdir(parents=True)
    job_table(2, 400).to_csv(root / "data" / "t.csv", index=False)
    (root / "conf" / "table.yaml").write_text(
        yaml.safe_dump(
            {"name": "t", "attributes": [{"name": c} for c in ("age", "zip", "sex", "job")]}
        )
    )
    (root / "conf" / "spark.yaml").write_text("master: local[1]\ndriver_memory: 1g\n")
    (root / "secret" / "seed").write_text("7\n")
    os.chmod(root / "secret", 0o700)
    os.chmod(root / "secret" / "seed", 0o600)
    job = {
        "engine": "inprocess",
        "spark": "spark.yaml",
        "rules": ["age, zip -> job"],
        "privacy": {"l": 2},
        "input": {"path": "../data/t.csv", "table": "table.yaml"},
        "seed_file": "../secret/seed",
        "output": {
            "path": "../out/releases",
            "release_id": "r",
            "sign_key": "../keys/signing-key.pem",
        },
        "private_dir": "~/vpub-test-private",
    }
    (root / "conf" / "job.yaml").write_text(yaml.safe_dump(job))
    return root


def test_relative_paths_in_a_config_resolve_against_its_directory(tmp_path, monkeypatch):
    from pathlib import Path

    from vpub_spark.config import load_config

    root = _project(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    cfg = load_config(root / "conf" / "job.yaml")
    assert cfg.input_path == str(root / "data" / "t.csv") and cfg.table == str(
        root / "conf" / "table.yaml"
    )
    assert cfg.spark == str(root / "conf" / "spark.yaml") and cfg.seed_file == str(
        root / "secret" / "seed"
    )
    assert cfg.output_path == str(root / "out" / "releases")
    assert cfg.sign_key == str(root / "keys" / "signing-key.pem")
    assert cfg.private_dir == str(Path.home() / "vpub-test-private")
    # a relative config path gives paths relative to the same working directory
    monkeypatch.chdir(root)
    rel = load_config("conf/job.yaml")
    assert (rel.input_path, rel.spark, rel.output_path) == (
        "data/t.csv",
        "conf/spark.yaml",
        "out/releases",
    )
    # the command line's paths stay relative to the working directory
    assert with_overrides(rel, input_path="mine.csv", output_path="o").input_path == "mine.csv"


def test_remote_uris_absolute_paths_and_preset_names_are_kept(tmp_path):
    import yaml

    from vpub_spark.config import load_config

    conf = tmp_path / "conf"
    conf.mkdir()
    state = str(tmp_path / "abs" / "store")
    (conf / "m.yaml").write_text(
        yaml.safe_dump(
            {
                "input": {"path": "s3://lake/in/adult", "table": "adult"},
                "output": {"path": "s3://lake/releases"},
                "privacy": {"model": "m-invariance", "m": 4},
                "method": "marginals",
                "marginals": {"sensitive": "s", "schemas": [["a"]], "state": state},
            }
        )
    )
    cfg = load_config(conf / "m.yaml")
    assert (cfg.input_path, cfg.table, cfg.output_path) == (
        "s3://lake/in/adult",
        "adult",
        "s3://lake/releases",
    )
    assert cfg.marginals is not None and cfg.marginals.state == state


def test_publish_with_a_config_outside_the_working_directory(tmp_path):
    """`vpub publish --config /abs/conf/x.yaml` from another directory finds conf/spark.yaml
    and the data next to the config, and the signed release lands in its ../out/releases."""
    import json
    import subprocess

    from release_helpers import vpub

    root = _project(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    subprocess.run(
        vpub("keys", "generate", "--out", str(root / "keys")),
        check=True,
        capture_output=True,
        timeout=120,
    )
    cmd = vpub("publish", "--config", str(root / "conf" / "job.yaml"))
    done = subprocess.run(cmd, cwd=elsewhere, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    manifest = json.loads((root / "out" / "releases" / "r" / "manifest.json").read_text())
    assert manifest["source"]["rows"] == 400 and "signed_by" in manifest
    assert list(elsewhere.iterdir()) == []


def test_a_yaml_syntax_error_is_one_line_with_file_line_and_column(tmp_path):
    from vpub_spark.config import load_config

    bad = tmp_path / "bad.yaml"
    bad.write_text("engine: inprocess\ninput:\n  path: data\n  table: [a, b\nprivacy: {l: 2}\n")
    with pytest.raises(SpecError) as e:
        load_config(bad)
    message = str(e.value)
    assert "\n" not in message and message.startswith(f"{bad}:5:8: not valid YAML: ")
    tab = tmp_path / "tab.yaml"
    tab.write_text("engine: inprocess\n\tinput: x\n")
    with pytest.raises(SpecError, match=rf"^{tab}:2:1: not valid YAML: found character '\\t'"):
        load_config(tab)
    with pytest.raises(SpecError, match="file not found"):
        load_config(tmp_path / "none.yaml")


def _probe(key: str) -> dict:
    """A config whose dotted `key` holds a value of no meaning."""
    d: dict = {"input": {"path": "in"}}
    *sections, last = key.split(".")
    holder = d
    for s in sections:
        holder = holder.setdefault(s, {})
    holder[last] = "probe"
    return d


def test_the_reference_keys_are_the_keys_the_parser_accepts():
    """docs/reference/config.md is generated from `yaml_keys`: each key it lists is
    accepted (maybe refused for its value, never as unknown), and a key it does not list
    is refused, at each level."""
    from vpub_spark.config import PublishConfig
    from vpub_spark.options import yaml_keys

    for key in yaml_keys(PublishConfig):
        try:
            config_from_dict(_probe(key))
        except SpecError as e:
            assert "unknown keys" not in str(e), key
    for key in ("colour", "input.colour", "output.colour", "gd.colour", "privacy.colour"):
        with pytest.raises(SpecError, match="unknown keys colour"):
            config_from_dict(_probe(key))


def test_the_suppression_budget_of_a_config_file_is_kept():
    d = {"input": {"path": "in"}, "privacy": {"l": 3, "suppression": 0.05}}
    assert config_from_dict(d).privacy.suppression == 0.05


def test_numbers_out_of_any_float_and_whole_floats_are_read_as_declared():
    """A 400-digit seed is refused in one line (it overflowed a float check); a whole
    float seed given in code is kept as the integer it is (it reached the keyed hash as
    a float); null for an optional table-spec list is none."""
    from vpub_spark.config import with_overrides
    from vpub_spark.tablespec import table_spec_from_dict

    base = {"input": {"path": "x"}}
    for key in ("seed", "workers"):
        with pytest.raises(SpecError, match=f"{key} must be a whole number"):
            config_from_dict(base | {key: 10**400})
    assert with_overrides(config_from_dict(base), seed=3.0).seed == 3
    assert type(config_from_dict(base | {"seed": 3.0}).seed) is int
    spec = table_spec_from_dict({"attributes": [{"name": "a", "order": None, "groups": None}]})
    assert spec.attributes[0].order is None and spec.attributes[0].groups is None
