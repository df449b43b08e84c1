"""The website in a real browser: two sections built on two backends, opened in headless Chromium.

Every page loads with no console error, no failed request and no request leaving the local server;
math is typeset by the site's own MathJax; each backend's tab switches (on every tab set of the page
at once) and shows that backend's plot; every image has alt text; every internal link and anchor
resolves. Needs Debian's Chromium (``apt-get install chromium``; another with ``D2LRNN_CHROMIUM``)
and the numpy and torch tox envs (made by the build if missing). ``tox -e docs-browser`` runs it.
"""

import functools
import http.server
import os
import pathlib
import subprocess
import sys
import threading
import urllib.parse

import pytest
from playwright.sync_api import sync_playwright

ROOT = pathlib.Path(__file__).resolve().parents[3]
SECTIONS = ("rnn", "rnn-scratch")  # math (rnn) and training plots (rnn-scratch)
BACKENDS = ("numpy", "torch")
CHROMIUM = os.environ.get("D2LRNN_CHROMIUM", "/usr/bin/chromium")
#: Playwright's wait for any one page action: a hang guard only (a page here loads in well under a
#: second on an idle 2-core machine), far above Playwright's 30 s default so a busy machine cannot
#: fail a check.
HANG_GUARD_MS = 180_000
WITHOUT_ALT = "els => els.filter(e => !e.alt.trim()).map(e => e.src)"
#: Where the test's site goes: kept between runs, so its executed notebooks are cached.
OUT = pathlib.Path(os.environ.get("D2LRNN_SITE_TEST_OUT", ROOT / ".tox" / "site-browser-test"))


@pytest.fixture(scope="module")
def site():
    """The site of SECTIONS on BACKENDS, built by the same command as the full site."""
    cmd = [sys.executable, str(ROOT / "docs/site/build.py"), "--sections", ",".join(SECTIONS),
           "--backends", ",".join(BACKENDS), "--out", str(OUT), "--create-envs"]
    subprocess.run(cmd, cwd=ROOT, check=True)
    return OUT


@pytest.fixture(scope="module")
def server(site):
    """A local HTTP server of the site on a free loopback port."""
    handler = functools.partial(Quiet, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_port}/"
    httpd.shutdown()


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def browser():
    if not pathlib.Path(CHROMIUM).exists():
        pytest.fail(f"no Chromium at {CHROMIUM}: apt-get install -y chromium (or set D2LRNN_CHROMIUM)")
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM)
        yield chromium
        chromium.close()


class Visit:
    """One page opened in a fresh tab, with what the browser reported while loading it."""

    def __init__(self, browser, url):
        self.page = browser.new_page(viewport={"width": 1280, "height": 900})
        self.page.set_default_timeout(HANG_GUARD_MS)
        self.errors, self.failed, self.foreign = [], [], []
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("requestfailed", lambda r: self.failed.append(r.url))
        self.page.on("response", lambda r: r.status >= 400 and self.failed.append(f"{r.status} {r.url}"))
        host = urllib.parse.urlsplit(url).netloc
        self.page.on("request", lambda r: urllib.parse.urlsplit(r.url).netloc not in (host, "")
                     and self.foreign.append(r.url))
        self.page.goto(url)
        self.page.wait_for_load_state("networkidle")


def _pages(site):
    return sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html") if ".build" not in p.parts)


def test_every_page_loads_cleanly_with_alt_texts_and_resolving_links(site, server, browser):
    pages = _pages(site)
    assert {f"chapters/{s}.html" for s in SECTIONS} | {"index.html", "api.html", "cli.html"} <= set(pages)
    for rel in pages:
        visit = Visit(browser, server + rel)
        assert not visit.errors, (rel, visit.errors)
        assert not visit.failed, (rel, visit.failed)
        assert not visit.foreign, (rel, visit.foreign)  # nothing is fetched from elsewhere
        no_alt = visit.page.eval_on_selector_all("img", WITHOUT_ALT)
        assert not no_alt, (rel, no_alt)
        hrefs = visit.page.eval_on_selector_all("a[href]", "els => els.map(e => e.href)")
        for href in hrefs:
            _check_link(site, server, visit.page.url, href)
        visit.page.close()


def _check_link(site, server, page_url, href):
    """An internal link names an existing file and, with a fragment, an element of that page."""
    if not href.startswith(server):
        assert urllib.parse.urlsplit(href).scheme in ("http", "https", "mailto"), (page_url, href)
        return  # an outside link: the site loads nothing from it, and the test has no network to try it
    parts = urllib.parse.urlsplit(href)
    path = site / urllib.parse.unquote(parts.path[1:])
    if path.is_dir():
        path = path / "index.html"
    assert path.is_file(), (page_url, href)
    if parts.fragment and path.suffix == ".html":
        ids = _ids(path)
        assert urllib.parse.unquote(parts.fragment) in ids, (page_url, href)


@functools.cache
def _ids(path):
    import html.parser

    class Ids(html.parser.HTMLParser):
        found = set()

        def handle_starttag(self, tag, attrs):
            self.found.update(v for k, v in attrs if k == "id")

    parser = Ids()
    parser.found = set()
    parser.feed(path.read_text())
    return frozenset(parser.found)


def test_math_is_typeset_by_the_sites_mathjax(server, browser):
    visit = Visit(browser, server + "chapters/rnn.html")
    page = visit.page
    page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise")
    page.evaluate("() => MathJax.startup.promise")
    typeset = page.locator("mjx-container")
    assert typeset.count() > 20  # the section's inline and display equations
    assert page.locator("mjx-container[display='true']").count() >= 4
    assert page.locator("mjx-merror").count() == 0  # no TeX error
    body = page.inner_text("article")
    assert "$$" not in body and "\\mathbf" not in body  # no TeX left as text
    # the glyphs come from the site's fonts
    assert page.evaluate("() => document.fonts.check('12px MJXTEX')") or page.evaluate(
        "() => Array.from(document.fonts).some(f => f.family.includes('MJX') && f.status === 'loaded')")
    assert not visit.errors and not visit.failed and not visit.foreign


def test_each_backend_tab_switches_every_tab_set_and_shows_its_plot(server, browser):
    visit = Visit(browser, server + "chapters/rnn-scratch.html")
    page = visit.page
    sets = page.locator(".sd-tab-set.backend-outputs")
    assert sets.count() > 5
    with_plot = page.locator(".sd-tab-set.backend-outputs:has(img.output-plot)")
    assert with_plot.count() >= 2  # the training runs' plots
    for backend in reversed(BACKENDS):  # the last first: the first is shown before any click
        with_plot.first.locator("label.sd-tab-label", has_text=backend).click()
        for i in range(sets.count()):  # every tab set of the page now shows this backend
            shown = sets.nth(i).locator(".sd-tab-content:visible")
            assert shown.count() == 1
            label = sets.nth(i).locator("input:checked + label")
            assert label.inner_text().strip() == backend
        for i in range(with_plot.count()):
            plot = with_plot.nth(i).locator(".sd-tab-content:visible img.output-plot").first
            plot.scroll_into_view_if_needed()
            assert plot.is_visible()
            assert f"-{backend}-cell" in plot.get_attribute("src")  # this backend's own plot
            assert backend in plot.get_attribute("alt")
            page.wait_for_function("img => img.complete && img.naturalWidth > 100", arg=plot.element_handle())
    path = OUT / "screenshot-rnn-scratch.png"
    with_plot.first.scroll_into_view_if_needed()
    page.screenshot(path=str(path))
    assert path.stat().st_size > 10_000
    assert not visit.errors and not visit.failed and not visit.foreign


def test_the_chosen_backend_is_kept_on_the_next_page(server, browser):
    visit = Visit(browser, server + "chapters/rnn-scratch.html")
    chosen = BACKENDS[-1]  # not the first, which a page shows by default
    visit.page.locator(".backend-outputs label.sd-tab-label", has_text=chosen).first.click()
    visit.page.goto(server + "chapters/rnn.html")
    visit.page.wait_for_load_state("networkidle")
    assert set(visit.page.locator(".backend-outputs input:checked + label").all_inner_texts()) == {chosen}


def test_search_finds_a_section(server, browser):
    visit = Visit(browser, server + "search.html?q=perplexity")
    visit.page.wait_for_selector("#search-results li")
    hits = visit.page.eval_on_selector_all("#search-results li a", "els => els.map(e => e.href)")
    assert any(h.split("?")[0].endswith(f"chapters/{s}.html") for s in SECTIONS for h in hits), hits
    assert not visit.errors and not visit.failed and not visit.foreign
