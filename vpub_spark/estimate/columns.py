"""The columns a published table's parts carry beside its attributes: `group_id` (the
group of a row of an anatomy, multi-SA or generalized table), `count` (the rows a
part's row stands for) and `size` (the rows of a generalized group). The release
format (`release/layout.py`) takes them from here, so the models below it read parts
by the names the writers use."""

GROUP, COUNT, SIZE = "group_id", "count", "size"
COUNTERFEITS = "counterfeits"  # a generalized group's counterfeit tuples (m-invariance)
