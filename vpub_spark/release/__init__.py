"""Releases (DESIGN.md §4): the writer, the reader and the auditor."""
