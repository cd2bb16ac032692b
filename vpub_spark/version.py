"""The package's version, alone, so that any module can name it without importing the
public API."""

__version__ = "0.1.0"
