"""Write-then-rename: an output directory appears complete or not at all."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import VpubError


def check_target(target: Path, overwrite: bool) -> None:
    if target.exists() and any(target.iterdir()) and not overwrite:
        raise VpubError(f"{target} already exists and is not empty; pass --overwrite to replace it")
    parent = target.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise VpubError(f"cannot create the output directory {parent}: {e.strerror}") from None
    if not os.access(parent, os.W_OK):
        raise VpubError(f"cannot write to {parent}: permission denied")


@contextmanager
def staged_directory(target: str | Path, overwrite: bool = False) -> Iterator[Path]:
    """Yield a fresh staging directory beside `target`; on success rename it into place,
    on any failure delete it and leave `target` untouched."""
    target = Path(target)
    check_target(target, overwrite)
    stage = target.parent / f".{target.name}.staging-{uuid.uuid4().hex[:8]}"
    try:
        stage.mkdir()
        yield stage
        if target.exists():
            old = target.parent / f".{target.name}.old-{uuid.uuid4().hex[:8]}"
            target.rename(old)
            stage.rename(target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            stage.rename(target)
    finally:
        if stage.exists():
            shutil.rmtree(stage, ignore_errors=True)
