"""`vpub serve`'s page in a real headless Chromium (Debian's chromium and chromium-driver,
driven by selenium): the token prompt, the count form, the intervals drawn for every
method, the release catalog and an estimate, each checked against the library; and a
new user's first clicks on a store whose labels hold parentheses, quotes and commas.
`.ci/run` installs the browser; without one the test is skipped, saying so."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from serve_helpers import running

from vpub_spark.kernels.statdb import Query
from vpub_spark.release.reader import open_release
from vpub_spark.serve.app import ServeSettings
from vpub_spark.statdb.db import METHODS, StatDB
from vpub_spark.utility.queries import estimate_count
from vpub_spark.utility.release_models import release_models
from vpub_spark.utility.where import parse_where

CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
DOCS_FIGURE = Path(__file__).resolve().parents[2] / "docs" / "figures" / "serve-page.png"


@pytest.fixture
def browser(tmp_path):
    if not (CHROMIUM and DRIVER):
        pytest.skip(
            "NO BROWSER: chromium and chromedriver are not installed (apt-get install chromium chromium-driver); the page was not tested"
        )
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'profile'}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    driver.set_window_size(1200, 1600)
    yield driver
    driver.quit()


def test_the_page_counts_and_estimates_as_the_library_does(store, browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ready
    from selenium.webdriver.support.ui import Select, WebDriverWait

    token = tmp_path / "token"
    token.write_text("page-token")
    db = StatDB.open(store[0])
    ages = db.domains["age"]
    with running(ServeSettings(str(store[0]), str(store[1].parent), str(token), rate=0)) as url:
        wait = WebDriverWait(browser, 30)
        browser.get(url + "/")
        wait.until(ready.visibility_of_element_located((By.ID, "token")))  # 401: asks for it
        browser.find_element(By.ID, "token").send_keys("page-token")
        browser.find_element(By.ID, "token-save").click()
        wait.until(
            lambda b: b.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "yes"
        )
        header = browser.find_element(By.ID, "store-info").text
        assert "beyond 1 in 4" in header and "m-invariant" not in header and "004" not in header

        Select(browser.find_element(By.ID, "qi-age-low")).select_by_visible_text(ages[3])
        Select(browser.find_element(By.ID, "qi-age-high")).select_by_visible_text(ages[20])
        browser.find_element(By.ID, "sens-none").click()
        for label in ("j03", "j04"):
            browser.find_element(By.ID, f"sens-{db.domains['job'].index(label)}").click()
        browser.find_element(By.ID, "count").click()
        wait.until(ready.visibility_of_element_located((By.ID, "result-dyn-ana")))
        where = f"age between {ages[3]} and {ages[20]} and job in (j03, j04)"
        for method in METHODS:
            row = browser.find_element(By.ID, f"result-{method}")
            expected = db.count(where, method, log=False)
            shown = (int(row.get_attribute("data-lower")), int(row.get_attribute("data-upper")))
            assert shown == (expected.low, expected.high), method
            assert f"{expected.low:,} – {expected.high:,}" in row.text
        assert "Between" in browser.find_element(By.ID, "answer-text").text

        browser.find_element(By.ID, "release-r").click()
        wait.until(ready.text_to_be_present_in_element((By.ID, "release-audit"), "Audit passed"))
        assert "m-invariance (m = 4)" in browser.find_element(By.ID, "release-guarantee").text
        browser.find_element(By.ID, "estimate-where").send_keys("age between 30 and 50")
        browser.find_element(By.ID, "estimate").click()
        wait.until(
            lambda b: b.find_element(By.ID, "estimate-result").get_attribute("data-estimate")
        )
        got = float(browser.find_element(By.ID, "estimate-result").get_attribute("data-estimate"))
        rel = open_release(store[1])
        models, domains = release_models(rel)
        n = int(rel.manifest["source"]["rows"])
        assert got == pytest.approx(
            estimate_count(models, parse_where("age between 30 and 50", domains), n, domains)
        )
        _screenshot_for_the_docs(browser, tmp_path)

        browser.find_element(By.ID, "estimate-where").clear()
        browser.find_element(By.ID, "estimate-where").send_keys("weight = 3")
        browser.find_element(By.ID, "estimate").click()
        wait.until(ready.visibility_of_element_located((By.ID, "error")))
        assert "weight" in browser.find_element(By.ID, "error").text
        browser.save_screenshot(str(tmp_path / "page.png"))


def _screenshot_for_the_docs(browser, tmp_path) -> None:
    """The docs' picture of the page (docs/tutorials/serve.md), taken here, with a count's
    intervals and an estimate on it, so it is always the current page."""
    from PIL import Image

    browser.execute_script("window.scrollTo(0, 0)")
    shot = tmp_path / "serve-page.png"
    browser.save_screenshot(str(shot))
    with Image.open(shot) as image:
        assert image.width >= 1000 and image.height >= 800
        assert len(image.convert("RGB").getcolors(maxcolors=1 << 16) or range(1 << 16)) > 50
    if os.access(DOCS_FIGURE.parent, os.W_OK):  # a read-only checkout keeps its picture
        shutil.copyfile(shot, DOCS_FIGURE)


def _intervals(browser, wait, db: StatDB, query: Query) -> None:
    """Every method's drawn interval equals the library's for `query`."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ready

    wait.until(ready.visibility_of_element_located((By.ID, "result-dyn-ana")))
    assert not browser.find_element(By.ID, "error").is_displayed()
    for method in METHODS:
        row = browser.find_element(By.ID, f"result-{method}")
        expected = db.count(query, method, log=False)
        shown = (int(row.get_attribute("data-lower")), int(row.get_attribute("data-upper")))
        assert shown == (expected.low, expected.high), method


def test_a_new_user_counts_and_estimates_on_real_labels(labels_store, browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ready
    from selenium.webdriver.support.ui import Select, WebDriverWait

    db = StatDB.open(labels_store[0])
    with running(ServeSettings(str(labels_store[0]), str(labels_store[1].parent), rate=0)) as url:
        wait = WebDriverWait(browser, 30)
        browser.get(url + "/")
        wait.until(
            lambda b: b.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "yes"
        )
        header = browser.find_element(By.ID, "store-info").text
        assert (
            header
            == f"{len(db.values):,} people. Answers are ranges that always hold the true count. Even knowing how it was made, no one can learn a person's job beyond 1 in 3."
        )

        browser.find_element(By.ID, "count").click()  # the default form: everyone
        everyone = Query({}, frozenset(range(len(db.domains["job"]))))
        _intervals(browser, wait, db, everyone)
        first = browser.find_element(By.ID, "result-dyn-ana")
        assert (
            first.get_attribute("data-lower")
            == first.get_attribute("data-upper")
            == str(len(db.values))
        )

        Select(browser.find_element(By.ID, "qi-education-low")).select_by_visible_text(
            "Bachelors degree(BA AB BS)"
        )
        Select(browser.find_element(By.ID, "qi-education-high")).select_by_visible_text(
            "Masters degree(MA MS)"
        )
        Select(browser.find_element(By.ID, "qi-origin-low")).select_by_visible_text(
            "Mexican (Mexicano)"
        )
        Select(browser.find_element(By.ID, "qi-origin-high")).select_by_visible_text(
            'O\'Brien, "Jr"'
        )
        browser.find_element(By.ID, "sens-none").click()
        jobs = db.domains["job"]
        for label in ("Craft (repair)", "it's", "and"):
            browser.find_element(By.ID, f"sens-{jobs.index(label)}").click()
        browser.find_element(By.ID, "count").click()
        wait.until(ready.staleness_of(first))
        edu, origin = db.domains["education"], db.domains["origin"]
        chosen = Query(
            {
                "education": (
                    edu.index("Bachelors degree(BA AB BS)"),
                    edu.index("Masters degree(MA MS)"),
                ),
                "origin": (0, origin.index('O\'Brien, "Jr"')),
            },
            frozenset(jobs.index(v) for v in ("Craft (repair)", "it's", "and")),
        )
        _intervals(browser, wait, db, chosen)

        browser.find_element(By.ID, "release-r").click()
        wait.until(ready.text_to_be_present_in_element((By.ID, "release-audit"), "Audit passed"))
        assert browser.find_element(By.ID, "release-tables-box").is_displayed()
        assert not browser.find_element(
            By.ID, "release-gnf-box"
        ).is_displayed()  # no rules: no heading
        example = "education in ('Bachelors degree(BA AB BS)', Children)"
        field = browser.find_element(By.ID, "estimate-where")
        assert field.get_attribute("placeholder") == example
        assert example in browser.find_element(By.ID, "estimate-example").text
        rel = open_release(labels_store[1])
        models, domains = release_models(rel)
        n = int(rel.manifest["source"]["rows"])
        for typed in ("", "origin = 'Mexican (Mexicano)' and job in ('it''s', and)"):
            field.clear()
            field.send_keys(typed)
            browser.find_element(By.ID, "estimate").click()  # empty: the example is asked
            asked = typed or example
            wait.until(
                lambda b, asked=asked: (
                    b.find_element(By.ID, "estimate-where").get_attribute("value") == asked
                    and b.find_element(By.ID, "estimate-result").get_attribute("data-estimate")
                )
            )
            got = float(
                browser.find_element(By.ID, "estimate-result").get_attribute("data-estimate")
            )
            assert got == pytest.approx(
                estimate_count(models, parse_where(asked, domains), n, domains)
            )
            assert not browser.find_element(By.ID, "error").is_displayed()
        browser.save_screenshot(str(tmp_path / "labels.png"))


REPORT_FIGURE = DOCS_FIGURE.parent / "report.png"


def test_the_release_report_opens_from_the_page(store, browser, tmp_path):
    """The release's page links to its report; the report, fetched with the token,
    shows every section of the reader's view and its plots (each image decoded, wider
    and taller than nothing), and no request leaves the server (loopback)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ready
    from selenium.webdriver.support.ui import WebDriverWait

    token = tmp_path / "token"
    token.write_text("page-token")
    with running(ServeSettings(str(store[0]), str(store[1].parent), str(token), rate=0)) as url:
        wait = WebDriverWait(browser, 60)
        browser.get(url + "/")
        wait.until(ready.visibility_of_element_located((By.ID, "token")))
        browser.find_element(By.ID, "token").send_keys("page-token")
        browser.find_element(By.ID, "token-save").click()
        wait.until(
            lambda b: b.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "yes"
        )
        browser.find_element(By.ID, "release-r").click()
        wait.until(ready.text_to_be_present_in_element((By.ID, "release-audit"), "Audit passed"))
        link = browser.find_element(By.ID, "release-report")
        assert link.get_attribute("href") == url + "/releases/r/report"
        page = browser.current_window_handle
        link.click()
        wait.until(lambda b: len(b.window_handles) == 2)
        browser.switch_to.window(next(h for h in browser.window_handles if h != page))
        wait.until(ready.text_to_be_present_in_element((By.TAG_NAME, "h1"), "Release report: r"))
        text = browser.find_element(By.TAG_NAME, "body").text
        for section in (
            "The guarantee",
            "The audit",
            "The tables",
            "What this release cannot show",
        ):
            assert section in text
        assert "The owner's view" not in text and "Audit PASSED" in text
        sizes = browser.execute_script(
            "return [...document.images].map((i) => [i.complete, i.naturalWidth, i.naturalHeight])"
        )
        assert len(sizes) >= 4 and all(done and w > 0 and h > 0 for done, w, h in sizes)
        _report_screenshot(browser, tmp_path)
        fetched = browser.execute_script(
            "return performance.getEntriesByType('resource').map((e) => e.name)"
        )
        browser.switch_to.window(page)
        fetched += browser.execute_script(
            "return performance.getEntriesByType('resource').map((e) => e.name)"
        )
    assert fetched and all(u.startswith((url + "/", "data:", "blob:")) for u in fetched), fetched


def _report_screenshot(browser, tmp_path) -> None:
    """The docs' picture of a report (docs/tutorials/report.md), taken here."""
    from PIL import Image

    shot = tmp_path / "report.png"
    browser.save_screenshot(str(shot))
    with Image.open(shot) as image:
        assert image.width >= 1000 and image.height >= 800
        assert len(image.convert("RGB").getcolors(maxcolors=1 << 16) or range(1 << 16)) > 50
    if os.access(REPORT_FIGURE.parent, os.W_OK):
        shutil.copyfile(shot, REPORT_FIGURE)
