"""The HTML page of a large synthetic history (tests/test_html_page.py: 8 files x 8 cases x 20 runs):
its size, the time to write it and five loads in headless Chromium. Usage: python lab/html_page_size.py"""
import sys, time, tempfile
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from test_html_page import _large_history, CHROMIUM
from harness.api import Store
from harness.api import write_page
from playwright.sync_api import sync_playwright


def main() -> None:
    d = Path(tempfile.mkdtemp())
    _large_history(d / "r.db")
    t = time.perf_counter(); p = write_page(Store(d / "r.db"), d / "p.html"); t_render = time.perf_counter() - t
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        page = b.new_page()
        loads = []
        for _ in range(5):
            t = time.perf_counter(); page.goto(p.as_uri()); page.wait_for_load_state("load"); loads.append(time.perf_counter() - t)
        nav = page.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd")
    print(f"size {p.stat().st_size} bytes, written in {t_render:.2f} s, browser load {[round(x,3) for x in loads]} s, loadEventEnd {nav:.0f} ms")


if __name__ == "__main__":
    main()
