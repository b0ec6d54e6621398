"""The folder each vLLM engine gets for its IPC sockets and temporary files, without starting one (vLLM is imported
only when an engine starts): what the environment it starts with says. test_vllm_backend.py and test_vllm_serve.py
start engines and look in the folder."""

from __future__ import annotations

from pathlib import Path

from narrative_eval.backends.vllm_backend import SOCKETS_ENV, scratch_environment, scratch_folder
from tests import vllm_scratch


def test_each_engine_gets_a_new_folder_in_the_temporary_folder(tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    first, second = Path(scratch_folder()), Path(scratch_folder())
    assert first != second and first.parent == second.parent == tmp_path
    assert first.is_dir() and first.name.startswith(vllm_scratch.SCRATCH_PREFIX) and not any(first.iterdir())


def test_the_engine_starts_with_its_temporary_files_and_sockets_in_the_folder(monkeypatch):
    monkeypatch.delenv(SOCKETS_ENV, raising=False)
    assert scratch_environment("/tmp/x") == {"TMPDIR": "/tmp/x", SOCKETS_ENV: "/tmp/x"}


def test_a_socket_folder_the_user_names_is_left_alone(monkeypatch):
    monkeypatch.setenv(SOCKETS_ENV, "/run/mine")
    assert scratch_environment("/tmp/x") == {"TMPDIR": "/tmp/x"}
