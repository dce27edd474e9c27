#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Drives the settings editor in headless Chromium (selenium, chromium-driver) against a running
settings-editor on a private bus, as EditorBrowserTests starts it.

Usage: editor_browser.py URL SETTINGSCTL BUS SCREENSHOT

URL is the first line settings-editor printed (with its one-time token), SETTINGSCTL the settingsctl to check
the store with, BUS the bus's address, SCREENSHOT where to save a picture of the page. The keys under
/test/editor/ are set up by the test. Each check prints "ok: NAME"; the first that fails raises, and the
script exits 1 with the reason. It waits for events with time limits, never with sleeps.
"""

import http.client
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.parse

from selenium import webdriver
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException, TimeoutException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

URL, SETTINGSCTL, BUS, SCREENSHOT = sys.argv[1:5]
parsed = urllib.parse.urlsplit(URL)
PORT = parsed.port
TOKEN = urllib.parse.parse_qs(parsed.query)["token"][0]
DIR = "/test/editor/"


def ok(name):
    print("ok: " + name, flush=True)


def ctl(*arguments, check=True):
    result = subprocess.run([SETTINGSCTL, *arguments, "--bus", BUS], capture_output=True, text=True, timeout=30)
    if check and result.returncode != 0:
        raise AssertionError(f"settingsctl {' '.join(arguments)}: {result.returncode} {result.stderr}")
    return result.stdout.strip()


def fetch(method, path, host=None, headers=None, body=None):
    connection = http.client.HTTPConnection("127.0.0.1", PORT, timeout=10)
    connection.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
    connection.putheader("Host", host or f"127.0.0.1:{PORT}")
    for name, value in (headers or {}).items():
        connection.putheader(name, value)
    data = body.encode() if body is not None else None
    if data is not None:
        connection.putheader("Content-Length", str(len(data)))
    connection.endheaders(data)
    response = connection.getresponse()
    text = response.read().decode(errors="replace")
    connection.close()
    return response.status, dict((k.lower(), v) for k, v in response.getheaders()), text


def expect(condition, message):
    if not condition:
        raise AssertionError(message)


def refused_without_naming_keys(status, text, what):
    expect(status == 403, f"{what}: status {status}")
    expect("/test/" not in text and "editor/" not in text, f"{what}: the refusal names a key: {text!r}")


# ---- Refusals before the browser has the cookie ----

for path in ["/", "/editor.js", "/api/dir?path=/test/editor/", "/api/key?key=/test/editor/theme",
             "/api/search?q=tab", "/api/events", "/api/history?path=/", "/api/export?dir=/"]:
    status, _, text = fetch("GET", path)
    refused_without_naming_keys(status, text, "without the cookie, GET " + path)
status, _, text = fetch("POST", "/api/apply", headers={"Content-Type": "application/json"},
                       body='{"sets":[{"key":"/test/editor/theme","text":"\'light\'"}],"resets":[]}')
refused_without_naming_keys(status, text, "without the cookie, POST /api/apply")
ok("no token: every page, data request and event stream is 403 and names no key")

status, _, text = fetch("GET", "/login?token=" + "0" * 64)
refused_without_naming_keys(status, text, "a wrong token")
status, _, text = fetch("GET", "/login?token=" + TOKEN, host=f"rebound.example:{PORT}")
refused_without_naming_keys(status, text, "the token with another Host")
status, _, text = fetch("GET", "/", host=f"rebound.example:{PORT}")
refused_without_naming_keys(status, text, "another Host")
ok("wrong Host: 403, and the token is not spent")

# ---- The browser ----

profile = tempfile.mkdtemp(prefix="editor-chromium-")
options = Options()
options.binary_location = "/usr/bin/chromium"
for argument in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1100,800", "--user-data-dir=" + profile, "--no-first-run",
                 "--disable-extensions", "--lang=en-US"]:
    options.add_argument(argument)
driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
driver.set_page_load_timeout(20)
wait = WebDriverWait(driver, 10)


def q(selector, root=None):
    return (root or driver).find_element(By.CSS_SELECTOR, selector)


def qs(selector, root=None):
    return (root or driver).find_elements(By.CSS_SELECTOR, selector)


def key(path):
    return q(f'#main [data-key="{path}"]')


def in_directory(path):
    """The selector of a key's block on its directory's page: a key page of the same key, still shown while the
    next page loads after a change of the address's fragment alone, does not match it."""
    return f'#main section.directory[data-dir="{path[:path.rindex("/") + 1]}"] [data-key="{path}"]'


def wait_for(condition, what, timeout=10):
    try:
        # An element the page has just rendered again is looked up again on the next try.
        return WebDriverWait(driver, timeout, poll_frequency=0.05,
                             ignored_exceptions=(StaleElementReferenceException, NoSuchElementException)
                             ).until(lambda _: condition())
    except TimeoutException:
        raise AssertionError("timed out waiting for " + what)


def button(root, name):
    for candidate in qs("button", root):
        if candidate.text.strip() == name or candidate.get_attribute("aria-label") == name:
            return candidate
    raise AssertionError(f"no button named {name}")


def click(element):
    """Clicks an element in the middle of the window, clear of the bar of pending changes at its top."""
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)
    element.click()


def error_of(path):
    return key(path).find_element(By.CSS_SELECTOR, ".error")


def redrawn_after(action):
    """Runs an action, then waits for the page to draw its main part again."""
    before = q("#main").get_attribute("data-renders")
    action()
    wait_for(lambda: q("#main").get_attribute("data-renders") != before, "the page to be drawn again")


def discard():
    redrawn_after(lambda: click(button(driver, "Discard")))
    expect(q("#pending").get_attribute("hidden") is not None, "the pending changes discarded")


def apply_pending():
    click(button(driver, "Apply"))


try:
    driver.get(URL)
    wait_for(lambda: qs('#tree [data-dir="/"]'), "the tree")
    expect(driver.current_url.rstrip("/").endswith(f":{PORT}") or "/login" not in driver.current_url,
           "the token URL redirects to the page: " + driver.current_url)
    cookies = driver.get_cookies()
    expect(len(cookies) == 1, f"one cookie: {cookies}")
    cookie = cookies[0]
    expect(cookie.get("httpOnly") is True and cookie.get("sameSite") == "Strict",
           f"the cookie is HttpOnly and SameSite=Strict: {cookie}")
    session = f"{cookie['name']}={cookie['value']}"
    status, _, text = fetch("GET", "/login?token=" + TOKEN)
    refused_without_naming_keys(status, text, "a second use of the token")
    ok("the token is exchanged for an HttpOnly, SameSite=Strict cookie with a redirect, and is good once")

    status, headers, _ = fetch("GET", "/", headers={"Cookie": session})
    expect(status == 200, f"with the cookie: {status}")
    csp = headers.get("content-security-policy", "")
    expect("default-src 'self'" in csp and "script-src 'self'" in csp and "unsafe-inline" not in csp, "CSP: " + csp)
    status, _, text = fetch("GET", "/api/dir?path=/test/editor/", host=f"rebound.example:{PORT}",
                           headers={"Cookie": session})
    refused_without_naming_keys(status, text, "the cookie with another Host")
    ok("Content-Security-Policy of 'self'; the cookie with another Host is still 403")

    csrf = q('meta[name="csrf-token"]').get_attribute("content")
    write = json.dumps({"ifSerial": None, "sets": [{"key": "/test/editor/theme", "text": "'light'"}], "resets": []})
    before = ctl("get", "/test/editor/theme")
    for origin, token, what in [("http://rebound.example", csrf, "another Origin"),
                                (None, csrf, "no Origin"),
                                (f"http://127.0.0.1:{PORT}", None, "no CSRF token"),
                                (f"http://127.0.0.1:{PORT}", "0" * 64, "a wrong CSRF token")]:
        headers = {"Cookie": session, "Content-Type": "application/json"}
        if origin:
            headers["Origin"] = origin
        if token:
            headers["X-CSRF-Token"] = token
        status, _, text = fetch("POST", "/api/apply", headers=headers, body=write)
        refused_without_naming_keys(status, text, "a write with " + what)
    expect(ctl("get", "/test/editor/theme") == before, "a refused write changed nothing")
    ok("cross-origin write: 403 without the page's Origin and CSRF token, nothing written")

    # ---- The tree, lazily, with key counts ----
    root = q('#tree [data-dir="/"]')
    wait_for(lambda: q(".count", root).text not in ("", "0"), "the root's key count")
    click(q(".toggle", root))
    test_dir = wait_for(lambda: qs('#tree [data-dir="/test/"]'), "/test/ in the tree")[0]
    expect(q(".count", test_dir).text == "9", "count of /test/: " + q(".count", test_dir).text)
    expect(not qs('#tree [data-dir="/test/editor/"]'), "the tree opens lazily")
    click(q(".toggle", test_dir))
    editor_dir = wait_for(lambda: qs('#tree [data-dir="/test/editor/"]'), "/test/editor/ in the tree")[0]
    click(q("a", editor_dir))
    wait_for(lambda: qs(in_directory("/test/editor/tab-width")), "the keys of /test/editor/")
    ok("the tree opens lazily with key counts, and a directory shows its keys")

    # ---- Editors by type, each labelled with its key ----
    tab = q('input[type="number"]', key("/test/editor/tab-width"))
    expect(tab.get_attribute("aria-label") == "/test/editor/tab-width", "the number field is labelled")
    expect(tab.get_attribute("min") == "1" and tab.get_attribute("max") == "16", "the number field is bounded")
    switch = q('input[role="switch"]', key("/test/editor/show-tabs"))
    expect(switch.get_attribute("type") == "checkbox" and switch.get_attribute("aria-label") == "/test/editor/show-tabs",
           "the boolean is a labelled switch")
    choice = q("select", key("/test/editor/theme"))
    expect([o.text for o in qs("option", choice)] == ["light", "dark", "high-contrast"], "the choices")
    expect(qs(".list-editor", key("/test/editor/recent-files")), "a list editor for as")
    expect(qs("textarea", key("/test/editor/window")), "GVariant text for (ii)")
    lock = key("/test/editor/locked")
    expect("locked" in lock.text or "🔒" in lock.text, "the lock badge")
    ok("an editor by type: switch, bounded number, choices, list, GVariant text; a lock badge")

    # ---- Secret hidden until Reveal ----
    expect("hunter2" not in driver.page_source, "a secret value is not in the page before Reveal")
    click(button(key("/test/editor/password"), "Reveal"))
    wait_for(lambda: "hunter2" in key("/test/editor/password").text
             or "hunter2" in (q("input", key("/test/editor/password")).get_attribute("value") or ""), "the revealed secret")
    ok("a secret value is hidden until Reveal")

    # ---- A refused write shows the broker's error by the editor, never clamped ----
    tab.clear()
    tab.send_keys("99")
    apply_pending()
    wait_for(lambda: "OutOfRange" in error_of("/test/editor/tab-width").text, "OutOfRange by the editor")
    expect(ctl("get", "/test/editor/tab-width") == "uint32 4", "the refused value was not written, nor clamped")
    discard()
    ok("a refused write shows OutOfRange next to the editor, and nothing is written")

    # ---- Pending changes go out as one Apply ----
    tab = q('input[type="number"]', key("/test/editor/tab-width"))
    tab.clear()
    tab.send_keys("8")
    click(q('input[role="switch"]', key("/test/editor/show-tabs")))
    from selenium.webdriver.support.select import Select
    Select(q("select", key("/test/editor/theme"))).select_by_visible_text("high-contrast")
    wait_for(lambda: "3 pending changes" in q("#pending-count").text, "three pending changes")
    expect(ctl("get", "/test/editor/tab-width") == "uint32 4", "pending changes wait for Apply")
    apply_pending()
    wait_for(lambda: q("#pending").get_attribute("hidden") is not None, "Apply to finish")
    expect(ctl("get", "/test/editor/tab-width") == "uint32 8", "tab-width applied")
    expect(ctl("get", "/test/editor/show-tabs") == "true", "show-tabs applied")
    expect(ctl("get", "/test/editor/theme") == "'high-contrast'", "theme applied")
    log = ctl("log", "--json", "--limit", "1", DIR)
    commit = json.loads(log)[-1]
    expect(len(commit["changes"]) == 3, f"one commit of three keys: {log}")
    ok("pending changes go out as one Apply")

    # ---- Live: a change by another process appears within a second ----
    wait_for(lambda: "'high-contrast'" in q(".value-text", key("/test/editor/theme")).text, "the page to settle")
    ctl("set", "/test/editor/theme", "'light'")
    started = time.monotonic()
    wait_for(lambda: q(".value-text", key("/test/editor/theme")).text == "'light'", "the live update", timeout=5)
    elapsed = time.monotonic() - started
    expect(elapsed < 1.0, f"the change appeared after {elapsed:.2f} s")
    expect(Select(q("select", key("/test/editor/theme"))).first_selected_option.text == "light", "the editor follows")
    ok(f"live: another process's change appears in {elapsed * 1000:.0f} ms, without a reload")

    # ---- A change made meanwhile elsewhere is shown, never overwritten ----
    size = q('input[type="number"]', key("/test/editor/font-size"))
    size.clear()
    size.send_keys("14")
    ctl("set", "/test/editor/font-size", "20")
    wait_for(lambda: "Changed elsewhere" in q(".note", key("/test/editor/font-size")).text, "the note of the change")
    apply_pending()
    wait_for(lambda: "Conflict" in error_of("/test/editor/font-size").text, "Conflict by the editor")
    expect(ctl("get", "/test/editor/font-size") == "20.0", "the other process's value stays")
    discard()
    ok("a change made elsewhere meanwhile is shown, and Apply is refused with Conflict instead of overwriting it")

    # ---- A locked key: NotWritable from the broker ----
    click(q('input[role="switch"]', key("/test/editor/locked")))
    apply_pending()
    wait_for(lambda: "NotWritable" in error_of("/test/editor/locked").text, "NotWritable by the editor")
    discard()
    ok("a locked key's write shows NotWritable")

    # ---- GVariant text with the parse error inline ----
    window = q("textarea", key("/test/editor/window"))
    window.clear()
    window.send_keys("(1, 'x')")
    wait_for(lambda: "InvalidValue" in error_of("/test/editor/window").text, "the parse error inline")
    window.clear()
    window.send_keys("(640, 480)")
    wait_for(lambda: error_of("/test/editor/window").text == "", "the parse error to go")
    discard()
    ok("GVariant text shows its parse error inline as it is typed")

    # ---- A key's page ----
    click(q("a.key-name", key("/test/editor/tab-width")))
    page = wait_for(lambda: qs("#main section.key-page"), "the key's page")[0]
    details = page.text
    for text in ["uint32 8", "uint32 4", "your value", "Spaces per tab", "How many columns", "u",
                 "uint32 1 … uint32 16"]:
        expect(text in details, f"the key page shows {text!r}: {details}")
    ok("a key's page: value, type, default, where it comes from, range, summary, description")

    # ---- The list editor for as ----
    driver.get(f"http://127.0.0.1:{PORT}/#/test/editor/recent-files")
    editor = wait_for(lambda: qs('#main [data-key="/test/editor/recent-files"] .list-editor'), "the list editor")[0]
    click(button(editor, "Add an item to /test/editor/recent-files"))
    q("input", editor).send_keys("notes.txt")
    click(button(editor, "Add an item to /test/editor/recent-files"))
    qs("input", editor)[1].send_keys("it's.md")
    apply_pending()
    wait_for(lambda: q("#pending").get_attribute("hidden") is not None, "Apply to finish")
    expect(ctl("get", "/test/editor/recent-files") == "['notes.txt', \"it's.md\"]",
           "the list: " + ctl("get", "/test/editor/recent-files"))
    ok("the list editor for as")

    # ---- Search over names, summaries and descriptions, as you type ----
    driver.get(f"http://127.0.0.1:{PORT}/#/test/editor/")
    wait_for(lambda: qs(in_directory("/test/editor/tab-width")), "the directory")
    search = q("#search")
    search.send_keys("columns")
    wait_for(lambda: [e.get_attribute("data-key") for e in qs("#main .result")] == ["/test/editor/tab-width"],
             "a search by description")
    search.send_keys(Keys.CONTROL, "a")
    search.send_keys("points")
    wait_for(lambda: [e.get_attribute("data-key") for e in qs("#main .result")] == ["/test/editor/font-size"],
             "a search by summary")
    search.send_keys(Keys.CONTROL, "a")
    search.send_keys("show-")
    wait_for(lambda: [e.get_attribute("data-key") for e in qs("#main .result")] == ["/test/editor/show-tabs"],
             "a search by name")
    ok("search over names, summaries and descriptions as you type")

    # ---- Modified only ----
    search.send_keys(Keys.CONTROL, "a")
    search.send_keys(Keys.BACKSPACE)
    modified = q("#modified")
    expect(modified.find_element(By.XPATH, "..").text.strip() == "Modified only", "the filter's name")
    click(modified)
    expected = ["/test/editor/font-size", "/test/editor/recent-files", "/test/editor/show-tabs",
                "/test/editor/tab-width", "/test/editor/theme", "/test/other/count"]
    wait_for(lambda: [e.get_attribute("data-key") for e in qs("#main .result")] == expected,
             "the modified keys: " + str([e.get_attribute("data-key") for e in qs("#main .result")]))
    click(modified)
    ok("Modified only lists the keys whose value differs from the default")

    # ---- Reset of a key, then History with Undo ----
    driver.get(f"http://127.0.0.1:{PORT}/#/test/editor/")
    wait_for(lambda: qs(in_directory("/test/editor/tab-width")), "the directory")
    click(button(key("/test/editor/tab-width"), "Reset"))
    apply_pending()
    wait_for(lambda: q("#pending").get_attribute("hidden") is not None, "Apply to finish")
    expect(ctl("get", "/test/editor/tab-width") == "uint32 4", "the reset key reads its default")
    wait_for(lambda: "'light'" in q(".value-text", key("/test/editor/theme")).text, "the page to settle")
    click(button(key("/test/editor/tab-width"), "History"))
    history = wait_for(lambda: qs("#panel .history-panel"), "the history")[0]
    commits = qs(".commit", history)
    expect(len(commits) == 2, f"the key's two commits: {history.text}")
    expect("uint32 8" in commits[1].text, "an entry shows its new value: " + commits[1].text)
    click(button(commits[1], "Undo"))  # the commit that set 8 cannot be undone: the reset came after it
    wait_for(lambda: "Conflict" in commits[1].text, "Undo refused with Conflict")
    click(button(commits[0], "Undo"))  # undo the reset
    wait_for(lambda: ctl("get", "/test/editor/tab-width") == "uint32 8", "Undo of the reset")
    ok("Reset of a key; History shows who changed what, old and new; Undo of a commit, refused when it would overwrite")

    # ---- Reset of a directory ----
    driver.get(f"http://127.0.0.1:{PORT}/#/test/other/")
    wait_for(lambda: qs(in_directory("/test/other/count")), "the directory /test/other/")
    click(button(q('#main section[data-dir="/test/other/"]'), "Reset"))
    wait_for(lambda: "reset /test/other/" in q("#pending-list").text, "the pending reset")
    apply_pending()
    wait_for(lambda: q("#pending").get_attribute("hidden") is not None, "Apply to finish")
    expect(ctl("get", "/test/other/count") == "0", "the directory was reset to its default")
    ok("Reset of a directory")

    # ---- Export in settingsctl dump's format ----
    driver.get(f"http://127.0.0.1:{PORT}/#/test/editor/")
    wait_for(lambda: qs(in_directory("/test/editor/tab-width")), "the directory")
    click(button(q('#main section[data-dir="/test/editor/"]'), "Export"))
    exported = wait_for(lambda: qs("#export"), "the export")[0]
    dump = subprocess.run([SETTINGSCTL, "dump", "--bus", BUS, DIR], capture_output=True, text=True).stdout
    expect(exported.get_attribute("textContent") == dump, "the export is settingsctl dump's text")
    ok("Export in settingsctl dump's format")

    # ---- Keyboard alone ----
    driver.get(f"http://127.0.0.1:{PORT}/#/test/editor/")
    wait_for(lambda: qs(in_directory("/test/editor/show-tabs")), "the directory")
    q("body").send_keys("/")
    expect(driver.switch_to.active_element.get_attribute("id") == "search", "/ focuses the search")
    switch = q('input[role="switch"]', key("/test/editor/show-tabs"))
    driver.execute_script("arguments[0].focus()", switch)
    switch.send_keys(Keys.SPACE)
    wait_for(lambda: "1 pending change" in q("#pending-count").text, "a change made with the keyboard")
    for _ in range(60):
        active = driver.switch_to.active_element
        if active.text.strip() == "Apply":
            break
        active.send_keys(Keys.SHIFT, Keys.TAB)
    expect(driver.switch_to.active_element.text.strip() == "Apply", "Apply is reached with the keyboard")
    driver.switch_to.active_element.send_keys(Keys.ENTER)
    wait_for(lambda: ctl("get", "/test/editor/show-tabs") == "false", "Apply pressed with the keyboard")
    ok("usable with the keyboard alone: search, a switch, Apply")

    # ---- 400 px wide ----
    driver.set_window_size(400, 900)
    width = driver.execute_script("return window.innerWidth")
    for address, shown in [("/#/test/editor/", in_directory("/test/editor/tab-width")),
                           ("/#/test/editor/tab-width", '#main section.key-page[data-key="/test/editor/tab-width"]')]:
        driver.get(f"http://127.0.0.1:{PORT}{address}")
        wait_for(lambda: qs(shown), "the page at 400 px")
        overflow = driver.execute_script("return document.documentElement.scrollWidth")
        expect(overflow <= width, f"{address} fits {width} px: {overflow} px wide")
    ok("fine at 400 px wide: nothing wider than the window")

    # ---- The screenshot ----
    driver.set_window_size(1100, 760)
    driver.get(f"http://127.0.0.1:{PORT}/#/test/editor/")
    wait_for(lambda: qs(in_directory("/test/editor/tab-width")), "the directory")
    size = q('input[type="number"]', key("/test/editor/font-size"))
    size.clear()
    size.send_keys("13")
    wait_for(lambda: "1 pending change" in q("#pending-count").text, "a pending change for the picture")
    driver.execute_script("window.scrollTo(0, 0)")
    driver.save_screenshot(SCREENSHOT)
    ok("screenshot saved")
finally:
    driver.quit()
