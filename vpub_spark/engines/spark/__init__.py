"""The Spark engine: session, IO, dictionary encoding, the plan in SQL and the Arrow task adapters."""
