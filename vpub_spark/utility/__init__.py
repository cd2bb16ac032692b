"""Utility of a release (000 §5.1, §6.1): the decomposable-model estimate, KL
divergence, and counting queries with relative error."""
