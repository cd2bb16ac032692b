"""Spark started before the command line imports the data libraries: for
`vpub publish` on the Spark engine, the driver JVM boots in the background while this
process imports pandas, pyarrow and the rest (about 0.7-0.9 s), instead of after them.
Imports only light modules: the config, the engine choice, the session's settings.
`VPUB_SPARK_EARLY=0` turns it off (Spark then starts when the command reaches it)."""

from __future__ import annotations

import argparse
import os


def start_spark_early(argv: list[str]) -> None:
    """If `argv` is a `vpub publish` that will run on Spark, start its session now
    (`session.start_early`), with the settings `cmd_publish` will choose (`choose`, the
    same function). Anything wrong is left for the command to report, in its order."""
    if not argv or argv[0] != "publish" or {"-h", "--help"} & set(argv):
        return
    if os.environ.get("VPUB_SPARK_EARLY", "1") == "0":
        return
    from ..config import load_config, with_overrides
    from ..engines import choose, start_early
    from ..engines.settings import SparkSettings
    from ..errors import VpubError
    from ..storage import is_remote

    pre = argparse.ArgumentParser(add_help=False)
    for flag in ("--config", "--engine", "--input", "--spark-conf"):
        pre.add_argument(flag)
    try:
        given, _ = pre.parse_known_args(argv[1:])
        if given.config is None:
            return
        cfg = with_overrides(
            load_config(given.config),
            engine=given.engine,
            input_path=given.input,
            spark=given.spark_conf,
        )
        if is_remote(cfg.input_path):  # downloaded first by the command
            return
        name, settings, _ = choose(
            cfg.engine, SparkSettings.load(cfg.spark), cfg.input_path, cfg.workers
        )
    except (VpubError, OSError, ValueError, SystemExit):
        return
    if name == "spark":
        start_early(settings)
