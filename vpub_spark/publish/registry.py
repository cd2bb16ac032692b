"""The registry of publishing methods (DESIGN.md §2): a method name -> its strategy.

Adding a method is one strategy module (the protocol in `publish/method.py`) plus one
line here; the pipeline never asks which method it runs.
"""

from __future__ import annotations

from ..config import PublishConfig
from ..errors import SpecError
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
    if cfg.anonymizer != "anatomy" and not isinstance(method, AnatomyMethod):
        raise SpecError(f"anonymizer {cfg.anonymizer} applies to uad, gd and single_attribute, not to method {cfg.method}")  # fmt: skip
    if method.needs_rules and not cfg.rules:
        raise SpecError(
            f"method {cfg.method} needs `rules` (a list, or {{random: {{c, lhs, seed}}}})"
        )
    if method.section is not None and getattr(cfg, method.section) is None:
        raise SpecError(f"method {cfg.method} needs a `{method.section}:` section")
    return method
