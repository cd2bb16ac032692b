"""The statistical database of 004 (DESIGN.md §2): counting queries answered with
guaranteed result intervals from a private bucket store, m-invariant with every
marginal published from the same store."""
