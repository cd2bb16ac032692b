"""`vpub datasets adult --download`: the Adult data set (Becker and Kohavi, 1996) from the
UCI Machine Learning Repository's archive, pinned by its SHA-256, prepared in the layout
`vpub datasets adult --path` reads, and cached.

Decisions: docs/reference/datasets.md.
"""

from __future__ import annotations

import hashlib
import http.client
import io
import shutil
import tempfile
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

from ..errors import DataError
from ..storage import cache_root

ADULT_URL = "https://archive.ics.uci.edu/static/public/2/adult.zip"
ADULT_SHA256 = "7537312dd56c2b98035880805ce99e68183a30ee468aa5329d6df0fbb3cc21bb"
ADULT_COLUMNS = (
    "age,workclass,fnlwgt,education,education-num,marital-status,occupation,relationship,"
    "race,sex,capital-gain,capital-loss,hours-per-week,native-country,class"
)
SPLITS = {"adult.data": "adult.data.csv", "adult.test": "adult.test.csv"}


def adult_directory(
    url: str = ADULT_URL, sha256: str = ADULT_SHA256, cache: Path | None = None
) -> Path:
    """The cached Adult directory (adult.data.csv, adult.test.csv), downloaded and
    prepared on first use."""
    target = (cache or cache_root()) / "adult" / sha256[:16]
    if all((target / name).is_file() for name in SPLITS.values()):
        return target
    archive = _download(url)
    digest = hashlib.sha256(archive).hexdigest()
    if digest != sha256:
        raise DataError(
            f"the Adult archive from {url} has SHA-256 {digest}, not the pinned {sha256}: refused, "
            "nothing cached"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=".adult-", dir=target.parent))
    try:
        _prepare(archive, stage)
        if target.exists():  # a concurrent download finished first: keep its files
            return target
        stage.rename(target)
    except OSError:
        if not target.exists():  # not lost to a concurrent download's rename
            raise
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return target


def _download(url: str) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            return response.read()
    except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
        reason = getattr(e, "reason", e)
        raise DataError(
            f"cannot download Adult from {url} ({reason}); download and unpack the archive "
            "where the network is reachable and give its directory with --path DIR"
        ) from None


def _prepare(archive: bytes, directory: Path) -> None:
    """The archive's two splits as CSV files in `directory` (docs/reference/datasets.md)."""
    try:
        with zipfile.ZipFile(io.BytesIO(archive)) as z:
            texts = {name: z.read(name).decode("utf-8") for name in SPLITS}
    except (zipfile.BadZipFile, KeyError) as e:
        raise DataError(f"the Adult archive is not as expected: {e}") from None
    for name, csv in SPLITS.items():
        rows = [
            ",".join(field.strip() for field in line.split(",")).removesuffix(".")
            for line in texts[name].splitlines()
            if line.strip() and not line.startswith("|")
        ]
        (directory / csv).write_text("\n".join([ADULT_COLUMNS, *rows]) + "\n", encoding="utf-8")


def copy_raw(source: str | Path, target: str | Path) -> None:
    """Copy Adult's two CSV files from `source` into the directory `target` (made if
    missing), for configs that read the raw files."""
    target = Path(target)
    target.mkdir(parents=True, exist_ok=True)
    for name in SPLITS.values():
        if not (Path(source) / name).is_file():
            raise DataError(f"{source}: no {name}: expected the Adult directory")
        if not (target / name).exists() or not (target / name).samefile(Path(source) / name):
            shutil.copyfile(Path(source) / name, target / name)
