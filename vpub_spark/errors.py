"""User-facing errors: the CLI prints their message and exits non-zero, never a traceback."""


class VpubError(Exception):
    """An error the user can fix (bad input, unmet rule, unwritable output)."""

    exit_code = 2


class SpecError(VpubError):
    """A table spec, config or rule is malformed or names something that does not exist."""


class DataError(VpubError):
    """The data do not fit the spec (missing values under `reject`, values outside bins, empty)."""


class StorageError(VpubError):
    """A file could not be read or written (a full disk, a corrupt or undecodable file)."""


class PrivacyError(VpubError):
    """A privacy requirement that no publication can meet (e.g. an RHS that is not l-eligible)."""


_RECORD = r"((?:Expected \d+ columns?, got \d+|[Mm]alformed (?:CSV )?records?(?: are detected in record parsing)?))\s*:.*"


def without_values(message: str) -> str:
    """A reader's message without the record it quotes (`Expected 2 columns, got 3:
    <the row>`, `Malformed CSV record: <the row>`): an error names the file and the
    problem, never a row's values, which may be private."""
    import re

    return re.sub(_RECORD, r"\1 (the record is not shown)", message, flags=re.S)
