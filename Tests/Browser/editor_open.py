#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A stand-in for xdg-open that opens what settings-editor hands it in headless Chromium, for EditorTests.

Usage: editor_open.py URL   (as xdg-open URL; EditorTests puts an xdg-open that runs it first in PATH)

Prints "opened: PID URL" (its own pid), opens URL in headless Chromium (selenium, chromium-driver) and waits for the editor's
tree, then prints "logged in: PID at ADDRESS" and holds the browser open until SIGTERM, so that the test can
look at every process meanwhile; then it closes the browser and prints "closed". Its standard output is
settings-editor's (xdg-open's is), which the test reads. On failure it prints "failed: REASON".
"""

import os
import signal
import sys
import tempfile

from selenium import webdriver
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException, TimeoutException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait


def say(line):
    print(line, flush=True)


def stop(_number, _frame):
    raise SystemExit(0)


signal.signal(signal.SIGTERM, stop)
URL = sys.argv[1] if len(sys.argv) == 2 else ""
say(f"opened: {os.getpid()} " + " ".join(sys.argv[1:]))

profile = tempfile.mkdtemp(prefix="editor-open-chromium-")
options = Options()
options.binary_location = "/usr/bin/chromium"
for argument in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--user-data-dir=" + profile, "--no-first-run", "--disable-extensions", "--lang=en-US"]:
    options.add_argument(argument)
driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
driver.set_page_load_timeout(20)
try:
    try:
        driver.get(URL)
        WebDriverWait(driver, 20, poll_frequency=0.05,
                      ignored_exceptions=(StaleElementReferenceException, NoSuchElementException)
                      ).until(lambda _: driver.find_elements(By.CSS_SELECTOR, '#tree [data-dir="/"]'))
        say(f"logged in: {os.getpid()} at {driver.current_url}")
    except TimeoutException:
        say(f"failed: the editor's tree did not show; at {driver.current_url}: "
            + driver.find_element(By.TAG_NAME, "body").text[:300].replace("\n", " "))
    except Exception as error:  # noqa: BLE001 — any failure is reported to the test, which judges it
        say(f"failed: {error!r}".replace("\n", " "))
    # Held open until the test sends SIGTERM.
    while True:
        signal.pause()
finally:
    driver.quit()
    say("closed")
