"""Files the app offers to download (the Runs tab's CSV, the Figures tab's LaTeX tables): each version written once,
into one folder per app process that is removed when the process exits. Gradio serves its own copy of a returned
file, so removing the folder loses nothing."""

from __future__ import annotations

import atexit
import hashlib
import shutil
import tempfile
from collections.abc import Callable
from functools import cache
from pathlib import Path

from narrative_eval.weights import write_once


@cache
def download_folder() -> Path:
    """This process's folder of downloads (created on first use, removed at exit)."""
    folder = Path(tempfile.mkdtemp(prefix="narrative-eval-downloads-"))
    atexit.register(shutil.rmtree, folder, True)
    return folder


def download_file(name: str, version: str, text: Callable[[], str]) -> Path:
    """download_folder()/<version>/<name>, its text made and written only the first time that version is asked for:
    a tab drawn again (every page load, every filter change) offers the same file."""

    def write(staging: Path) -> None:
        (staging / name).write_text(text(), encoding="utf-8")

    return write_once(download_folder() / version, name, write) / name


def content_version(text: str) -> str:
    """A short digest of a download's text, as its version."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]
