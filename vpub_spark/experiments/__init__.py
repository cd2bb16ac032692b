"""Experiments (DESIGN.md §2): the papers' comparison runs, benchmarks and the demo, each\nwith a typed configuration; the CLI only fills them in."""
