"""The in-process engine on every core: independent tasks (a partition to anonymize and
write, a slice of rows to map) run in a pool of forked worker processes, their results
in task order, so the output is the serial run's whatever the worker count.

Decisions (fork, how many workers, when work stays serial) and their measurements:
docs/how-to/choose-engine.md, "The in-process engine on every core".
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from ..errors import SpecError

T = TypeVar("T")
MIN_ROWS = 200_000  # the in-process engine runs work on fewer rows serially
LIGHT = 10  # ... and light work (reading, counting) on fewer than LIGHT * MIN_ROWS
SLICE_ROWS = 1 << 20  # the in-process engine's row slices hold at most this many rows
_task: Callable[[Any], Any] | None = None
_in_worker = False


def available_cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def default_workers(configured: int | None = None) -> int:
    """`configured`, else `VPUB_WORKERS`, else every available core; at least 1."""
    if configured is None and os.environ.get("VPUB_WORKERS"):
        text = os.environ["VPUB_WORKERS"]
        try:
            configured = int(text)
        except ValueError:
            raise SpecError(f"VPUB_WORKERS must be a whole number, not {text!r}") from None
    if configured is not None and configured < 1:
        raise SpecError(f"workers must be at least 1, not {configured}")
    return configured or available_cores()


def _run(item: Any) -> Any:
    global _in_worker
    _in_worker = True
    assert _task is not None
    return _task(item)


def run_tasks(
    task: Callable[[Any], T],
    items: Sequence[Any],
    workers: int,
    meanwhile: Callable[[], object] | None = None,
) -> list[T]:
    """`[task(i) for i in items]`, on up to `workers` forked processes
    (docs/how-to/choose-engine.md); serially with one worker, one item, or inside a worker.
    `meanwhile` runs in this process while the workers work (after they were forked, so
    what it imports or starts is not theirs), or first when there are none."""
    global _task
    count = min(workers, len(items))
    if count <= 1 or _in_worker:
        if meanwhile is not None:
            meanwhile()
        return [task(i) for i in items]
    if _task is not None:
        raise RuntimeError("run_tasks is not re-entrant in one process")
    _task = task
    try:
        with multiprocessing.get_context("fork").Pool(count) as pool:
            pending = pool.map_async(_run, items, chunksize=1)
            if meanwhile is not None:
                meanwhile()
            return pending.get()
    finally:
        _task = None
