"""vpub_spark: privacy-preserving publication of microdata on Apache Spark.

The public API (docs/how-to/python-api.md): `publish`, `open_release` and `Release`,
imported on first use so that `import vpub_spark` stays light."""

from typing import Any

from .version import __version__

__all__ = ["Release", "__version__", "open_release", "publish"]


def __getattr__(name: str) -> Any:
    if name in ("Release", "open_release", "publish"):
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'vpub_spark' has no attribute {name!r}")
