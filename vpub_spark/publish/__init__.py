"""Publishing (DESIGN.md §2): the pipeline, one strategy per method family, the registry."""
