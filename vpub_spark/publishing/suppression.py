"""The suppression budget: `privacy.suppression: 0.05` lets a configured rule
whose RHS is not l-eligible be met by suppressing the fewest rows
(`kernels/suppression.py`) instead of stopping, within 5% of the rows; off (0) by
default. Applies to the rule-based methods (anatomy, l-diversity). RHS attributes are
taken in the rules' order, each on the rows the earlier ones left; the rows go before
anything is designed, so every table of the release covers the same rows. The manifest
records the budget and, per rule, the rows it cost (`suppression`); the audit checks
the total against the budget, and with the source that every table is the source less
that many rows."""

from __future__ import annotations

import numpy as np

from ..config import PublishConfig, RandomRules
from ..engines.base import Engine, LoadedTable
from ..errors import PrivacyError
from ..kernels.suppression import fewest_to_suppress
from ..rules import parse_rules


def apply_budget(
    cfg: PublishConfig, engine: Engine, loaded: LoadedTable, suppresses: bool
) -> tuple[LoadedTable, dict | None]:
    """The table with the suppressed rows gone, and the manifest's `suppression` entry
    (None when the budget is off)."""
    budget = cfg.privacy.suppression
    if not budget:
        return loaded, None
    if not suppresses or cfg.privacy.model != "l-diversity":
        raise PrivacyError(
            f"privacy.suppression applies to the rule-based methods (uad, gd, single_attribute), not to {cfg.method}"
        )
    if isinstance(cfg.rules, RandomRules):  # random rules draw eligible RHS only
        return loaded, {"budget": budget, "rows": 0, "per_rule": {}}
    n, per_rule, seen = loaded.rows, {}, set()
    for rule in parse_rules(list(cfg.rules), loaded.names):
        if rule.rhs in seen:
            continue
        seen.add(rule.rhs)
        drop = fewest_to_suppress(loaded.counts[rule.rhs], int(cfg.diversity))
        if drop.sum():
            loaded = engine.suppress(loaded, rule.rhs, drop, cfg.secret_seed)
        per_rule[str(rule)] = int(drop.sum())
    total = int(sum(per_rule.values()))
    if total > budget * n:
        worst = max(per_rule, key=lambda r: per_rule[r])
        raise PrivacyError(
            f"meeting the rules needs {total:,} suppressed rows ({total / n:.1%}), over the budget privacy.suppression = {budget:g} ({int(np.floor(budget * n)):,} rows); the costliest rule is '{worst}' ({per_rule[worst]:,} rows)"
        )
    return loaded, {"budget": budget, "rows": total, "per_rule": per_rule}
