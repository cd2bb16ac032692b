"""Estimate models: each kind of published table, read back in code space.

A model (`models.EstimateModel`) answers what an analyst asks of one published table:
its estimated count at given values (`marginal`), a query's COUNT(*) (`count`) and
its whole estimated distribution (`joint`). `models.py` holds anatomy and projection
tables (`qi_runs.py`: an anatomy table's QI rows sorted for estimates at many keys),
`multi_sa.py` multi-SA tables, `generalized.py` generalized marginals;
`codes.py` turns a table's labels into codes; `columns.py` names the columns a part
carries beside its attributes.

Why a package of its own: the table-kind registry (`release/kinds.py`) names each
kind's model beside its audit checks, and the estimators that combine models (KL, the
junction tree, queries, risk: `utility/`) read releases through `release/`. So the
models sit below both: they import only `kernels/` and `errors.py`, and take a
table's parts as frames; finding and reading the files is `release/`'s part, and
`utility/release_models.py` builds a release's models through the registry.
"""
