"""vpub_spark: privacy-preserving publication of microdata on Apache Spark."""

__version__ = "0.1.0"
