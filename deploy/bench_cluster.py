"""Scale benchmark on a local standalone cluster: publish with 1 and with 2
workers (one core each), wall time of the spark-submit run, peak resident memory per
process role, and the speed-up from one worker to two, measured in one run.

    .venv/bin/python deploy/bench_cluster.py --data sal:10000000 --data texas:1000000

Peak memory: every 0.2 s the monitor reads VmHWM (the kernel's peak RSS of a process)
from /proc for every process of the run, by role (driver = the spark-submit JVM and the
Python driver, executor JVMs, the executors' Python workers, master, workers) and keeps
the largest value seen per role.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
ROLES = {
    "driver JVM": "org.apache.spark.deploy.SparkSubmit",
    "driver Python": "jobs/publish.py",
    "executor JVM": "CoarseGrainedExecutorBackend",
    "executor Python": "pyspark.daemon",
    "master": "org.apache.spark.deploy.master.Master",
    "worker": "org.apache.spark.deploy.worker.Worker",
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PeakMemory(threading.Thread):
    """Largest VmHWM (MiB) seen per role while running."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peaks: dict[str, float] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            for pid in filter(str.isdigit, os.listdir("/proc")):
                try:
                    cmd = (
                        Path(f"/proc/{pid}/cmdline")
                        .read_bytes()
                        .replace(b"\0", b" ")
                        .decode(errors="replace")
                    )
                    role = next((r for r, key in ROLES.items() if key in cmd), None)
                    if role is None:
                        continue
                    hwm = next(
                        int(line.split()[1])
                        for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                        if line.startswith("VmHWM")
                    )
                except (OSError, StopIteration, ValueError):
                    continue
                self.peaks[role] = max(self.peaks.get(role, 0.0), hwm / 1024)
            self.stop.wait(0.2)


def run(cmd: list[str], env: dict, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, **kw)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--data", action="append", default=None, help="NAME:ROWS (sal, texas, ...); repeatable"
    )
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--executor-memory", default="4g")
    ap.add_argument("--out", default="out/bench-cluster")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    out = (ROOT / args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    py = str(Path(sys.executable))
    vpub = str(Path(sys.executable).with_name("vpub"))
    results = []
    for item in args.data or ["sal:10000000", "texas:1000000"]:
        name, rows = item.split(":")
        data = out / f"{name}-{rows}"
        if not (data / "table.yaml").exists():
            print(f"generating {int(rows):,} rows of {name} (not timed) ...", flush=True)
            gen = run(
                [
                    vpub,
                    "datasets",
                    "generate",
                    name,
                    "--rows",
                    rows,
                    "--seed",
                    str(args.seed),
                    "--out",
                    str(data),
                    "--engine",
                    "inprocess",
                ],
                os.environ.copy(),
            )
            if gen.returncode:
                sys.exit(gen.stderr)
        job = out / f"{name}.yaml"
        job.write_text(yaml.safe_dump({
            "engine": "spark", "input": {"path": str(data)}, "privacy": {"l": 10}, "rules": {"random": {"c": 5, "lhs": 3, "seed": args.seed}},
            "method": "uad", "output": {"path": str(out / "releases")}, "seed": args.seed,
        }))  # fmt: skip
        for workers in [int(w) for w in args.workers.split(",")]:
            env = os.environ | {
                "CLUSTER_DIR": str(out / "cluster"), "MASTER_PORT": str(_free_port()), "MASTER_UI_PORT": str(_free_port()),
                "WORKER_CORES": "1", "WORKER_MEMORY": "6g", "PYTHON": py,
            }  # fmt: skip
            started = run(
                [str(ROOT / "deploy" / "cluster.sh"), "start", str(workers)], env, timeout=300
            )
            if started.returncode:
                sys.exit(started.stderr)
            url = started.stdout.strip().splitlines()[-1]
            monitor = PeakMemory()
            monitor.start()
            try:
                t0 = time.perf_counter()
                sub = run([str(ROOT / "deploy" / "submit.sh"), "--master", url, "--conf", f"spark.executor.memory={args.executor_memory}",
                           "jobs/publish.py", "--config", str(job), "--release-id", f"{name}-{workers}w", "--overwrite"], env)  # fmt: skip
                wall = time.perf_counter() - t0
            finally:
                monitor.stop.set()
                monitor.join()
                run([str(ROOT / "deploy" / "cluster.sh"), "stop"], env, timeout=300)
            if sub.returncode:
                sys.exit(sub.stderr[-3000:])
            manifest = json.loads(
                (out / "releases" / f"{name}-{workers}w" / "manifest.json").read_text()
            )
            row = {"data": name, "rows": int(rows), "workers": workers, "wall_s": round(wall, 1),
                   "steps_s": manifest["timings_s"], "partitions": manifest["partitions"],
                   "peak_mib": {k: round(v) for k, v in sorted(monitor.peaks.items())}}  # fmt: skip
            results.append(row)
            print(json.dumps(row), flush=True)
    for name in dict.fromkeys(r["data"] for r in results):
        by = {r["workers"]: r["wall_s"] for r in results if r["data"] == name}
        if 1 in by and 2 in by:
            print(
                f"{name}: speed-up from 1 to 2 workers = {by[1] / by[2]:.2f}x ({by[1]} s -> {by[2]} s)"
            )
    (out / "results.json").write_text(json.dumps(results, indent=2))
    print(
        f"results in {out / 'results.json'}; median wall {statistics.median(r['wall_s'] for r in results)} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
