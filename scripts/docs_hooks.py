"""mkdocs hooks (mkdocs.yml `hooks:`): reference sections generated from the code at
build time, so they are always current.

- `<!-- vpub-cli -->` in a page becomes every `vpub` command's `--help`, walked from the
  argument parser (`vpub_spark.cli.build_parser`), at a fixed width of 100 columns;
- `<!-- vpub-errors -->` becomes the table of the errors the command line reports
  (`vpub_spark.errors`) with their exit codes.
"""

from __future__ import annotations

import argparse
import inspect
import os


def _commands(parser: argparse.ArgumentParser):
    """(prog, parser) of the parser and of every sub-command below it, depth first."""
    yield parser.prog, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _commands(sub)


def cli_reference() -> str:
    from vpub_spark.cli import build_parser

    os.environ["COLUMNS"] = "100"  # argparse wraps help at the terminal's width
    parts = []
    for prog, parser in _commands(build_parser()):
        parts.append(f"### `{prog}`\n\n```text\n{parser.format_help().rstrip()}\n```\n")
    return "\n".join(parts)


def errors_reference() -> str:
    from vpub_spark import errors

    rows = ["| error | exit code | when |", "|---|---|---|"]
    for name, cls in inspect.getmembers(errors, inspect.isclass):
        if issubclass(cls, errors.VpubError):
            rows.append(f"| `{name}` | {cls.exit_code} | {inspect.getdoc(cls)} |")
    return "\n".join(rows) + "\n"


def on_page_markdown(markdown: str, page, config, files) -> str:
    if "<!-- vpub-cli -->" in markdown:
        markdown = markdown.replace("<!-- vpub-cli -->", cli_reference())
    if "<!-- vpub-errors -->" in markdown:
        markdown = markdown.replace("<!-- vpub-errors -->", errors_reference())
    return markdown
