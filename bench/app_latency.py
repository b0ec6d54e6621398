"""The app's latency as a user sees it, in headless Chromium at 1440 px: the first page load until the Runs table is
shown, a Runs column set ticked or unticked, a Runs study switch and a Compare study switch, each until the view shows
the result and no event is left running. Prints the median and the slowest of each, with the machine's load.

Targets: Runs and Compare react within 1.5 s, the first load within 3 s, on a 2-core machine.

It reads a store that holds an infilling sweep at L2 and a continuation sweep (by default the repo's own `mlflow.db` and
`reports/`, made by the quickstart sweep with `--limit 4` and examples/continuation/continuation.yaml with `--limit 2`;
`--store` names another folder holding `mlflow.db` and `reports/`, such as the browser tests' app store). `--app-dir` times another checkout's app on
the same store (an earlier commit, for a before-and-after on one machine).
Usage: python bench/app_latency.py [--repeats 5] [--app-dir DIR]
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "ui"))

from browser_helpers import CHROMIUM_ARGS, VIEWPORT, pick, settle  # noqa: E402

MARKERS = {"infilling": "L2", "continuation": "guided"}
"""A text each study's Runs table shows once its sweep is drawn (a prompt setting its sweeps ran)."""
LOADED = "() => !document.querySelector('#runs-table')?.innerText.includes('Loading runs')"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_app(app_dir: Path, store: Path) -> tuple[subprocess.Popen, str]:
    """The app of `app_dir` on the store of `store` (its mlflow.db, mlruns/ and reports/), once its page answers."""
    port = free_port()
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{store / 'mlflow.db'}",
           "PYTHONPATH": os.pathsep.join(str(app_dir / p) for p in ("platform", ".", "examples/continuation"))}
    process = subprocess.Popen(
        [sys.executable, "-m", "ui", "--port", str(port), "--reports-dir", str(store / "reports"), "--jobs-dir",
         str(store / ".cache" / "bench_jobs")], cwd=app_dir, env=env, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return process, url
        except OSError:
            if process.poll() is not None:
                raise SystemExit(f"the app of {app_dir} exited with status {process.returncode}")
            time.sleep(0.5)
    raise SystemExit("the app did not answer in 300 s")


def timed(action: Callable[[], None], done: Callable[[], None]) -> float:
    """Seconds from the action until `done` returns (it waits for what the user waits for)."""
    start = time.perf_counter()
    action()
    done()
    return time.perf_counter() - start


def runs_shows(page, study: str) -> Callable[[], None]:
    def done() -> None:
        page.wait_for_function(f"() => document.querySelector('#runs-table')?.innerText.includes({MARKERS[study]!r})")
        settle(page)
    return done


def measure(url: str, repeats: int, sweeps: dict[str, str], switches: bool = True) -> dict[str, list[float]]:
    from playwright.sync_api import sync_playwright

    figures: dict[str, list[float]] = {"first load": [], "Runs column set": [], "Runs study switch": [],
                                       "Compare study switch": []}
    chromium = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        for _ in range(repeats):
            context = browser.new_context(viewport=VIEWPORT)
            page = context.new_page()
            page.set_default_timeout(120_000)
            figures["first load"].append(timed(lambda: page.goto(url), lambda: (
                page.wait_for_function(LOADED), page.wait_for_function(
                    "() => document.querySelector('#runs-table table, #runs-table .empty') !== null"))))
            settle(page)
            for box in ("check", "uncheck"):
                first = page.locator("#runs-sets label").first
                before = page.locator("#runs-table th").count()
                figures["Runs column set"].append(timed(lambda: getattr(first, box)(), lambda: (
                    page.wait_for_function(f"() => document.querySelectorAll('#runs-table th').length !== {before}"),
                    settle(page))))
            if not switches:
                context.close()
                continue
            for study in ("continuation", "infilling"):
                figures["Runs study switch"].append(timed(lambda: pick(page, "runs-study", study),
                                                          runs_shows(page, study)))
            page.get_by_role("tab", name="Compare").click()
            settle(page)
            for study in ("continuation", "infilling"):
                expected = sweeps[study]
                figures["Compare study switch"].append(timed(lambda: pick(page, "compare-study", study), lambda: (
                    page.wait_for_function(
                        f"() => document.querySelector('#compare-sweep input')?.value === {expected!r} && "
                        "document.querySelector('#compare-view .run-card') !== null"), settle(page))))
            context.close()
        browser.close()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--app-dir", type=Path, default=REPO, help="the checkout whose app is timed (default: this one)")
    parser.add_argument("--store", type=Path, default=REPO, help="folder holding mlflow.db, mlruns/ and reports/")
    parser.add_argument("--infilling-sweep", default="quickstart")
    parser.add_argument("--continuation-sweep", default="continuation-demo")
    parser.add_argument("--no-switches", action="store_true",
                        help="only the first load and the column sets (a store without a continuation sweep)")
    args = parser.parse_args()
    process, url = start_app(args.app_dir.resolve(), args.store.resolve())
    try:
        figures = measure(url, args.repeats, {"infilling": args.infilling_sweep,
                                              "continuation": args.continuation_sweep}, not args.no_switches)
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=60)
    print(f"app: {args.app_dir.resolve()}  load average: {' '.join(f'{v:.2f}' for v in os.getloadavg())} "
          f"({os.cpu_count()} cores)")
    for name, seconds in figures.items():
        if not seconds:
            continue
        print(f"{name:22s} median {statistics.median(seconds):5.2f} s   slowest {max(seconds):5.2f} s   "
              f"(n={len(seconds)})")


if __name__ == "__main__":
    main()
