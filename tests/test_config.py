"""Config validation (DESIGN.md §8): every bad value gets its documented error, at
parse time or, for what a method needs, from the method registry before any work."""

from __future__ import annotations

import pytest

from vpub_spark.config import config_from_dict, with_overrides
from vpub_spark.errors import SpecError
from vpub_spark.publish.registry import METHODS, method_for

BASE = {"input": {"path": "data"}, "rules": ["a -> b"], "engine": "inprocess"}


def _cfg(**changes):
    return config_from_dict(BASE | changes)


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"colour": "blue"}, "unknown keys colour"),
        ({"input": {}}, "input.path is required"),
        ({"input": "data"}, "`input` must be a mapping"),
        ({"engine": "dask"}, "engine must be auto, spark or inprocess"),
        ({"partitions": 0}, "partitions must be a positive integer or auto"),
        ({"seed": "x"}, "seed must be an integer"),
        ({"seed": -1}, "seed must be an integer >= 0"),
        ({"seed": 3, "seed_file": "s"}, "give seed or seed_file, not both"),
        ({"output": {"release_id": "../up"}}, "must be a plain, non-hidden directory name"),
        ({"output": {"release_id": ".hidden"}}, "must be a plain, non-hidden directory name"),
        ({"privacy": {"l": 1}}, "l-diversity needs an integer l >= 2"),
        ({"privacy": {"model": "k-anonymity"}}, "privacy model must be l-diversity or m-invariance"),
        ({"privacy": {"l": 2, "k": 3}}, "privacy has unknown keys k"),
        ({"privacy": {"model": "m-invariance", "m": 1}}, "m-invariance needs an integer m >= 2"),
        ({"rules": []}, "rules must be a non-empty list"),
        ({"rules": {"random": {"c": 2, "rhs": 1}}}, "rules.random has unknown keys rhs"),
        ({"rules": {"draw": {}}}, "rules must be a list or {random"),
        ({"gd": {"budget": 3}}, "gd has unknown keys budget"),
        ({"multi_sa": {"mode": "greedy"}}, "multi_sa.mode must be one of exact, partitioned"),
        ({"multi_sa": {"solver": "gurobi"}}, "multi_sa.solver must be one of"),
        ({"multi_sa": {"time_limit_s": 0}}, "multi_sa.time_limit_s must be positive"),
        ({"multi_sa": {"chunk_rows": 0}}, "multi_sa.chunk_rows must be a positive integer"),
        ({"multi_sa": {"threads": 2}}, "multi_sa has unknown keys threads"),
        ({"marginals": {"sensitive": "s", "schemas": [["a"]]}}, "marginals.state is required"),
        ({"marginals": {"sensitive": "s", "schemas": "a", "state": "x"}}, "marginals.schemas must be a list"),
        ({"marginals": {"sensitive": "s", "schemas": [[]], "state": "x"}}, "must be a non-empty list of attribute names"),
        ({"marginals": {"sensitive": "s", "schemas": [["a"]], "state": "x", "chunk_rows": 0}}, "marginals.chunk_rows must be a positive integer"),
        ({"marginals": {"sensitive": "s", "schemas": [["a"]], "state": "x", "tries": True}}, "marginals.tries must be a positive integer"),
        ({"marginals": {"sensitive": "s", "schemas": [["a"]], "state": "x", "m": 3}}, "marginals has unknown keys m"),
    ],
)  # fmt: skip
def test_bad_values_get_their_error(changes, message):
    with pytest.raises(SpecError, match=message.replace("(", r"\(").replace("{", r"\{")):
        _cfg(**changes)


def test_errors_name_the_config_file():
    with pytest.raises(SpecError, match=r"^conf/x.yaml: "):
        config_from_dict(BASE | {"engine": "dask"}, "conf/x.yaml")


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"method": "gd2"}, "method must be one of uad, gd, single_attribute, multi_sa_bip, marginals"),
        ({"method": "marginals"}, "method marginals needs privacy model m-invariance"),
        ({"method": "uad", "privacy": {"model": "m-invariance", "m": 4}}, "method uad needs privacy model l-diversity"),
        ({"method": "uad", "rules": None}, "method uad needs `rules`"),
        ({"method": "marginals", "privacy": {"model": "m-invariance", "m": 4}, "rules": None}, "method marginals needs a `marginals:` section"),
    ],
)  # fmt: skip
def test_the_method_registry_checks_what_a_method_needs(changes, message):
    cfg = _cfg(**changes)
    with pytest.raises(SpecError, match=message.replace("(", r"\(")):
        method_for(cfg)


def test_every_registered_method_accepts_its_own_example():
    examples = {
        "marginals": {"privacy": {"model": "m-invariance", "m": 4}, "rules": None,
                      "marginals": {"sensitive": "s", "schemas": [["a"]], "state": "x"}},
        **{n: {"rules": None, "streamliner": {"sensitive": "s"}} for n in ("rda", "gda", "ria")},
    }  # fmt: skip
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
