"""Experiments: the papers' comparison runs, benchmarks and the demo, each with a typed
configuration; the CLI only fills them in."""
