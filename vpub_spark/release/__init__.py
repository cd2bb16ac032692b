"""Releases (docs/reference/release-format.md), by concept: the format at this level
(layout, manifest, table kinds, reading, also from an object store, secrets, signing,
export); `audit/`, the auditor; `stores/`, the owner's private state. Publishing them
(the commit protocol, the catalog, SQL tables) is `lake/`."""
