"""The HTML leaderboard page (`--html`, harness/report/html_report.py), opened in headless Chromium through
Playwright with every request but the page itself blocked: what the page shows equals the database,
a submission's markup stays text, nothing is fetched, and a large history stays small and quick.
Skipped, with one line, where Playwright or Chromium is missing (.ci/run installs both)."""

import math
import shutil
import types
from pathlib import Path

import pytest
from conftest import ROOT, cli

from harness.results import CaseResult, SubmissionResult
from harness.report.store import Store
from harness.timing import Stats

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARTIFACTS = ROOT / "results" / "ci"   # screenshots, kept by CI (results/ is not committed)
MARKUP = "<script>window.__pwned = 1</script><b>bold</b><img src=x onerror=window.__pwned=2>"


@pytest.fixture(scope="module")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("no Playwright (pip install playwright): the page was not opened in a browser")
    if CHROMIUM is None:
        pytest.skip("no Chromium (apt-get install chromium): the page was not opened in a browser")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--no-first-run"])
        yield chromium
        chromium.close()


def open_page(browser, path: Path, width: int = 1280):
    """The page, every request other than its own file refused and recorded."""
    page = browser.new_page(viewport={"width": width, "height": 900})
    fetched: list[str] = []
    page.on("request", lambda request: fetched.append(request.url) if request.url != path.as_uri() else None)
    page.route("**/*", lambda route: route.continue_() if route.request.url == path.as_uri() else route.abort())
    page.goto(path.as_uri())
    return page, fetched


@pytest.mark.slow
def test_the_page_shows_what_the_database_holds(tmp_path, browser):
    """Two CPU leaderboard runs of two files (one fails with markup in its reason), a stored file whose
    name is markup; the page of the newest run, its history included."""
    failing = tmp_path / "raises_markup.py"
    failing.write_text(f"def custom_kernel(data):\n    raise RuntimeError({MARKUP!r})\n")
    for _ in range(2):
        cli(tmp_path, "--mode", "leaderboard", "--budget", "0.1", "--submission",
            str(ROOT / "submissions" / "torch_batched.py"), "--submission", str(failing))
    store = Store(tmp_path / "r.db")
    evil = SubmissionResult("submissions/evil.py", "e" * 64, ok=False, error=f"crashed: {MARKUP}",
                            display=f"{MARKUP}.py")  # (a file name holds no '/': the stored name can)
    store.add_submission(2, evil)
    page_path = tmp_path / "page.html"
    assert cli(tmp_path, "--mode", "history", "--html", str(page_path)) == 0

    page, fetched = open_page(browser, page_path)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "html_leaderboard.png"), full_page=True)
    rows = page.locator("#board tbody tr")
    shown = {rows.nth(i).locator("td").nth(1).inner_text(): [rows.nth(i).locator("td").nth(j).inner_text()
                                                               for j in range(4)] for i in range(rows.count())}
    stored = store._rows("SELECT name, ok, geomean_us FROM submissions WHERE run_id = 2")
    assert len(shown) == len(stored) == 3
    for row in stored:
        rank, name, status, geomean = shown[row["name"]]
        assert status == ("pass" if row["ok"] else "FAIL")
        if row["geomean_us"] is None:
            assert (rank, geomean) == ("-", "-")
        else:  # the CPU's timings are unverified: ranked apart
            assert (rank, geomean) == ("u1", f"{row['geomean_us']:,.1f}")
    cases = store._rows("""SELECT c.label, c.median_us FROM cases c JOIN submissions s ON s.id = c.submission_id
                           WHERE s.run_id = 2 AND s.name = 'torch_batched.py' AND c.kind = 'benchmark'""")
    text = rows.filter(has_text="torch_batched.py").inner_text()
    assert cases and all(f"{c['median_us']:,.1f}" in text for c in cases)
    assert page.locator("h3", has_text="torch_batched.py").count() == 1
    history = page.locator("table.history").first.locator("tbody tr")
    assert history.count() == 2  # both runs of the file

    assert f"{MARKUP}.py" in shown and MARKUP in page.locator("#board").inner_text()  # markup shown as text
    assert page.evaluate("window.__pwned") is None
    assert page.locator("#board b, #board img, #board script").count() == 0
    assert fetched == []

    page.locator("#board th", has_text="geomean µs").click()  # sorts by it: timed rows first, fastest first
    order = page.locator("#board tbody tr").evaluate_all("rows => rows.map(r => r.cells[3].getAttribute('data-v'))")
    assert order[0] != "" and order.count("") == 2
    page.locator("#filter").fill("torch")
    assert [r for r in page.locator("#board tbody tr:not(.hidden)").all_inner_texts()] == [
        t for t in rows.all_inner_texts() if "torch_batched.py" in t]
    phone, _ = open_page(browser, page_path, width=390)
    assert phone.evaluate("document.documentElement.scrollWidth") <= 390  # the tables scroll inside the page
    phone.screenshot(path=str(ARTIFACTS / "html_leaderboard_phone.png"))


def _large_history(path: Path) -> None:
    """8 files × 8 cases × 20 runs, written straight into a database."""
    store = Store(path)
    device = types.SimpleNamespace(name="NVIDIA H200", vendor="nvidia", arch="sm_90")
    store.save_bandwidth(device.name, 4.2e12)
    labels = [f"{b}×{k}k" for b in (4, 32, 64, 256) for k in (1, 8)]
    for run in range(20):
        run_id = store.start_run("leaderboard", "amd-mixed-mla", device, {}, "fenced (events)", sandboxed=True,
                                 check_policy="strict", cases="task")
        for f in range(8):
            cases = []
            for i, label in enumerate(labels):
                us = (10 + 5 * i) * (1 + 0.1 * f) * (1 + 0.01 * math.sin(run + f))
                stats = Stats(runs=50, median=us * 1e-6, mean=us * 1e-6, std=0, min=us * 1e-6, max=us * 1e-6,
                              ci_rel=0.01)
                cases.append(CaseResult("benchmark", i, label, True, "matches", device=stats, bytes=int(us * 3e6),
                                        args={"label": label}))
            result = SubmissionResult(f"submissions/file_{f}.py", f"{f:064d}", cases=cases, sandboxed=True,
                                      audit="verified: the parent's clock, fenced around each call")
            store.add_submission(run_id, result, lambda args: args["label"])
        store.finish_run(run_id)


def test_a_large_history_makes_a_small_quick_page(tmp_path, browser):
    _large_history(tmp_path / "r.db")
    page_path = tmp_path / "page.html"
    assert cli(tmp_path, "--mode", "history", "--html", str(page_path)) == 0
    assert page_path.stat().st_size < 1_000_000
    page, fetched = open_page(browser, page_path)
    page.wait_for_load_state("load")
    # the browser's own clock, from the navigation's start to the end of the load event (not the test's
    # tab and routing set-up around it)
    elapsed = page.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd") / 1e3
    assert 0 < elapsed < 1.0, f"the page took {elapsed:.2f} s to load"
    assert page.locator("#board tbody tr").count() == 8 and fetched == []
    assert [page.locator("#board tbody tr").nth(i).locator("td").first.inner_text() for i in range(8)] == [
        str(i) for i in range(1, 9)]  # verified: ranked 1..8
    assert page.locator("table.history").count() == 8
    assert page.locator("table.history").first.locator("tbody tr").count() == 20
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "html_leaderboard_history.png"))


def test_html_goes_with_timed_modes(tmp_path, capsys):
    assert cli(tmp_path, "--mode", "test", "--html", str(tmp_path / "p.html")) == 2
    assert "--html goes with" in capsys.readouterr().err
