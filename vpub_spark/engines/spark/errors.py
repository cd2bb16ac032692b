"""Spark's failures as one line: the file and the root cause, never a Java stack trace.
Light to import (no data library): the command line maps errors with it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import unquote

from ...errors import DataError, VpubError, without_values

VPUB_KINDS = ("VpubError", "DataError", "SpecError", "PrivacyError", "StorageError")
NO_MODULE = "docs/how-to/python-api.md#publishing-a-frame"


def is_spark_error(error: BaseException) -> bool:
    """An exception raised by pyspark or py4j (Spark's own errors, the JVM's)."""
    return type(error).__module__.startswith(("py4j", "pyspark"))


@contextmanager
def spark_errors(what: str) -> Iterator[None]:
    """Spark's and its Python workers' failures as one line naming `what` (or the file
    Spark was reading) and the root cause."""
    from .session import log_size

    since = log_size()
    try:
        yield
    except VpubError:
        raise
    except Exception as e:
        if not is_spark_error(e):
            raise
        raise one_line(what, str(e), since) from None


def one_line(what: str, text: str, since: int = 0) -> VpubError:
    """The error for Spark's message `text`: a Python worker's last error, else the
    deepest Java cause, else the first line of the message; it names the file Spark
    was reading when it says so, and the Spark log when that logged an error after
    byte `since` (`session.log_file`)."""
    from .session import log_details

    worker = [  # a Python worker's error: `OSError: ...`, `vpub_spark.errors.StorageError: ...`
        (kind.rsplit(".", 1)[-1], message)
        for kind, message in re.findall(r"^((?:\w+\.)*\w+(?:Error|Exception)): (.+)$", text, re.M)
        if not kind.startswith(("org.", "java.", "scala.", "py4j."))
    ]
    java = re.findall(r"^Caused by: [\w.$]+: (.+)$", text, re.M)
    file = _file_read(text)
    if worker:
        kind, message = worker[-1]
        line = message if kind in VPUB_KINDS else f"{what}: {kind}: {message}"
        if "No module named 'vpub_spark'" in message:
            line += f" in Spark's Python workers: set PYSPARK_PYTHON to a Python that has it ({NO_MODULE})"
    elif java and file:
        line = f"{file}: cannot read the input: {_clean(java[-1])}"
    elif java:
        line = f"{what}: {_clean(java[-1])}"  # the deepest cause
    else:
        lines = [
            x.strip(": ") for x in text.splitlines() if x.strip() and not x.startswith("An error")
        ]
        line = f"{what}: {_clean(lines[0]) if lines else 'Spark failed'}"
    return DataError(line + log_details(since))


def _file_read(text: str) -> str | None:
    """The file Spark names as the one it failed to read, as a local path when local."""
    found = re.search(r"error while reading file (\S+)", text)
    if found is None:
        return None
    uri = found.group(1).removesuffix(".")
    return unquote(re.sub(r"^file:(//)?", "", uri)) if uri.startswith("file:") else uri


def _clean(message: str) -> str:
    """A Spark message without its SQLSTATE code or a record's values."""
    return without_values(re.sub(r"\s*SQLSTATE: \w+\.?", "", message).strip())


__all__ = ["is_spark_error", "one_line", "spark_errors"]
