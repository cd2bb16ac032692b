"""`vpub serve`: the statistical database over HTTP."""
