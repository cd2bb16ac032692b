"""The documentation's rules: a short README, every page of docs/ in the site's nav,
nothing in the repository citing a file outside it, and no work-tracking words in the
product (code, tests, configs, docs)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def _tracked(*patterns: str) -> list[Path]:
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", *patterns],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [ROOT / p for p in out.splitlines() if (ROOT / p).is_file()]


def _text_files() -> list[Path]:
    kinds = (".py", ".md", ".yaml", ".yml", ".sh", ".toml", ".cfg", ".txt", ".js", ".html")
    return [
        p for p in _tracked() if p.suffix in kinds or p.name in ("Makefile", "Dockerfile", "run")
    ]


def test_the_readme_is_a_front_page():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 250


def _nav_pages(nav) -> set[str]:
    pages: set[str] = set()
    for item in nav:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        if isinstance(value, list):
            pages |= _nav_pages(value)
        else:
            pages.add(value)
    return pages


def test_every_page_is_in_the_nav():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    pages = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    assert _nav_pages(config["nav"]) == pages


OUTSIDE = re.compile(r"DESIGN\.md|ALGORITHMS\.md|\.\./shared")


def test_nothing_cites_a_file_outside_the_repository():
    """Tests and CI may read the shared data set beside the checkout; nothing else
    names a path outside the repository."""
    found = [
        f"{p.relative_to(ROOT)}:{i}"
        for p in _text_files()
        if p.relative_to(ROOT).parts[0] not in ("tests", ".ci")
        for i, line in enumerate(p.read_text(errors="replace").splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert found == []


MACHINE_PATH = re.compile(r"(^|[^\w.~])/(home|root|work|Users)/")


def test_no_path_of_this_machine():
    """No absolute path of a machine in the product, the docs or the benchmark data the
    docs are generated from (a benchmark's JSON records its command line as typed)."""
    data = [p for p in _tracked("docs") if p.suffix in (".json", ".csv")]
    found = [
        f"{p.relative_to(ROOT)}:{i}"
        for p in [*_text_files(), *data]
        if p.relative_to(ROOT).parts[0] != "tests"
        for i, line in enumerate(p.read_text(errors="replace").splitlines(), 1)
        if MACHINE_PATH.search(line)
    ]
    assert found == []


TRACKING = re.compile(r"\bissues? #?\d+\b|\b(work )?sessions? ago\b", re.IGNORECASE)


def test_no_work_tracking_words_in_the_product():
    this = Path(__file__).resolve()
    found = [
        f"{p.relative_to(ROOT)}:{i}"
        for p in _text_files()
        if p.resolve() != this
        for i, line in enumerate(p.read_text(errors="replace").splitlines(), 1)
        if TRACKING.search(line)
    ]
    assert found == []


def test_the_release_format_page_names_the_manifest_format_the_code_writes():
    """Every "format version N" on the release format page is the code's."""
    from vpub_spark.release.layout import FORMAT_VERSION

    text = (ROOT / "docs" / "reference" / "release-format.md").read_text()
    named = {int(n) for n in re.findall(r"format version (\d+)", text)}
    assert named == {FORMAT_VERSION}, named


def test_the_http_reference_example_names_every_field_of_an_answer():
    """The example answer of `POST /statdb/count` lists the fields the server returns."""
    from vpub_spark.serve.openapi import BASE

    answer = BASE["components"]["schemas"]["Interval"]["properties"]
    text = (ROOT / "docs" / "reference" / "http-api.md").read_text()
    example = re.search(r"# answers (\{.*\})", text)
    assert example is not None
    assert set(re.findall(r'"(\w+)":', example[1])) == set(answer)
