"""`vpub serve`: the statistical database over HTTP (issue 17)."""
