"""The owner's private state: the bucket store (`store.py`) and its versions
(`versions.py`), its record identifiers (`record_keys.py`), its integrity checks
(`integrity.py`) and the owner's audit of a release against it (`audit.py`). Nothing
here is published. Decisions: docs/explanation/architecture.md, "Private state"."""
