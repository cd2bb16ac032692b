"""Airflow DAG: a scheduled vpub release (weekly), submitted with SparkSubmitOperator.

The release id comes from the logical date (`adult-uad-<YYYYMMDD>`), so a rerun of the
same interval rewrites nothing: publish refuses to overwrite a committed release, and
a failed run leaves none (docs/reference/release-format.md), so Airflow's retries are
safe. A second task audits the committed release from its files. Needs apache-airflow and
apache-airflow-providers-apache-spark, a `spark_default` connection to the cluster,
and vpub_spark installed where the driver and executors run (deploy/submit.sh).
Variables: `vpub_root` (checkout or image path with jobs/ and conf/), `vpub_releases`.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow import DAG
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

ROOT = "{{ var.value.get('vpub_root', '/opt/vpub') }}"
RELEASES = "{{ var.value.get('vpub_releases', '/releases') }}"
RELEASE_ID = "adult-uad-{{ ds_nodash }}"

with DAG(
    dag_id="vpub_release",
    description="Publish and audit a privacy-preserving release of the Adult table",
    schedule="@weekly",
    start_date=datetime(2026, 11, 1),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 2, "retry_delay": timedelta(minutes=5)},
    tags=["vpub", "privacy"],
) as dag:
    publish = SparkSubmitOperator(
        task_id="publish",
        application=f"{ROOT}/jobs/publish.py",
        application_args=[
            "--config",
            f"{ROOT}/conf/adult_uad.yaml",
            "--out",
            RELEASES,
            "--release-id",
            RELEASE_ID,
        ],
        conn_id="spark_default",
        driver_memory="4g",
        conf={"spark.sql.execution.arrow.pyspark.enabled": "true", "spark.task.maxFailures": "4"},
        name="vpub-publish-{{ ds_nodash }}",
    )
    audit = SparkSubmitOperator(
        task_id="audit",
        application=f"{ROOT}/jobs/audit.py",
        application_args=[f"{RELEASES}/{RELEASE_ID}"],
        conn_id="spark_default",
        name="vpub-audit-{{ ds_nodash }}",
    )
    publish >> audit
