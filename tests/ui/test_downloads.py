"""The app's download files (ui/downloads.py): written once per version, in a folder that goes with the app's process."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.waiting import PATIENCE_S

REPO = Path(__file__).resolve().parents[2]


def test_a_download_is_written_once_per_version_and_its_folder_goes_with_the_process():
    """The Runs tab's CSV and the Figures tab's LaTeX files are drawn again on every page load and filter change: each
    version is written once, into one folder per app process that is removed when the process exits."""
    script = textwrap.dedent("""
        from ui.downloads import download_file
        made = []

        def text():
            made.append(1)
            return "model,at_avg\\nsmollm2,0.3\\n"

        first = download_file("quickstart-runs.csv", "v1", text)
        again = download_file("quickstart-runs.csv", "v1", text)
        other = download_file("quickstart-runs.csv", "v2", text)
        assert first == again != other and first.parent.parent == other.parent.parent, (first, other)
        assert first.read_text() == "model,at_avg\\nsmollm2,0.3\\n" and len(made) == 2, made
        print(first.parent.parent)
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=PATIENCE_S)
    assert done.returncode == 0, done.stderr[-3000:]
    folder = Path(done.stdout.strip().splitlines()[-1])
    assert folder.name.startswith("narrative-eval-downloads-") and not folder.exists(), folder
