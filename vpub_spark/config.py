"""The job configuration every `vpub` job shares, parsed once at the edge
(docs/reference/config.md).

Paths (decision): every relative path written inside a config file is resolved against
that file's directory, wherever the command runs: `input.path`, `input.table` (when a
.yaml file), `output.path`, `output.sign_key`, `spark`, `seed_file`, `private_dir` and
`marginals.state` (`resolve_paths`). Remote URIs (`s3://...`) and absolute paths are
kept; `~` is expanded. Paths given on the command line (`--input`, `--out`, ...) stay
relative to the working directory. A config built in code (`config_from_dict`) keeps
its paths as given. A YAML syntax error is one line: the file, line and column
(`tablespec.load_yaml`). `input.table` is a table-spec YAML file or the name of a packaged
preset (`adult`, or a generator: `sal`, `occ`, `texas`, `census`); without it, the input
directory's own `table.yaml` is used. Rules are a list (strings or {lhs, rhs}) or
`{random: {c, lhs, seed}}` (000 §6.1: random irreducible rules, RHS drawn among the
l-eligible attributes).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from .errors import SpecError
from .model import UNSAFE_GD_SCORE, PrivacySpec
from .options import number as number
from .options import one_of, option, parse_file, parse_options, refuse_unknown, yaml_keys
from .release.layout import PRIVATE, public_path
from .settings import ANONYMIZERS as ANONYMIZERS
from .settings import BIP_MODES as BIP_MODES
from .settings import MarginalSettings as MarginalSettings
from .settings import MultiSaSettings as MultiSaSettings
from .settings import StreamlinerSettings as StreamlinerSettings
from .storage import table_kind
from .tablespec import load_yaml

ENGINES = ("auto", "spark", "inprocess")
SEED_MAX = 2**128 - 1  # a seed is keyed as 16 bytes (release/secret.py, kernels/partitioning.py)


@dataclass(frozen=True)
class RandomRules:
    """`rules: {random: {c, lhs, seed}}`: 000 §6.1's random irreducible rules."""

    c: int = option(5, doc="how many rules", minimum=1)
    lhs: int = option(3, doc="attributes on each rule's left-hand side", minimum=1)
    seed: int = option(1, doc="the seed of the draw (public: the rules are published)")


@dataclass(frozen=True)
class PublishConfig:
    """A job config (docs/reference/config.md, generated from these options)."""

    input_path: str = option(
        "",
        doc="a CSV or Parquet file or directory, a data set written by `vpub datasets`, or "
        "`s3://...`; or a table: `catalog:db.patients`, `delta:PATH`, `iceberg:ns.table` "
        "(as the three keys below set it)",
        key="input.path",
        shown="required, or one of the three below",
    )
    input_catalog: str | None = option(
        None,
        doc="instead of a path, a table of the Spark session's catalog (`db.patients`); "
        "with `input.iceberg`, the Iceberg catalog: a SQLAlchemy URI or a REST `https://` URL",
        key="input.catalog",
    )
    input_delta: str | None = option(
        None, doc="instead of a path, a Delta table's directory or URI", key="input.delta"
    )
    input_iceberg: str | None = option(
        None,
        doc="instead of a path, an Iceberg table, `namespace.table`, of `input.catalog`",
        key="input.iceberg",
    )
    input_version: int | None = option(
        None,
        doc="the Delta version or Iceberg snapshot id to read (the manifest records the one read)",
        key="input.version",
        shown="the latest",
    )
    table: str | None = option(
        None,
        doc="a table-spec YAML file ([table specs](table-spec.md)) or a preset name (`adult`, "
        "`sal`, `occ`, `texas`, `census`)",
        key="input.table",
        shown="the data set's `table.yaml`",
    )
    input_format: str | None = option(
        None, doc="`csv` or `parquet`", key="input.format", shown="from the files"
    )
    privacy: PrivacySpec = option(
        PrivacySpec(), doc="the privacy model (below)", parse=lambda v, key: privacy_section(v)
    )
    rules: tuple[Any, ...] | RandomRules = option(
        RandomRules(),
        doc='privacy rules `Q -> S`: a list of `"a, b -> s"` or `{lhs: [a, b], rhs: s}`, or '
        "`{random: {c, lhs, seed}}` (below; [rules](rules.md))",
        shown="none",
        parse=lambda v, key: () if v is None else rules_section(v),
    )
    method: str = option(
        "uad",
        doc="`uad`, `gd`, `single_attribute`, `multi_sa_bip` (000); `marginals` (002); `rda`, "
        "`gda`, `ria` (003)",
    )
    output_path: str = option(
        "releases", doc="the output root, local or `s3://`", key="output.path"
    )
    release_id: str | None = option(
        None,
        doc="the release's directory name",
        key="output.release_id",
        shown="`<table>-<method>-l<l>` (`-m<m>` under m-invariance)",
    )
    family: str | None = option(
        None,
        doc="the catalog's lineage of releases",
        key="output.family",
        shown="`<table>-<method>`",
    )
    seed: int | None = option(
        None,
        doc="an explicit seed: reproducible, and a secret like a password; without it each "
        "run draws one ([threat model](../explanation/threat-model.md))",
        minimum=0,
        maximum=SEED_MAX,
    )
    seed_file: str | None = option(None, doc="read the seed from this owner-only file")
    private_dir: str | None = option(
        None,
        doc="where the run record keeps the seed; never inside `output.path`",
        shown="`$VPUB_PRIVATE_DIR`, else `$XDG_STATE_HOME/vpub`, else `~/.local/state/vpub`",
    )
    engine: str = option(
        "auto",
        doc="`inprocess` (pyarrow/pandas, no JVM), `spark`, or `auto`: in process when the "
        "input fits this machine's memory and no cluster is configured "
        "([choosing the engine](../how-to/choose-engine.md))",
        choices=ENGINES,
    )
    spark: str | None = option(None, doc="a Spark settings file (below)")
    workers: int | None = option(
        None,
        doc="the in-process engine's worker processes (forked; results identical for any "
        "count); not recorded in the manifest",
        shown="`$VPUB_WORKERS`, else every core",
        minimum=1,
        maximum=4096,
    )
    partitions: int | None = option(
        None,
        doc="how many partitions (Spark tasks) a rule-based release is cut into; each is "
        "l-eligible for every sensitive attribute",
        shown="auto",
        minimum=1,
    )
    overwrite: bool = False  # the command line's --overwrite
    wait_s: float | None = option(
        None,
        doc="wait this long for a concurrent run of the same release",
        key="output.wait_s",
        shown="fail at once",
    )
    sign_key: str | None = option(
        None,
        doc="an Ed25519 private key (`vpub keys generate`) that signs the manifest",
        key="output.sign_key",
    )
    gd_budget_s: float | None = option(
        None,
        doc="GD's add-back step stops when this is spent",
        key="gd.budget_s",
        shown="no limit",
    )
    gd_score: str = option(
        "order",
        doc="how GD's add-back picks among candidates: `order` (in a seeded order of the "
        "attributes: reads no data, keeps the posterior bound) or `kl-unsafe` (000's "
        "smallest KL on a sample: the schema picked tells where values lie, so the "
        "release has the audited guarantee only)",
        key="gd.score",
        parse=lambda v, key: _gd_score(v),
    )
    gd_sample_rows: int = option(
        100_000,
        doc="under `gd.score: kl-unsafe`, GD scores candidates on a seeded sample of this many rows",
        key="gd.sample_rows",
        minimum=1,
    )
    multi_sa: MultiSaSettings = option(MultiSaSettings(), doc="`multi_sa_bip`'s section (below)")
    marginals: MarginalSettings | None = option(
        None, doc="`marginals`' section (below); `vpub statdb build` reads it too"
    )
    streamliner: StreamlinerSettings | None = option(
        None, doc="`rda` / `gda` / `ria`'s section (below)"
    )
    anonymizer: str = option(
        "anatomy",
        doc="how `uad` / `gd` / `single_attribute` anonymize each sub-table: `anatomy`, or "
        "generalized by the streamliner's `rda` or `gda`",
        choices=ANONYMIZERS,
    )

    def __post_init__(self) -> None:
        # the method's name and what it needs (privacy model, rules, its own section) are
        # checked by the method registry (publishing/registry.py), before any work
        self._one_input()
        if self.engine not in ENGINES:
            raise SpecError(f"engine must be auto, spark or inprocess, not {self.engine!r}")
        if self.partitions is not None and (
            not isinstance(self.partitions, int) or self.partitions < 1
        ):
            raise SpecError(
                f"partitions must be a positive integer or auto, not {self.partitions!r}"
            )
        if self.seed is not None:  # a whole float (3.0) is kept as the integer it is
            object.__setattr__(self, "seed", number(self.seed, "seed", int, 0, SEED_MAX))
        if self.seed is not None and self.seed_file is not None:
            raise SpecError("give seed or seed_file, not both")
        one_of(self.anonymizer, ANONYMIZERS, "anonymizer")
        if self.release_id is not None and (
            not self.release_id or "/" in self.release_id or self.release_id.startswith(".")
        ):
            raise SpecError(
                f"release_id {self.release_id!r} must be a plain, non-hidden directory name"
            )

    def _one_input(self) -> None:
        """One input: `input.path`, or a table (`catalog:`, `delta:`, `iceberg:`), which
        `input_path` then names; with an Iceberg table, `input.catalog` is its catalog."""
        iceberg = self.input_iceberg or table_kind(self.input_path) == "iceberg"
        tables = {
            "catalog": None if iceberg else self.input_catalog,
            "delta": self.input_delta,
            "iceberg": self.input_iceberg,
        }
        given = [f"{kind}:{name}" for kind, name in tables.items() if name]
        if len(given) > 1 or (given and self.input_path not in ("", given[0])):
            raise SpecError(
                "give one input: input.path, input.catalog, input.delta or input.iceberg"
            )
        if given:
            object.__setattr__(self, "input_path", given[0])
        if iceberg and not self.input_catalog:
            raise SpecError("input.iceberg needs input.catalog: the Iceberg catalog's URI")
        if self.input_version is not None and table_kind(self.input_path) not in (
            "delta",
            "iceberg",
        ):
            raise SpecError("input.version applies to input.delta and input.iceberg")

    @property
    def diversity(self) -> int:
        """The bound every group keeps, 1/diversity: l under l-diversity, m under
        m-invariance."""
        return self.privacy.parameter

    def with_overrides(self, **kw: Any) -> PublishConfig:
        given = {k: v for k, v in kw.items() if v is not None}
        if "input_path" in given:  # --input replaces the config's input, whichever it is
            given |= {"input_delta": None, "input_iceberg": None}
            if table_kind(given["input_path"]) != "iceberg":  # (else: its catalog)
                given |= {"input_catalog": None, "input_version": None}
        return replace(self, **given)

    @property
    def secret_seed(self) -> int:
        """The run's seed; `publishing.method.with_secret_seed` must have fixed it (the
        pipeline does)."""
        if self.seed is None:
            raise SpecError("the run's seed is not drawn yet (publishing.method.with_secret_seed)")
        return self.seed

    def effective(self) -> dict:
        """The configuration as run, for the manifest: no path of the private store
        (named only by its id: docs/explanation/architecture.md, "Private state"), no
        absolute path of this machine, no seed, seed file or private directory
        (release/secret.py), and not the worker count (the release is the same for any)."""
        d = asdict(self)
        for key in ("seed", "seed_file", "private_dir", "workers"):
            d.pop(key)
        for key in ("input_path", "input_delta", "table", "output_path", "spark", "sign_key"):
            d[key] = public_path(d[key])
        catalog = self.input_catalog or ""
        if catalog.startswith("sqlite:///"):  # an Iceberg catalog's file
            d["input_catalog"] = f"sqlite:///{public_path(catalog.removeprefix('sqlite:///'))}"
        if d.get("marginals"):
            d["marginals"]["state"] = PRIVATE
        d["privacy"] = self.privacy.as_dict()
        d["rules"] = (
            {"random": True, "c": self.rules.c, "lhs": self.rules.lhs}
            if isinstance(self.rules, RandomRules)
            else list(self.rules)
        )
        return d


def with_overrides(
    cfg: PublishConfig,
    *,
    l: int | None = None,
    m: int | None = None,
    state: str | None = None,
    overwrite: bool = False,
    **fields: Any,
) -> PublishConfig:
    """The config with the command line's overrides (docs/reference/config.md): every field given
    (not None) wins; `l` / `m` set the privacy model, `state` the marginals' store."""
    if fields.get("seed") is not None:  # --seed wins over a config's seed_file
        cfg = replace(cfg, seed_file=None)
    if fields.get("seed_file") is not None:
        cfg = replace(cfg, seed=None)
    cfg = cfg.with_overrides(**fields)
    if l is not None:
        cfg = replace(
            cfg,
            privacy=PrivacySpec("l-diversity", l, None, cfg.privacy.also, cfg.privacy.suppression),
        )
    if m is not None:
        cfg = replace(
            cfg,
            privacy=PrivacySpec("m-invariance", None, m, cfg.privacy.also, cfg.privacy.suppression),
        )
    if state is not None:
        if cfg.marginals is None:
            raise SpecError("--state needs method marginals and a `marginals:` section")
        cfg = replace(cfg, marginals=replace(cfg.marginals, state=state))
    return replace(cfg, overwrite=True) if overwrite else cfg


def privacy_section(d: Any) -> PrivacySpec:
    """`privacy:` of a config, checked (the `PrivacySpec` it describes); `also` keeps its
    criteria as written (`privacy.thresholds` checks them)."""
    d = {} if d is None else d
    if not isinstance(d, dict):
        raise SpecError(f"privacy must be a mapping of its settings, not {d!r}")
    refuse_unknown(d, yaml_keys(PrivacySpec), "privacy")
    also = d.get("also") or {}
    if not isinstance(also, dict):
        raise SpecError("privacy.also must be a mapping, e.g. {entropy_l: 3, recursive_c: 2, k: 5}")
    return PrivacySpec(
        d.get("model", "l-diversity"),
        d.get("l", 2),
        d.get("m"),
        tuple(sorted(also.items(), key=lambda kv: str(kv[0]))),
        d.get("suppression", 0.0),
    )


def rules_section(v: Any) -> tuple[Any, ...] | RandomRules:
    """`rules:` of a config: the list of rules as written, or `RandomRules`."""
    if isinstance(v, dict):
        if set(v) != {"random"} or not isinstance(v["random"], dict):
            raise SpecError("rules must be a list or {random: {c: 5, lhs: 3, seed: 1}}")
        return parse_options(RandomRules, v["random"], "rules.random")
    if not isinstance(v, list) or not v:
        raise SpecError("rules must be a non-empty list")
    return tuple(v)


def _gd_score(value: Any) -> str:
    """gd.score, checked: `order` or `kl-unsafe` (the paper's KL is refused by its bare
    name, with the reason)."""
    if value == "kl":
        raise SpecError(
            f"gd.score: kl is called {UNSAFE_GD_SCORE}: the schema it picks tells an "
            f"adversary where values lie; write {UNSAFE_GD_SCORE} to accept that, or order "
            "(the default)"
        )
    one_of(value, ("order", UNSAFE_GD_SCORE), "gd.score")
    return str(value)


def config_from_dict(d: Any, where: str = "config") -> PublishConfig:
    """A job config from its YAML mapping, by the options `PublishConfig` declares
    (`options.parse_options`).

    Args:
        d: the mapping, its paths already resolved (`resolve_paths`) or as given.
        where: what it is, for the errors (the file's path).

    Returns:
        The config.

    Raises:
        SpecError: one line naming `where` and the dotted key at fault.
    """
    if isinstance(d, dict):  # a file without rules has none (code draws random ones)
        d = {"rules": None} | d
    cfg = parse_file(PublishConfig, d, where)  # anything else: "expected a mapping"
    if not cfg.input_path:
        raise SpecError(
            f"{where}: input.path is required (or input.catalog, input.delta, input.iceberg)"
        )
    return cfg


PATHS = (
    ("input", "path"),
    ("input", "delta"),
    ("input", "table"),
    ("output", "path"),
    ("output", "sign_key"),
    ("spark",),
    ("seed_file",),
    ("private_dir",),
    ("marginals", "state"),
)


def resolve_path(value: str, base: str | Path) -> str:
    """`value` as written in a config file in directory `base` (see the module docstring)."""
    from .storage import is_remote

    if is_remote(value) or "://" in value:
        return value
    p = Path(value).expanduser()
    return str(p) if p.is_absolute() else os.path.normpath(Path(base) / p)


def resolve_paths(d: Any, base: str | Path) -> Any:
    """The raw config `d` with the paths of `PATHS` resolved against `base`; anything not
    shaped as expected is left for `config_from_dict` to refuse."""
    if not isinstance(d, dict):
        return d
    out = dict(d)
    for keys in PATHS:
        *sections, key = keys
        holder = out
        for s in sections:
            if not isinstance(holder.get(s), dict):
                break
            inner = dict(holder[s])  # a copy: the caller's mapping stays as it was
            holder[s] = inner
            holder = inner
        else:
            v = holder.get(key)
            if (
                isinstance(v, str)
                and v
                and (keys != ("input", "table") or v.endswith((".yaml", ".yml")))
            ):
                holder[key] = resolve_path(v, base)
    return out


def load_config(path: str | Path) -> PublishConfig:
    """A job config file, its relative paths resolved against its directory.

    Args:
        path: the YAML file.

    Returns:
        The config.

    Raises:
        SpecError: a missing file, invalid YAML, or a key or value the options refuse
            (one line naming the file and the dotted key).
    """
    return config_from_dict(resolve_paths(load_yaml(path), Path(path).parent), str(path))
