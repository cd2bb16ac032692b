"""Releases (docs/reference/release-format.md), the format: layout, manifest, table
kinds, reading (also from an object store), audit, the private store format, secrets,
signing, export. Publishing them (the commit protocol, the catalog, SQL tables) is
`lake/`."""
