"""Page weight of built pages, as headless Chromium loads them: requests and bytes, first view.

    python docs/site/page_weight.py site chapters/rnn-scratch.html [more pages...]

Serves FOLDER on a loopback port, opens each page once in a fresh context (empty cache), and sums
the bodies of every response until the network is idle. Used for the builder comparison in
docs/site.md. Needs playwright and Debian's chromium (``D2LRNN_CHROMIUM`` for another).
"""

import functools
import http.server
import os
import sys
import threading

from playwright.sync_api import sync_playwright


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def weigh(folder, pages):
    """{page: (requests, bytes, requests to other hosts)} for each page of ``folder``."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=folder))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{httpd.server_port}/"
    results = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=os.environ.get("D2LRNN_CHROMIUM", "/usr/bin/chromium"))
        for page_path in pages:
            context = browser.new_context()
            page = context.new_page()
            sizes, foreign = [], []
            page.on("response", lambda r, sizes=sizes: sizes.append(len(r.body()) if r.ok else 0))
            page.on("request", lambda r, out=foreign: not r.url.startswith(base) and out.append(r.url))
            page.goto(base + page_path)
            page.wait_for_load_state("networkidle")
            results[page_path] = (len(sizes), sum(sizes), foreign)
            context.close()
        browser.close()
    httpd.shutdown()
    return results


if __name__ == "__main__":
    for path, (n, size, foreign) in weigh(sys.argv[1], sys.argv[2:]).items():
        print(f"{path}: {n} requests, {size / 1024:.0f} KiB, {len(foreign)} to other hosts {foreign[:3]}")
