"""vpub_spark: privacy-preserving publication of microdata on Apache Spark.

The public API (docs/how-to/python-api.md): `publish`, `open_release`, `Release`,
`check` and `open_store`,
imported on first use so that `import vpub_spark` stays light, and `VpubError`, the
base of every error it raises."""

from typing import Any

from .errors import VpubError
from .version import __version__

__all__ = ["Release", "VpubError", "__version__", "check", "open_release", "open_store", "publish"]


def __getattr__(name: str) -> Any:
    if name in ("Release", "check", "open_release", "open_store", "publish"):
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'vpub_spark' has no attribute {name!r}")
