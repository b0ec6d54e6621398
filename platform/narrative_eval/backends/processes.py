"""Engine processes: the child processes a backend starts when its model loads (vLLM's engine core, a server),
found then and stopped when the model is released, so none outlives its model or the process that loaded it.

Only children in this process's own session count: a job the app starts in a session of its own (a sweep
meant to outlive it) is never one. multiprocessing's helpers (its resource tracker, its fork server) serve the
whole process and end with it, so they are never stopped here.
"""

from __future__ import annotations

import multiprocessing.forkserver
import multiprocessing.resource_tracker
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import psutil

STOP_GRACE = 10.0
"""Seconds a process has to end after SIGTERM before it gets SIGKILL."""


def _helper_pids() -> set[int]:
    """multiprocessing's own helper processes started by this process (they stop when it exits)."""
    tracker = getattr(multiprocessing.resource_tracker, "_resource_tracker", None)
    server = getattr(multiprocessing.forkserver, "_forkserver", None)
    return {pid for pid in (getattr(tracker, "_pid", None), getattr(server, "_forkserver_pid", None)) if pid}


def _running(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def own_children() -> list[psutil.Process]:
    """This process's running children in its own session, multiprocessing's helpers left out."""
    session, helpers = os.getsid(0), _helper_pids()
    found = []
    for child in psutil.Process().children():
        try:
            if child.pid not in helpers and os.getsid(child.pid) == session and _running(child):
                found.append(child)
        except (ProcessLookupError, psutil.NoSuchProcess):
            continue
    return found


@contextmanager
def started_processes() -> Iterator[list[psutil.Process]]:
    """The children started while the block runs (filled when it ends); stopped if the block fails."""
    before = {child.pid for child in own_children()}
    started: list[psutil.Process] = []
    try:
        yield started
    except BaseException:
        stop_processes([child for child in own_children() if child.pid not in before])
        raise
    started.extend(child for child in own_children() if child.pid not in before)


def stop_processes(processes: Sequence[psutil.Process], grace: float = STOP_GRACE) -> None:
    """SIGTERM to each process still running and to its descendants, SIGKILL to what is left after `grace` s."""
    tree: list[psutil.Process] = []
    for process in processes:
        if not _running(process):
            continue
        try:
            tree += [process, *process.children(recursive=True)]
        except psutil.NoSuchProcess:
            continue
    for process in tree:
        try:
            process.terminate()
        except psutil.NoSuchProcess:
            continue
    _, alive = psutil.wait_procs(tree, timeout=grace)
    for process in alive:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            continue
    psutil.wait_procs(alive, timeout=grace)
