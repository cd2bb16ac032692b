"""Bad input gives one clear line on stderr and a non-zero exit, never a traceback."""

import pytest
import yaml

from vpub_spark.cli import main


def run(capsys, *argv):
    code = main(list(argv))  # an unexpected exception would propagate and fail the test
    out = capsys.readouterr()
    if code == 2:  # a refusal: its last line names the problem
        assert out.err.strip().splitlines()[-1].startswith("vpub: error:"), out.err
    return code, out.out, out.err


@pytest.fixture
def data(tmp_path, capsys):
    code, _, _ = run(
        capsys,
        "datasets",
        "generate",
        "sal",
        "--rows",
        "20000",
        "--seed",
        "1",
        "--out",
        str(tmp_path / "sal"),
        "--engine",
        "inprocess",
    )
    assert code == 0
    return tmp_path / "sal"


def test_generate_refuses_to_overwrite(capsys, data):
    code, _, err = run(
        capsys,
        "datasets",
        "generate",
        "sal",
        "--rows",
        "10",
        "--out",
        str(data),
        "--engine",
        "inprocess",
    )
    assert code == 2 and "already exists" in err and "--overwrite" in err
    assert (data / "table.yaml").exists()  # the existing data set is untouched


def test_rules_check(capsys, data, tmp_path):
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        yaml.safe_dump(
            {
                "rules": [
                    "age, education -> salary",
                    "age -> salary",
                    {"lhs": ["race"], "rhs": "birthplace"},
                ]
            }
        )
    )
    code, out, _ = run(
        capsys,
        "rules",
        "check",
        "--rules",
        str(rules),
        "--input",
        str(data),
        "--l",
        "10",
        "--engine",
        "inprocess",
    )
    assert code == 0 and "implied by" in out and "10-eligible" in out
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(["age -> gender"]))
    code, _, err = run(
        capsys,
        "rules",
        "check",
        "--rules",
        str(bad),
        "--input",
        str(data),
        "--l",
        "10",
        "--engine",
        "inprocess",
    )
    assert code == 2 and "gender" in err and "more than 1/l" in err
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text(yaml.safe_dump(["age -> salry"]))
    code, _, err = run(
        capsys,
        "rules",
        "check",
        "--rules",
        str(unknown),
        "--input",
        str(data),
        "--engine",
        "inprocess",
    )
    assert code == 2 and "unknown attribute salry" in err


def test_gnf_check_exit_codes(capsys, tmp_path):
    rules = tmp_path / "r.yaml"
    rules.write_text(
        yaml.safe_dump(
            ["age, icd9 -> race", "gender, icd9 -> zipcode", "hospital, race -> zipcode"]
        )
    )
    good = tmp_path / "good.yaml"
    good.write_text(
        yaml.safe_dump(
            {
                "tables": [
                    {"attributes": ["hospital", "age", "gender", "icd9"]},
                    {"attributes": ["race", "zipcode"], "sensitive": "zipcode"},
                ]
            }
        )
    )
    assert run(capsys, "gnf", "check", "--schema", str(good), "--rules", str(rules))[0] == 0
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        yaml.safe_dump(
            {
                "tables": [
                    {
                        "name": "all",
                        "attributes": ["hospital", "age", "gender", "icd9", "race", "zipcode"],
                    }
                ]
            }
        )
    )
    code, out, _ = run(capsys, "gnf", "check", "--schema", str(bad), "--rules", str(rules))
    assert code == 1 and "violated" in out and "NOT GNF" in out


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["profile", "--input", "nowhere", "--engine", "inprocess"], "no table spec"),
        (
            ["profile", "--input", ".", "--table", "missing.yaml", "--engine", "inprocess"],
            "file not found",
        ),
        (["gnf", "check", "--schema", "missing.yaml", "--rules", "x"], "file not found"),
        (
            ["datasets", "generate", "sal", "--rows", "0", "--out", "x", "--engine", "inprocess"],
            "--rows must be positive",
        ),
    ],
)
def test_bad_arguments(capsys, argv, fragment):
    code, _, err = run(capsys, *argv)
    assert code == 2 and fragment in err


def test_every_feature_registers_its_commands():
    from vpub_spark.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert set(sub.choices) == {
        "datasets",
        "profile",
        "rules",
        "gnf",
        "publish",
        "marginals",
        "audit",
        "keys",
        "query",
        "utility",
        "statdb",
        "serve",
        "compare",
        "bench",
        "demo",
        "releases",
        "export",
        "check",
        "spark-archive",
        "report",
        "explore",
    }
    bench = next(a for a in sub.choices["bench"]._actions if a.dest == "what")
    assert set(bench.choices) == {
        "publish",
        "multi-sa",
        "marginals",
        "utility",
        "statdb",
        "update",
        "lake",
        "frame",
        "report",
        "scale",
        "kl",
        "streamliner",
        "serve",
        "peers",
        "cold",
    }


def test_a_command_builds_only_its_features_parser(capsys):
    """`build_parser(command)` registers the owning feature's commands, exactly those
    `FEATURES` names for it; a word no feature owns gets every command, so the refusal
    lists them."""
    import argparse
    from importlib import import_module

    from vpub_spark.cli import FEATURES, build_parser

    for name, commands in FEATURES.items():
        alone = argparse.ArgumentParser().add_subparsers()
        import_module(f"vpub_spark.cli.{name}").register(alone)
        assert tuple(alone.choices) == commands
        for command in commands:
            sub = next(a for a in build_parser(command)._actions if a.dest == "command")
            assert tuple(sub.choices) == commands
    with pytest.raises(SystemExit) as refused:
        main(["publsh", "--config", "x"])
    err = capsys.readouterr().err
    assert refused.value.code == 2 and "invalid choice: 'publsh'" in err
    assert "publish" in err and "bench" in err and "statdb" in err
    assert main(["query", "/nonexistent-release", "--where", "x = 1"]) == 2


def test_query_takes_an_engine_and_both_engines_agree(capsys, tmp_path, spark_engine):
    """`vpub query --engine spark|inprocess|auto`: the same estimate (the release's models)
    and the same exact count of `--source`, counted by Spark's tasks or in process."""
    import re

    from release_helpers import job_table, publish_inprocess, write_table

    frame = job_table(6, 3000)
    data = write_table(frame, tmp_path / "t")
    out = tmp_path / "out"
    rel = publish_inprocess(
        data,
        out,
        ["age, zip -> job", "sex -> job"],
        3,
        output={"path": str(out), "release_id": "r"},
    )
    where = "age between 30 and 45 and sex = F"
    truth = int(((frame.age.astype(int).between(30, 45)) & (frame.sex == "F")).sum())
    answers = {}
    for engine in ("inprocess", "spark", "auto"):
        code, text, _ = run(
            capsys,
            "query",
            str(rel.path),
            "--where",
            where,
            "--source",
            str(data),
            "--engine",
            engine,
        )
        text = " ".join(text.split())
        assert code == 0 and re.search(r"\((spark|inprocess) engine\)", text), text
        answers[engine] = (
            re.search(r"estimate: ([\d,.]+)", text)[1],
            re.search(r"exact: ([\d,]+)", text)[1],
        )  # type: ignore[index]
    assert answers["inprocess"] == answers["spark"] == answers["auto"]
    assert int(answers["spark"][1].replace(",", "")) == truth > 0


def test_generate_with_a_top_share(capsys, tmp_path):
    """`vpub datasets generate sal --top-share P`: salary's most likely value holds P of the rows."""
    out = tmp_path / "skewed"
    code, _, _ = run(
        capsys,
        *("datasets", "generate", "sal", "--rows", "4000", "--top-share", "0.2475"),
        *("--out", str(out), "--engine", "inprocess"),
    )
    assert code == 0
    import pyarrow.parquet as pq

    salary = pq.read_table(out / "data").column("salary").to_pandas()
    assert salary.value_counts().max() == 990
    code, _, err = run(
        capsys,
        *("datasets", "generate", "sal", "--rows", "10", "--top-share", "1.5"),
        *("--out", str(tmp_path / "bad"), "--engine", "inprocess"),
    )
    assert code == 2 and "--top-share must be in (0, 1)" in err
