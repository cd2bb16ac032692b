"""Decompositions of a table's attributes into a publication schema (000 §5, §1.3)."""
