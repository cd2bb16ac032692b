"""The registry of publishing methods: a method name -> its strategy
(docs/explanation/architecture.md, "The publishing pipeline and its registries").

Adding a method is one strategy module (the protocol in `publishing/method.py`) plus one
line here; the pipeline never asks which method it runs.
"""

from __future__ import annotations

from ..config import ANONYMIZERS, PublishConfig
from ..errors import SpecError
from ..privacy import CRITERIA
from .anatomy import AnatomyMethod
from .marginals import MarginalsMethod
from .method import Method
from .multi_sa import MultiSaMethod
from .streamliner import StreamlinerMethod

METHODS: dict[str, Method] = {
    "uad": AnatomyMethod("uad"),
    "gd": AnatomyMethod("gd"),
    "single_attribute": AnatomyMethod("single_attribute"),
    "multi_sa_bip": MultiSaMethod(),
    "marginals": MarginalsMethod(),
    "rda": StreamlinerMethod("rda"),
    "gda": StreamlinerMethod("gda"),
    "ria": StreamlinerMethod("ria"),
}


def method_for(cfg: PublishConfig) -> Method:
    """The config's method, checked against its privacy model before any work."""
    method = METHODS.get(cfg.method)
    if method is None:
        raise SpecError(f"method must be one of {', '.join(METHODS)}, not {cfg.method!r}")
    if cfg.privacy.model != method.privacy_model:
        example = (
            "{model: m-invariance, m: 6}"
            if method.privacy_model == "m-invariance"
            else "{model: l-diversity, l: 2}"
        )
        raise SpecError(
            f"method {cfg.method} needs privacy model {method.privacy_model} (privacy: {example}), not {cfg.privacy.model}"
        )
    if cfg.anonymizer not in method.anonymizers:
        raise SpecError(
            f"anonymizer {cfg.anonymizer} applies to uad, gd and single_attribute, not to method {cfg.method}"
        )
    if method.needs_rules and not cfg.rules:
        raise SpecError(
            f"method {cfg.method} needs `rules` (a list, or {{random: {{c, lhs, seed}}}})"
        )
    if method.section is not None and getattr(cfg, method.section) is None:
        raise SpecError(f"method {cfg.method} needs a `{method.section}:` section")
    check_models(cfg, method)
    return method


def generalizes(cfg: PublishConfig, method: Method) -> bool:
    """Whether the method publishes generalized groups (boxes) rather than exact QIs:
    it always does, or the config's anonymizer does."""
    return method.generalizes or cfg.anonymizer != ANONYMIZERS[0]


def check_models(cfg: PublishConfig, method: Method) -> None:
    """`privacy.also` against what the method guarantees, refused before any
    work, through each criterion's `guaranteed` (vpub_spark/privacy.py). Every method
    but multi_sa_bip bounds each group's sensitive shares by 1/p (p = l, or m for
    m-unique groups), and so guarantees:
    - distinct l-diversity for every l_d <= p: no share above 1/p needs p values;
    - entropy l-diversity for every l_e <= p: p_i <= 1/p gives -log p_i >= log p, so
      H = sum p_i (-log p_i) >= log p and exp(H) >= p;
    - recursive (c, p)-diversity for every c > 1: r_1 <= |g|/p and the p - 1 largest
      counts are at most (p - 1)|g|/p, so r_p + ... + r_m >= |g|/p >= r_1;
    - k-anonymity for k <= p when the groups are generalized (each group, of at least p
      rows, shares one box); anatomy publishes exact QIs and protects no identity.
    No method enforces t-closeness yet (`vpub check` measures it)."""
    also, p = cfg.privacy.extra, cfg.privacy.parameter
    name = f"method {cfg.method}" + (
        f" with anonymizer {cfg.anonymizer}" if cfg.anonymizer != "anatomy" else ""
    )
    if also and not method.also_models:
        raise SpecError(
            f"{name} enforces 000 Appendix B's condition only; privacy.also ({', '.join(also)}) is not available for it"
        )
    for key, value in also.items():
        found = CRITERIA[key]
        if not found.sensitive and not generalizes(cfg, method):
            raise SpecError(
                f"{name} publishes exact quasi-identifiers (anatomy), so it cannot enforce {found.title}; use anonymizer rda or gda, or method marginals"
            )
        refusal = found.refused(value, p, name, cfg.privacy.letter)
        if refusal:
            raise SpecError(refusal)
