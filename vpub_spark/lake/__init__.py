"""Publishing into a data lake: the commit protocol (a local rename, or an object store
without one), the catalog of releases (families, the latest pointer, lineage, pruning)
and their SQL tables. The release format itself (layout, manifest, reading, audit) is
`release/`."""
