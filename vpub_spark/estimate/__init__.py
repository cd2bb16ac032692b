"""Estimate models: each kind of published table, read back in code space.

A model (`models.EstimateModel`) answers what an analyst asks of one published table:
`marginal`, `count` and `joint`. The modules, and why the models sit below both
`release/` and `utility/`: docs/explanation/architecture.md, "Adding a table kind".
"""
