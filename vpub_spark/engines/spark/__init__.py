"""The Spark engine: session, IO, dictionary encoding and the applyInPandas adapters."""
