"""The StatDB tests' store, for the server's tests."""

from statdb.conftest import store  # noqa: F401
