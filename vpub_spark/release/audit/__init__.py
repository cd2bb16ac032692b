"""The auditor: every check of a release, from its files alone (`release.py`'s
`audit_release`), the per-kind checks (`checks.py`), the comparison with the source
(`source.py`), the criteria of `privacy.also` (`criteria.py`), m-invariance across a family (`invariance.py`) and the audit in an
engine's tasks (`distributed.py`). Decisions: docs/explanation/auditor.md."""
