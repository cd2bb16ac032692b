"""The integer-program solvers `bip.py` runs (through PuLP), named here so that a config
can be checked without importing PuLP and pandas."""

SOLVERS = ("cbc", "highs")
