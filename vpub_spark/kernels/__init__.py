"""Pure NumPy/pandas algorithms on one encoded chunk; they know nothing of Spark."""
