"""Publishing a release: the steps, once, top to bottom; `publish` is the one library call
behind `vpub publish` and `jobs/publish.py`. Any failure removes the staging directories
and leaves the target as it was.

The steps: docs/explanation/architecture.md, "The publishing pipeline and its
registries"; the format: docs/reference/release-format.md.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack
from dataclasses import replace
from pathlib import Path

import pandas as pd

from ..config import PublishConfig
from ..datasets.presets import input_table
from ..engines.base import Engine, LoadedTable
from ..errors import SpecError
from ..frames import FrameInput
from ..kernels.partitioning import fingerprint
from ..lake.catalog import Root, latest, set_latest
from ..lake.commit import Steps, audit_and_commit, staged_release, staged_store
from ..lake.objectstore import record_parts, write_root
from ..release.layout import RESERVED, part_location, release_target
from ..release.manifest import header, seal
from ..release.secret import default_private_dir, owner_only, write_run_record
from ..release.stores.store import check_store_location
from ..sources import read_table_input
from ..storage import table_kind
from .method import (
    Design,
    Method,
    Plan,
    PublishResult,
    covered,
    source_entry,
    with_secret_seed,
)
from .registry import method_for
from .suppression import apply_budget

Observer = Callable[[str], AbstractContextManager[object]]


def publish(
    cfg: PublishConfig,
    engine: Engine,
    observer: Observer | None = None,
    frame: FrameInput | None = None,
) -> PublishResult:
    """Publish, audit and commit one release (docs/explanation/architecture.md).

    Args:
        cfg: the job config (`load_config`, `config_from_dict`).
        engine: the engine that reads the input and writes the tables.
        observer: told each step as it starts and ends (the command line's progress).
        frame: the rows as a frame (`frames.frame_input`), read instead of
            `cfg.input_path`, which then only names them.

    Returns:
        The committed release: its path, manifest, audit report and step times.

    Raises:
        VpubError: a config or rule that cannot be met, an input that does not fit its
            table spec, an unwritable output or a failed audit; nothing is committed
            and the staging directory is removed.
    """
    method = method_for(cfg)
    step = Steps(observer)
    cfg, frame, path, spec = _input(cfg, engine, frame)
    target = release_target(cfg.output_path, str(cfg.release_id))
    private = method.store(cfg)
    records = None if private else _private_dir(cfg)  # checked before any work
    with ExitStack() as stack:  # locks and stages first: a refused run does no work
        stage = stack.enter_context(staged_release(target, cfg.overwrite, cfg.wait_s, engine))
        store = stack.enter_context(staged_store(private, cfg.wait_s)) if private else None
        with step("read and encode"):
            loaded = engine.persist(
                engine.load_frame(frame) if frame else engine.load(path, spec, cfg.input_format)
            )
        stack.callback(engine.unpersist, loaded)
        loaded, suppression = apply_budget(cfg, engine, loaded, method.suppresses)
        with step(method.design_step):
            design = method.design(cfg, engine, loaded)
        manifest, report, summary = _staged(
            method, cfg, engine, loaded, design, stage, store, step, suppression
        )
        if store is not None:
            method.record(cfg, design, loaded, store, manifest, target)
    if records is not None:  # the seed's one private copy (a store keeps its own)
        write_run_record(records, cfg.output_path, str(cfg.release_id), cfg.secret_seed)
    set_latest(Root(cfg.output_path), str(cfg.family), str(cfg.release_id))
    return PublishResult(target, manifest, report, dict(step.timings), summary)


def _input(cfg: PublishConfig, engine: Engine, frame: FrameInput | None):
    """(the config with its seed and release id, the frame or None, the input path,
    its table spec): a table input read as a frame (`_table_input`), files resolved."""
    if frame is None and table_kind(cfg.input_path):
        frame, cfg = _table_input(cfg, engine)
    if frame is not None and cfg.marginals is not None and cfg.marginals.key:
        raise SpecError("marginals.key: an updatable store reads its identifiers from files")
    path, spec = (
        (cfg.input_path, frame.spec)
        if frame is not None
        else input_table(cfg.input_path, cfg.table, engine.reads_object_stores)
    )
    cfg = replace(
        with_secret_seed(cfg),
        release_id=cfg.release_id
        or f"{spec.name}-{cfg.method}-{cfg.privacy.letter}{cfg.diversity}",
        family=cfg.family or f"{spec.name}-{cfg.method}",
    )
    reserved = [a for a in spec.names if a in RESERVED]
    if reserved:
        raise SpecError(
            f"attribute names {', '.join(RESERVED)} are reserved for release columns; rename {', '.join(reserved)}"
        )
    return cfg, frame, path, spec


def _table_input(cfg: PublishConfig, engine: Engine) -> tuple[FrameInput, PublishConfig]:
    """A table input's rows (`sources.py`), with `input.table`'s spec where one is given,
    and the config recording the version read."""
    from ..tablespec import load_table_spec

    spec = load_table_spec(cfg.table) if cfg.table is not None else None
    read = read_table_input(cfg.input_path, cfg.input_catalog, cfg.input_version, spec, engine)
    return read.frame, replace(cfg, input_version=read.version)


def _private_dir(cfg: PublishConfig) -> Path:
    """The owner's private directory for the run record: not inside the output, and
    owner-only where it exists already (release/secret.py)."""
    root = Path(cfg.private_dir).expanduser() if cfg.private_dir else default_private_dir()
    check_store_location(root, cfg.output_path, new=False, what="private directory")
    if root.exists():
        owner_only(root, "private directory")
    return root


def _staged(
    method: Method,
    cfg: PublishConfig,
    engine: Engine,
    loaded: LoadedTable,
    design: Design,
    stage: Path,
    store: Path | None,
    step: Steps,
    suppression: dict | None = None,
):
    """Steps 4 and 5 inside the staging directories: plan, write, manifest, audit."""
    with step(method.plan_step):
        plan = method.plan(cfg, engine, loaded, design)
        covered(plan, loaded)
    with step(method.run_step):
        summary = _write(method, cfg, engine, loaded, design, plan, stage, store)
        record_parts(stage, engine)  # parts the tasks wrote to an object store
    manifest = _manifest(method, cfg, engine, loaded, design, plan, summary)
    if suppression is not None:
        manifest["suppression"] = suppression
    manifest["tables"] = method.table_entries(stage, design, loaded, summary)
    seal(manifest, cfg.secret_seed)
    audit_engine = engine if engine.audits_in_tasks else None  # (unless the release is small)
    report = audit_and_commit(stage, manifest, step, cfg.sign_key, audit_engine)
    return manifest, report, summary


def _write(
    method: Method,
    cfg: PublishConfig,
    engine: Engine,
    loaded: LoadedTable,
    design: Design,
    plan: Plan,
    stage: Path,
    store: Path | None,
) -> pd.DataFrame | None:
    """Every partition through the method's job, then every projection; the tasks write
    where the stage and the store say (straight to an object store: lake/objectstore.py)."""
    out = write_root(stage)
    job = method.job(cfg, loaded, design, plan, out, write_root(store) if store else None)
    summary = engine.run_partitions(loaded, plan.partitions, job) if job is not None else None
    for t in design.projections:
        engine.write_projection(loaded, t.attributes, part_location(out, t.name, "counts"))
    return summary


def _manifest(
    method: Method,
    cfg: PublishConfig,
    engine: Engine,
    loaded: LoadedTable,
    design: Design,
    plan: Plan,
    summary: pd.DataFrame | None,
) -> dict:
    labels = {a: loaded.dictionaries[a].labels for a in loaded.names}
    return header(
        release_id=str(cfg.release_id),
        engine=engine.name,
        source=source_entry(cfg, loaded, fingerprint(plan.counts, labels)),
        privacy=cfg.privacy.as_dict(),
        rules=[r.as_dict() for r in design.rules],
        rules_dropped=design.dropped,
        method=cfg.method,
        method_cost=method.cost(cfg, design, plan, summary),
        partitions=plan.partitions.parts,
        gnf=design.gnf,
        config=cfg.effective(),
        store_id=design.store_id,
        family=cfg.family,
        supersedes=_previous(cfg),
    )


def _previous(cfg: PublishConfig) -> str | None:
    """The family's latest release when this one is written (its lineage)."""
    before = latest(Root(cfg.output_path), str(cfg.family))
    return before if before != cfg.release_id else None
