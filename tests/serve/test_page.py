"""`vpub serve`'s page in a real headless Chromium (Debian's chromium and chromium-driver,
driven by selenium): the token prompt, the count form, the intervals drawn for every
method, the release catalog and an estimate, each checked against the library.
`.ci/run` installs the browser; without one the test is skipped, saying so."""

from __future__ import annotations

import shutil

import pytest
from serve_helpers import running

from vpub_spark.release.reader import open_release
from vpub_spark.serve.app import ServeSettings
from vpub_spark.statdb.db import METHODS, StatDB
from vpub_spark.utility.queries import estimate_count
from vpub_spark.utility.release_models import release_models
from vpub_spark.utility.where import parse_where

CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")


@pytest.fixture
def browser(tmp_path):
    if not (CHROMIUM and DRIVER):
        pytest.skip("NO BROWSER: chromium and chromedriver are not installed (apt-get install chromium chromium-driver); the page was not tested")  # fmt: skip
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}"):  # fmt: skip
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
        wait.until(lambda b: b.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "yes")  # fmt: skip

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
        wait.until(lambda b: b.find_element(By.ID, "estimate-result").get_attribute("data-estimate"))  # fmt: skip
        got = float(browser.find_element(By.ID, "estimate-result").get_attribute("data-estimate"))
        rel = open_release(store[1])
        models, domains = release_models(rel)
        n = int(rel.manifest["source"]["rows"])
        assert got == pytest.approx(estimate_count(models, parse_where("age between 30 and 50", domains), n, domains))  # fmt: skip

        browser.find_element(By.ID, "estimate-where").clear()
        browser.find_element(By.ID, "estimate-where").send_keys("weight = 3")
        browser.find_element(By.ID, "estimate").click()
        wait.until(ready.visibility_of_element_located((By.ID, "error")))
        assert "weight" in browser.find_element(By.ID, "error").text
        browser.save_screenshot(str(tmp_path / "page.png"))
