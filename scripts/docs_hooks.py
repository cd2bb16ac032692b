"""mkdocs hooks (mkdocs.yml `hooks:`): reference sections generated from the code at
build time, so they are always current.

- `<!-- vpub-cli -->` in a page becomes every `vpub` command's `--help`, walked from the
  argument parser (`vpub_spark.cli.build_parser`), at a fixed width of 100 columns;
- `<!-- vpub-errors -->` becomes the table of the errors the command line reports
  (`vpub_spark.errors`) with their exit codes;
- `<!-- vpub-options NAME -->` becomes the tables of every YAML key of the config
  dataclasses (`config`: a job config; `spark`: Spark settings; `table-spec`), from their
  fields' `option(...)` metadata (`vpub_spark.options.option`), the same keys the parsers
  accept;
- `<!-- vpub-openapi -->` becomes the HTTP API's endpoints and schemas, from the OpenAPI
  document `vpub serve` serves at `/openapi.json` (`vpub_spark.serve.app.openapi_document`);
  the document itself is a file of the site beside the page (`openapi.json`);
- `<!-- vpub-bench FILE -->` becomes the tables of a benchmark's JSON (`vpub bench ...`,
  `vpub_bench.common.write_results`, copied under docs/) and the line that
  says when, where and with which command they were measured;
- `<!-- vpub-compare DIR -->` becomes a comparison's means (`vpub compare`: DIR's
  summary.csv, one table per sweep) and the same line from DIR's run.json;
- `<!-- vpub-change METHOD BEFORE AFTER -->` becomes, per sweep, METHOD's relative
  error and box width (or ARI length and LSD; the streamliner's DM and query errors) in two runs of one comparison, BEFORE's and AFTER's
  summary.csv, with their ratio, and both runs' lines.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import os
import re


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


def _option_sections() -> dict[str, list[tuple[str, type, str]]]:
    """Each `vpub-options` name: its tables as (heading, dataclass, key prefix)."""
    from vpub_bench.compare import CompareConfig
    from vpub_bench.compare_marginals import MarginalsCompareConfig
    from vpub_bench.compare_statdb import StatdbCompareConfig
    from vpub_bench.compare_streamliner import StreamlinerCompareConfig
    from vpub_spark import config, model
    from vpub_spark.engines.settings import SparkSettings

    return {
        "config": [
            ("Top level", config.PublishConfig, ""),
            ("`privacy`", model.PrivacySpec, "privacy."),
            ("`rules: {random: ...}`", config.RandomRules, "rules.random."),
            ("`multi_sa` (method `multi_sa_bip`)", config.MultiSaSettings, "multi_sa."),
            ("`marginals` (method `marginals`)", config.MarginalSettings, "marginals."),
            (
                "`streamliner` (methods `rda`, `gda`, `ria`)",
                config.StreamlinerSettings,
                "streamliner.",
            ),
        ],
        "spark": [("Spark settings file", SparkSettings, "")],
        "compare": [
            ("000 §6: the rule-based methods", CompareConfig, ""),
            ("its `multi_sa` (method `multi_sa_bip`)", config.MultiSaSettings, "multi_sa."),
            ("002 §4: a config with `marginals:`", MarginalsCompareConfig, ""),
            ("003 §4: a config with `streamliner:`", StreamlinerCompareConfig, ""),
            ("004 §9: a config with `statdb:`", StatdbCompareConfig, ""),
        ],
        "table-spec": [
            ("Table spec", model.TableSpec, ""),
            ("Each of `attributes`", model.Attribute, "attributes[]."),
        ],
    }


def _default(f: dataclasses.Field) -> str:
    """A field's default as the YAML reads it."""
    if f.metadata.get("shown"):
        return f.metadata["shown"]
    value = f.default
    if value is dataclasses.MISSING:
        return "required"
    if value is None:
        return "none"
    if dataclasses.is_dataclass(value):
        return "(below)"
    if isinstance(value, str) and value:
        return f"`{value}`"
    return f"`{json.dumps(list(value) if isinstance(value, tuple) else value)}`"


def options_reference(name: str) -> str:
    parts = []
    for heading, cls, prefix in _option_sections()[name]:
        rows = [f"### {heading}\n", "| key | default | meaning |", "|---|---|---|"]
        for f in dataclasses.fields(cls):
            if "doc" in f.metadata:
                key = prefix + (f.metadata.get("key") or f.name)
                rows.append(f"| `{key}` | {_default(f)} | {f.metadata['doc']} |")
        parts.append("\n".join(rows) + "\n")
    return "\n".join(parts)


def _schema_type(schema: dict) -> str:
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[1]
        return f"[{name}](#{name.lower()})"
    kind = schema.get("type", "object")
    if kind == "array":
        return f"list of {_schema_type(schema.get('items', {}))}"
    if "enum" in schema:
        return " \\| ".join(f"`{v}`" for v in schema["enum"])
    return kind


def _cell(text: object) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def openapi_reference() -> str:
    from vpub_spark.serve.app import openapi_document

    doc, parts = openapi_document(), []
    for path, operations in doc["paths"].items():
        for verb, op in operations.items():
            parts.append(f"### `{verb.upper()} {path}`\n\n{_cell(op.get('summary', ''))}\n")
            for p in op.get("parameters", []):
                parts.append(
                    f"- parameter `{p['name']}` (in {p['in']}): {_schema_type(p['schema'])}"
                )
            body = op.get("requestBody", {}).get("content", {}).get("application/json")
            if body:
                parts.append(f"- body: {_schema_type(body['schema'])}")
            for status, r in op.get("responses", {}).items():
                parts.append(f"- {status}: {_cell(r.get('description', ''))}")
            parts.append("")
    parts.append("## Schemas\n")
    for name, schema in doc["components"]["schemas"].items():
        parts.append(f"### {name}\n\n{_cell(schema.get('description', ''))}\n")
        parts += ["| field | type | meaning |", "|---|---|---|"]
        for field, prop in schema.get("properties", {}).items():
            meaning = prop.get("description", "")
            if "example" in prop:
                meaning += f" (e.g. `{prop['example']}`)"
            parts.append(f"| `{field}` | {_schema_type(prop)} | {_cell(meaning)} |")
        parts.append("")
    return "\n".join(parts)


def on_files(files, config):
    """The OpenAPI document as a file of the site, beside the HTTP API page."""
    from mkdocs.structure.files import File

    from vpub_spark.serve.app import openapi_document

    text = json.dumps(openapi_document(), indent=2) + "\n"
    files.append(File.generated(config, "reference/openapi.json", content=text))
    return files


def _measured(run: dict) -> str:
    m = run["machine"]
    ref = m.get("reference")
    speed = (
        f"; reference kernels: NumPy sort of 4M {ref['numpy_sort_4m_s']} s, "
        f"Python loop of 1M {ref['python_loop_1m_s']} s"
        if ref
        else ""
    )
    archive = m.get("spark_class_archive")
    if archive is not None:
        speed += f"; Spark's class-data archive {'built' if archive else 'not built'}"
    moved = re.search(r"(?<![\w/])conf/(compare_\w+\.yaml)", run["command"])
    now = f" (that config is now `vpub_bench/conf/{moved[1]}`)" if moved else ""
    return (
        f"Measured {run['date']} with `{run['command']}`{now} on {m['cores']} cores, "
        f"{m['memory_gib']} GiB ({m['cpu']}; {m['os']}; Python {m['python']}; "
        f"vpub {m['vpub']}{speed})."
    )


def _markdown_table(columns: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def bench_reference(path: str) -> str:
    with open(path) as f:
        results = json.load(f)
    parts = [
        f"**{_cell(t['title'])}**\n\n{_markdown_table(t['columns'], t['rows'])}\n"
        for t in results["tables"]
    ]
    return "\n".join([*parts, _measured(results["run"]), ""])


def _mean(x: float) -> str:
    return f"{x:.3g}" if abs(x) < 100 else f"{x:,.0f}"


def compare_reference(directory: str) -> str:
    import pandas as pd

    summary = pd.read_csv(os.path.join(directory, "summary.csv"))
    labels = {
        "kl": "KL",
        "relative_error": "error",
        "median_error": "median error",
        "box_width": "box width",
    }
    measures = [c for c in (*labels, "time_s") if c in summary.columns]
    parts = []
    for sweep, part in summary.groupby("sweep", sort=False):
        wide = part.pivot_table(index="value", columns="method", values=measures, sort=False)
        columns = [str(sweep)] + [
            f"{labels.get(m, 'time (s)')} {method}" for m, method in wide.columns
        ]
        rows = [
            [f"{value:g}" if isinstance(value, float) else str(value)]
            + ["" if pd.isna(x) else _mean(float(x)) for x in row]
            for value, row in zip(wide.index, wide.to_numpy(), strict=True)
        ]
        parts.append(f"**Means, varying {sweep}**\n\n{_markdown_table(columns, rows)}\n")
    run = os.path.join(directory, "run.json")
    if os.path.exists(run):
        with open(run) as f:
            parts.append(_measured(json.load(f)) + "\n")
    else:
        parts.append(
            "This comparison's directory holds no run.json: its date and machine are not "
            "recorded; running the command again records them.\n"
        )
    return "\n".join(parts)


def change_reference(method: str, before: str, after: str) -> str:
    """One method's error (and box width; the statistical database's ARI length and
    LSD) in two runs of one comparison, point by point."""
    import pandas as pd

    runs = [pd.read_csv(os.path.join(d, "summary.csv")) for d in (before, after)]
    keys = ["sweep", "value"]
    old, new = (r[r["method"] == method].set_index(keys) for r in runs)
    names = {
        "relative_error": "error",
        "box_width": "box width",
        "ari_length": "ARI length",
        "lsd": "LSD",
        "dm_ratio": "DM / (n l)",
        "qwe_age": "error (Age)",
        "qwe_all": "error (all QI)",
    }
    measures = [c for c in names if c in old.columns]
    parts = []
    for sweep in dict.fromkeys(new.index.get_level_values(0)):
        rows = []
        for value in new.loc[sweep].index:
            row = [str(value)]
            for c in measures:
                a, b = float(old.loc[(sweep, value), c]), float(new.loc[(sweep, value), c])
                row += [_mean(a), _mean(b), f"{b / a:.3f}"]
            rows.append(row)
        columns = [str(sweep)] + [
            f"{names[c]} {when}" for c in measures for when in ("before", "after", "after / before")
        ]
        parts.append(f"**{method}, varying {sweep}**\n\n{_markdown_table(columns, rows)}\n")
    for label, d in (("Before", before), ("After", after)):
        with open(os.path.join(d, "run.json")) as f:
            parts.append(f"{label}: " + _measured(json.load(f)) + "\n")
    return "\n".join(parts)


def on_page_markdown(markdown: str, page, config, files) -> str:
    docs = config["docs_dir"]
    markdown = re.sub(
        r"<!-- vpub-bench (\S+) -->", lambda m: bench_reference(os.path.join(docs, m[1])), markdown
    )
    markdown = re.sub(
        r"<!-- vpub-compare (\S+) -->",
        lambda m: compare_reference(os.path.join(docs, m[1])),
        markdown,
    )
    markdown = re.sub(
        r"<!-- vpub-change (\S+) (\S+) (\S+) -->",
        lambda m: change_reference(m[1], os.path.join(docs, m[2]), os.path.join(docs, m[3])),
        markdown,
    )
    if "<!-- vpub-openapi -->" in markdown:
        markdown = markdown.replace("<!-- vpub-openapi -->", openapi_reference())
    if "<!-- vpub-cli -->" in markdown:
        markdown = markdown.replace("<!-- vpub-cli -->", cli_reference())
    if "<!-- vpub-errors -->" in markdown:
        markdown = markdown.replace("<!-- vpub-errors -->", errors_reference())
    return re.sub(r"<!-- vpub-options ([a-z-]+) -->", lambda m: options_reference(m[1]), markdown)
