"""The deployment files have the shape their tools expect (no Kubernetes, Airflow or
Docker in CI; the cluster scripts themselves run in test_cluster.py)."""

import ast
import subprocess
from pathlib import Path

import yaml

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def test_spark_application_for_the_operator():
    app = yaml.safe_load((DEPLOY / "k8s" / "sparkapplication.yaml").read_text())
    assert app["apiVersion"] == "sparkoperator.k8s.io/v1beta2" and app["kind"] == "SparkApplication"
    spec = app["spec"]
    assert spec["type"] == "Python" and spec["mainApplicationFile"].endswith("jobs/publish.py")
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["conf"]["configMap"]["name"] == "vpub-conf"
    config_file = spec["arguments"][spec["arguments"].index("--config") + 1]
    mounts = {m["name"]: m["mountPath"] for m in spec["driver"]["volumeMounts"]}
    assert config_file.startswith(mounts["conf"] + "/")
    for role in ("driver", "executor"):
        ctx = spec[role]["securityContext"]
        assert (
            ctx["runAsNonRoot"] is True
            and ctx["runAsUser"] != 0
            and ctx["allowPrivilegeEscalation"] is False
        )
    cm = yaml.safe_load((DEPLOY / "k8s" / "configmap.yaml").read_text())
    assert cm["metadata"]["name"] == "vpub-conf" and Path(config_file).name in cm["data"]
    from vpub_spark.config import config_from_dict

    assert config_from_dict(yaml.safe_load(cm["data"][Path(config_file).name])).method == "uad"


def test_airflow_dag_submits_publish_then_audit_with_a_dated_release_id():
    tree = ast.parse((DEPLOY / "airflow" / "vpub_release_dag.py").read_text())
    calls = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "SparkSubmitOperator"
    ]
    tasks = {next(k.value.value for k in c.keywords if k.arg == "task_id"): c for c in calls}
    assert set(tasks) == {"publish", "audit"}
    source = ast.unparse(tree)
    assert "jobs/publish.py" in source and "jobs/audit.py" in source and "{{ ds_nodash }}" in source
    assert "publish >> audit" in source


def test_shell_scripts_parse_and_explain_themselves():
    for script in ("cluster.sh", "submit.sh", "entrypoint.sh"):
        assert subprocess.run(["bash", "-n", str(DEPLOY / script)]).returncode == 0
    usage = subprocess.run([str(DEPLOY / "cluster.sh")], capture_output=True, text=True)
    assert usage.returncode == 2 and "usage" in usage.stderr
    docker = (DEPLOY / "Dockerfile").read_text()
    assert "openjdk-17" in docker and "USER 185" in docker and "pip install" in docker


def test_store_dag_updates_then_publishes_then_audits():
    """The versions DAG: its tasks in order, each a job that exists, run with the
    arguments the command line takes (parsed, not run: Airflow is not in CI)."""
    from vpub_spark.cli import build_parser

    tree = ast.parse((DEPLOY / "airflow" / "vpub_store_dag.py").read_text())
    calls = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "SparkSubmitOperator"
    ]
    tasks = {next(k.value.value for k in c.keywords if k.arg == "task_id"): c for c in calls}
    assert set(tasks) == {"update", "publish", "audit", "private_audit"}
    source = ast.unparse(tree)
    assert "update >> publish >> audit >> private_audit" in source
    commands = {
        "update.py": ["statdb", "update"],
        "add_marginal.py": ["marginals", "add"],
        "audit.py": ["audit"],
    }
    for call in calls:
        kw = {k.arg: k.value for k in call.keywords}
        job = ast.unparse(kw["application"]).split("/jobs/")[1].strip("'\"")
        assert (DEPLOY.parent / "jobs" / job).is_file()
        args = [
            a.value if isinstance(a, ast.Constant) else "X" for a in kw["application_args"].elts
        ]
        build_parser().parse_args([*commands[job], *args])
