"""The statistical database of 004 (docs/explanation/statdb.md): counting queries
answered with guaranteed result intervals from a private bucket store, m-invariant with
every marginal published from the same store."""
