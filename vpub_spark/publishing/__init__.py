"""Publishing: the pipeline, one strategy per method family, the registry
(docs/explanation/architecture.md, "The publishing pipeline and its registries")."""
