"""Bad input that used to end in a traceback, or pass a privacy check on nonsense: each
now gets one line naming the problem and exit 2 (argparse's usage line aside)."""

from __future__ import annotations

import json
import math

import pytest
import yaml

from vpub_spark.cli import main
from vpub_spark.config import config_from_dict
from vpub_spark.errors import SpecError, VpubError
from vpub_spark.gnf import load_schema
from vpub_spark.rules import parse_rule


def _exit(capsys, *argv: str) -> tuple[int, str]:
    """The exit code and stderr of `vpub ARGV`, argparse's refusals included."""
    try:
        code = main(list(argv))
    except SystemExit as e:
        code = int(e.code or 0)
    err = capsys.readouterr().err  # an unexpected exception would have propagated
    return code, err


@pytest.mark.parametrize(
    "item", [{"lhs": 5, "rhs": "s"}, {"lhs": ["a"], "rhs": 5}, {"lhs": [["a"]], "rhs": "s"}]
)
def test_a_rule_mapping_with_a_side_not_names_is_refused(item):
    with pytest.raises(SpecError, match="must be an attribute name or a list of them"):
        parse_rule(item)


@pytest.mark.parametrize("attributes", [5, "abc", ["a", 3]])
def test_a_schema_whose_attributes_are_not_a_list_of_names_is_refused(tmp_path, attributes):
    path = tmp_path / "schema.yaml"
    path.write_text(yaml.safe_dump({"tables": [{"attributes": attributes}]}))
    with pytest.raises(VpubError, match="must be a list of names"):
        load_schema(str(path))


@pytest.mark.parametrize(
    "also, fragment",
    [({1: 2, "k": 3}, "unknown model 1"), ({"t": math.nan}, "privacy.also.t"), ({"k": True}, "k")],
)
def test_privacy_also_is_checked_whatever_its_keys_and_numbers(also, fragment):
    with pytest.raises(SpecError, match=fragment):
        config_from_dict({"input": {"path": "x"}, "privacy": {"l": 2, "also": also}})


@pytest.mark.parametrize("model", ["t=nan", "t=2", "entropy_l=nan", "k=-1", "l=0", "c=inf"])
def test_check_refuses_a_model_that_is_not_one(model):
    """`vpub check --model`: a privacy check must not pass on nonsense parameters."""
    from vpub_spark.cli.data import parse_model

    with pytest.raises(SpecError, match="--model"):
        parse_model(model)


@pytest.mark.parametrize("qi", ["", "x,x", "x,s"])
def test_check_refuses_quasi_identifiers_that_are_none_twice_or_the_sensitive_one(
    tmp_path, capsys, qi
):
    """Found by tests/cli/test_fuzz_cli.py: `--qi ""` ended in pandas' "No group keys
    passed!" traceback."""
    (tmp_path / "t.csv").write_text("x,s\nx0,a\nx1,b\n")
    code, err = _exit(capsys, "check", str(tmp_path / "t.csv"), "--qi", qi, "--sa", "s")
    assert code == 2 and err.strip().splitlines()[-1].startswith("vpub: error: --qi must name")


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["datasets", "generate", "sal", "--rows", "9", "--seed", "-1", "--out", "x"], "--seed"),
        (["utility", "--release", "x", "--source", "y", "--seed", "-3"], "--seed"),
        (["rules", "check", "--rules", "r.yaml", "--input", "x", "--l", "0"], "--l"),
        (["releases", "prune", "x", "--keep", "-1"], "--keep"),
        (["serve", "--store", "x", "--port", "-1"], "--port"),
        (["serve", "--store", "x", "--port", "70000"], "--port"),
        (["serve", "--store", "x", "--workers", "0"], "--workers"),
        (["serve", "--store", "x", "--burst", "0"], "--burst"),
        (["serve", "--store", "x", "--max-body", "0"], "--max-body"),
    ],
)
def test_numbers_out_of_range_are_refused_before_any_work(capsys, argv, fragment):
    code, err = _exit(capsys, *argv)
    assert code == 2 and fragment in err and ("must be >= " in err or "must be <= " in err)


def _release(root, name: str, manifest: dict) -> None:
    (root / name).mkdir(parents=True)
    (root / name / "manifest.json").write_text(json.dumps(manifest))
    (root / name / "_SUCCESS").write_text("")


def test_the_catalog_skips_a_manifest_without_an_id_and_names_a_damaged_store(capsys, tmp_path):
    root = tmp_path / "releases"
    _release(root, "odd", {"method": "uad"})
    code, err = _exit(capsys, "releases", "list", str(root))
    assert code == 2 and "no committed release" in err  # not a KeyError on release_id
    _release(root, "r1", {"release_id": "r1", "created_at": "2026-11-01", "family": "f"})
    store = tmp_path / "store"
    store.mkdir()
    (store / "store.json").write_text("{not json")
    code, err = _exit(capsys, "releases", "prune", str(root), "--keep", "1", "--store", str(store))
    assert code == 2 and "store.json" in err and len(err.strip().splitlines()) == 1
