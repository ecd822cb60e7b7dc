#!/usr/bin/env python3
"""cockpit_check.py: arizukod's Cockpit page in headless Chromium (hack/systemtest/cockpit.sh).

Logs in to cockpit-ws with a real user and password, turns on administrative access in
Cockpit's top bar (sudo with the same password), opens /arizuko, and checks what the page
shows: the health line, the groups (--groups) as a tree, the runs (--runs ID=TOKENS)
with their tokens, the chart, the outbox backlog, a run's journal lines; then clicks Unpark
on the parked group (--parked) and Kill on the running run (--kill) and waits for the page
to show their effect. Saves screenshots in --shots (cockpit-*.png). Prints one line of what
it saw on stdout; on a failed check it saves cockpit-failed.png, prints why on stderr and
exits 1. Needs Debian's chromium, chromium-driver and python3-selenium.
"""

import argparse
import os
import sys
import time

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

FRAME = "iframe[name='cockpit1:localhost/arizuko']"


def act(drv, css, what):
    """Clicks the action button css selects until the page says it started the action
    ("WHAT…" or its outcome): a click that lands while the table is replaced is lost."""
    for _ in range(3):
        click(drv, css)
        try:
            WebDriverWait(drv, 5, ignored_exceptions=[StaleElementReferenceException]).until(
                lambda d: what in d.find_element(By.ID, "access").text)
            return
        except TimeoutException:
            pass
    raise AssertionError("clicking %s: the page never said %r" % (css, what))


def click(drv, css, tries=10):
    """Clicks the element css selects: the page re-renders its tables every few seconds, so
    an element found may be replaced before the click; find it again then."""
    for i in range(tries):
        try:
            drv.find_element(By.CSS_SELECTOR, css).click()
            return
        except StaleElementReferenceException:
            if i == tries - 1:
                raise
            time.sleep(0.2)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", required=True, help="cockpit-ws, like https://127.0.0.1:9090")
    ap.add_argument("--user", required=True)
    ap.add_argument("--password", required=True)
    ap.add_argument("--profile", required=True, help="Chromium's profile directory")
    ap.add_argument("--shots", required=True, help="directory for the screenshots")
    ap.add_argument("--groups", required=True, help="folders the tree must show, comma-separated")
    ap.add_argument("--runs", required=True, help="ID=TOKENS,... runs the table must show with their tokens")
    ap.add_argument("--parked", required=True, help="the parked group to unpark")
    ap.add_argument("--kill", required=True, help="the running run to kill")
    args = ap.parse_args()

    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    for a in ("--headless=new", "--no-sandbox", "--ignore-certificate-errors", "--window-size=1400,1200",
              "--user-data-dir=" + args.profile, "--disable-gpu", "--disable-dev-shm-usage"):
        opts.add_argument(a)
    drv = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
    drv.set_page_load_timeout(60)
    shot = lambda name: drv.save_screenshot(os.path.join(args.shots, "cockpit-" + name + ".png"))
    wait = WebDriverWait(drv, 30, ignored_exceptions=[StaleElementReferenceException])
    step = "start"
    try:
        step = "login"
        t0 = time.monotonic()
        drv.get(args.url + "/")
        wait.until(EC.visibility_of_element_located((By.ID, "login-user-input"))).send_keys(args.user)
        drv.find_element(By.ID, "login-password-input").send_keys(args.password)
        drv.find_element(By.ID, "login-button").click()
        wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "iframe")))
        login_s = time.monotonic() - t0

        # Cockpit starts a session with limited access; its top bar switches to
        # administrative access with the user's password (sudo), as a user does.
        step = "administrative access in the top bar"
        wait.until(EC.element_to_be_clickable((By.XPATH, "//button[contains(., 'Limited access')]"))).click()
        wait.until(EC.visibility_of_element_located((By.CSS_SELECTOR, "[role='dialog'] input[type='password']"))).send_keys(args.password)
        drv.find_element(By.XPATH, "//*[@role='dialog']//button[contains(., 'Authenticate')]").click()
        wait.until(EC.presence_of_element_located((By.XPATH, "//button[contains(., 'Administrative access')]")))

        step = "open /arizuko"
        drv.get(args.url + "/arizuko")
        wait.until(EC.frame_to_be_available_and_switch_to_it((By.CSS_SELECTOR, FRAME)))

        step = "health line"
        wait.until(lambda d: " ok " in " " + d.find_element(By.ID, "health").text.replace("·", " ") + " ")
        health = drv.find_element(By.ID, "health").text

        step = "administrative access"
        wait.until(lambda d: "administrative access" in d.find_element(By.ID, "access").text)

        step = "groups tree"
        for f in args.groups.split(","):
            wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "#groups li[data-folder='%s']" % f)))
            if "/" in f:
                parent = f.rsplit("/", 1)[0]
                drv.find_element(By.CSS_SELECTOR, "#groups li[data-folder='%s'] li[data-folder='%s']" % (parent, f))

        step = "runs with their tokens"
        for pair in args.runs.split(","):
            rid, tokens = pair.split("=")
            cell = "#runs tr[data-run='%s'] .tokens" % rid
            wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, cell)))
            text = drv.find_element(By.CSS_SELECTOR, cell).text
            want = "{:,}".format(int(tokens))
            if not text.startswith(want):
                raise AssertionError("run %s shows tokens %r, the API says %s" % (rid, text, want))

        step = "chart and outbox"
        wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "#chart rect.bar")))
        bars = len(drv.find_elements(By.CSS_SELECTOR, "#chart rect.bar"))
        backlog = drv.find_element(By.ID, "backlog").text
        if not backlog.replace(",", "").isdigit():
            raise AssertionError("outbox backlog shows %r" % backlog)

        step = "what it costs"
        wait.until(EC.presence_of_element_located((By.ID, "usage-total")))
        cost = drv.find_element(By.ID, "usage-total").text
        if "$" not in cost:
            raise AssertionError("this month's cost shows %r" % cost)

        step = "the parked group"
        parked = "#groups li[data-folder='%s'] > .group" % args.parked
        wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, parked + " .badge.parked")))
        wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "#runs tr[data-run='%s'][data-state='running'] button.kill" % args.kill)))
        drv.switch_to.default_content()
        shot("page")
        drv.switch_to.frame(drv.find_element(By.CSS_SELECTOR, FRAME))

        step = "a run's journal"
        first = args.runs.split(",")[0].split("=")[0]
        click(drv, "#runs tr[data-run='%s'] a.run-id" % first)
        wait.until(lambda d: d.find_element(By.ID, "journal").text.strip() != "")
        journal = drv.find_element(By.ID, "journal").text
        if "no journal entries" in journal or "journalctl:" in journal:
            raise AssertionError("the journal of run %s: %s" % (first, journal[:300]))
        journal_lines = len(journal.splitlines())
        wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "#log-panel .phases")))
        phases = drv.find_element(By.CSS_SELECTOR, "#log-panel .phases").text
        if " run " not in phases or "queue " not in phases:
            raise AssertionError("run %s's phases show %r" % (first, phases))
        drv.execute_script("document.getElementById('log-panel').scrollIntoView()")
        drv.switch_to.default_content()
        shot("log")
        drv.switch_to.frame(drv.find_element(By.CSS_SELECTOR, FRAME))
        drv.execute_script("window.scrollTo(0, 0)")

        step = "unpark"
        act(drv, parked + " button.unpark", "unpark " + args.parked)
        wait.until(lambda d: "unpark %s: done" % args.parked in d.find_element(By.ID, "access").text)

        step = "kill"
        act(drv, "#runs tr[data-run='%s'] button.kill" % args.kill, "kill " + args.kill)
        wait.until(lambda d: "kill %s: done" % args.kill in d.find_element(By.ID, "access").text)
        WebDriverWait(drv, 60, ignored_exceptions=[StaleElementReferenceException]).until(EC.presence_of_element_located((By.CSS_SELECTOR, "#runs tr[data-run='%s'][data-state='killed']" % args.kill)))
        drv.switch_to.default_content()
        shot("after-actions")
    except Exception as e:  # a failed check, a timeout, or the browser's own error
        try:
            drv.switch_to.default_content()
            shot("failed")
            with open(os.path.join(args.shots, "cockpit-failed.html"), "w") as f:
                f.write(drv.page_source)
                try:
                    drv.switch_to.frame(drv.find_element(By.CSS_SELECTOR, FRAME))
                    f.write("\n<!-- the page's frame -->\n" + drv.page_source)
                except Exception:
                    pass
        finally:
            drv.quit()
        print("cockpit_check: %s: %s: %s" % (step, type(e).__name__, str(e).strip()[:500] or "timed out"), file=sys.stderr)
        sys.exit(1)
    drv.quit()
    print("login %.1fs; %s; groups %s; runs' tokens match the API; this month %s; chart %d bars; backlog %s; journal %d lines; %s; unpark and kill done"
          % (login_s, health[:60], args.groups, cost, bars, backlog, journal_lines, phases))


if __name__ == "__main__":
    main()
