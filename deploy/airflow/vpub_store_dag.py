"""Airflow DAG: a monthly re-publication from a changing table, m-invariant across
versions (docs/how-to/update-a-store.md), submitted with SparkSubmitOperator.

update (the store's next version from this month's snapshot) >> publish (a marginal
from that version) >> audit (the release from its files) >> private audit (the store,
version by version, and every release made from it). The snapshot and the release id
come from the logical date, so a rerun of the same interval writes nothing new: an
update from the snapshot the latest version was made from writes nothing, a committed
release is never overwritten, and a failed task leaves nothing committed, so Airflow's
retries are safe. Needs apache-airflow and apache-airflow-providers-apache-spark, a
`spark_default` connection, and vpub_spark installed where the driver runs (the update
and the marginal run in the driver's process). Variables: `vpub_root` (checkout or
image path with jobs/), `vpub_store` (the private store, built once with `vpub statdb
build` and `marginals.key`), `vpub_snapshots` (one directory per month, YYYYMMDD),
`vpub_releases`.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow import DAG
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

ROOT = "{{ var.value.get('vpub_root', '/opt/vpub') }}"
STORE = "{{ var.value.get('vpub_store', '/private/store') }}"
SNAPSHOT = "{{ var.value.get('vpub_snapshots', '/snapshots') }}/{{ ds_nodash }}"
RELEASES = "{{ var.value.get('vpub_releases', '/releases') }}"
RELEASE_ID = "age-sex-{{ ds_nodash }}"

with DAG(
    dag_id="vpub_store_versions",
    description="Update a private store from a new snapshot, publish a marginal of it, audit",
    schedule="@monthly",
    start_date=datetime(2026, 11, 1),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 2, "retry_delay": timedelta(minutes=5)},
    tags=["vpub", "privacy"],
) as dag:
    update = SparkSubmitOperator(
        task_id="update",
        application=f"{ROOT}/jobs/update.py",
        application_args=[STORE, "--input", SNAPSHOT, "--wait", "600"],
        conn_id="spark_default",
        name="vpub-update-{{ ds_nodash }}",
    )
    publish = SparkSubmitOperator(
        task_id="publish",
        application=f"{ROOT}/jobs/add_marginal.py",
        application_args=[
            "--state",
            STORE,
            "--attributes",
            "age,sex",
            "--out",
            RELEASES,
            "--release-id",
            RELEASE_ID,
            "--wait",
            "600",
        ],
        conn_id="spark_default",
        name="vpub-publish-{{ ds_nodash }}",
    )
    audit = SparkSubmitOperator(
        task_id="audit",
        application=f"{ROOT}/jobs/audit.py",
        application_args=[f"{RELEASES}/{RELEASE_ID}"],
        conn_id="spark_default",
        name="vpub-audit-{{ ds_nodash }}",
    )
    private_audit = SparkSubmitOperator(
        task_id="private_audit",
        application=f"{ROOT}/jobs/audit.py",
        application_args=["--state", STORE],
        conn_id="spark_default",
        name="vpub-private-audit-{{ ds_nodash }}",
    )
    update >> publish >> audit >> private_audit
