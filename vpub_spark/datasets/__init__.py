"""Data sets: the Adult preset and deterministic synthetic generators."""
