"""What a vLLM engine leaves in a temporary folder: its IPC socket files and its rendezvous file.

The tests that start vLLM as a user would (a sweep command, `vllm serve`) give it a short temporary folder of its own
and no VLLM_RPC_BASE_PATH, then look in that folder while it runs and after it stops.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from narrative_eval.backends.vllm_backend import SCRATCH_PREFIX, SOCKETS_ENV


@contextlib.contextmanager
def short_temporary_folder() -> Iterator[Path]:
    """A new folder with a short path, removed after: a socket file's path may not pass 107 bytes, which a path
    under pytest's tmp_path can."""
    folder = Path(tempfile.mkdtemp(prefix="ne-tmp-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def user_environment(folder: Path, **extra: str) -> dict[str, str]:
    """This process's environment as a user's command would have it: `folder` as its temporary folder and no
    VLLM_RPC_BASE_PATH (tests/conftest.py sets one for the session)."""
    environment = {**os.environ, **extra, "TMPDIR": str(folder)}
    environment.pop(SOCKETS_ENV, None)
    return environment


def sockets_under(folder: Path) -> list[Path]:
    """The Unix socket files anywhere under `folder` (os.walk passes over a folder removed while it looks)."""
    found = []
    for parent, _, names in os.walk(folder):
        for name in names:
            with contextlib.suppress(FileNotFoundError):
                if stat.S_ISSOCK(os.lstat(os.path.join(parent, name)).st_mode):
                    found.append(Path(parent, name))
    return found


def socket_folders(folder: Path) -> set[str]:
    """The folders under `folder` holding socket files, relative to it ('.' for `folder` itself)."""
    return {str(path.parent.relative_to(folder)) for path in sockets_under(folder)}


def leftovers(folder: Path) -> list[str]:
    """What vLLM and the backend left under `folder`: socket files, engine folders, vLLM's rendezvous files."""
    names = {path.name for path in folder.rglob("*") if path.name.startswith((SCRATCH_PREFIX, "vllm_"))}
    return sorted(names | {str(path.relative_to(folder)) for path in sockets_under(folder)})
