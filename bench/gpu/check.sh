#!/usr/bin/env bash
# GPU check: the platform's engines on one GPU machine with no network, in under 8 minutes.
#
#   bash bench/gpu/check.sh [MODEL_DIR [gptq-4bit|awq-4bit]]
#
# With no MODEL_DIR the check builds its own models from the embedded SmolLM2 GGUF ($GGUF names
# another GGUF file): dequantized to bf16, and 4-bit with whichever library is installed (GPTQ
# quantized on the GPU with gptqmodel, else bitsandbytes NF4). Then, each stage bounded in time and
# skipped with its reason when a library is missing:
#   1. the transformers backend, bf16 and 4-bit (throughput.py);
#   2. vLLM, only where installed: bench/batching.py, the same program as on CPU (platform vllm
#      backend in a sweep cell, bare LLM.chat, openai_compatible against vllm serve, and llama_cpp
#      where installed), or, without the sweep's dependencies, throughput.py's platform-vs-bare run;
#   3. two cells through the ray executor, where ray and vllm are installed and time is left.
# Knobs: PROMPTS (200), MAX_NEW_TOKENS (64), PYTHON, LOG_DIR, TOTAL_LIMIT (seconds, 450).
set -uo pipefail

MODEL_DIR="${1:-}"
QUANTIZATION="${2:-gptq-4bit}"
PROMPTS="${PROMPTS:-200}"
MAX_NEW_TOKENS="${MAX_NEW_TOKENS:-64}"
PYTHON="${PYTHON:-python}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
LOG_DIR="${LOG_DIR:-$(mktemp -d)}"
TOTAL_LIMIT="${TOTAL_LIMIT:-450}"
mkdir -p "$LOG_DIR" || { echo "error: cannot create LOG_DIR $LOG_DIR" >&2; exit 2; }

# No hub traffic: every weight and tokenizer file is local. The platform runs from the checkout.
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
export PYTHONPATH="$ROOT/platform:$ROOT${PYTHONPATH:+:$PYTHONPATH}"
cd "$ROOT" || exit 2

has() { "$PYTHON" -c "import importlib.util, sys; sys.exit(0 if all(importlib.util.find_spec(m) for m in sys.argv[1:]) else 1)" "$@"; }
say() { echo "$*" | tee -a "$LOG_DIR/summary.txt"; }
# Seconds a stage may take: its own cap, within what is left of the total budget (30 s kept for the end).
budget() { local left=$((TOTAL_LIMIT - SECONDS - 30)); (( left < $1 )) && echo "$left" || echo "$1"; }
stage() {  # stage NAME CAP COMMAND...: run with a time limit, log stderr, report failure without stopping
    local name="$1" cap; cap="$(budget "$2")"; shift 2
    if (( cap < 20 )); then say "skipped $name: the 8-minute budget is spent"; return 1; fi
    echo "== $name (limit ${cap} s)"
    timeout --kill-after=10 "$cap" "$@" 2>"$LOG_DIR/$name.err" | tee "$LOG_DIR/$name.out"
    local code=${PIPESTATUS[0]}
    if (( code != 0 )); then say "$name failed (exit $code); last lines of $LOG_DIR/$name.err:"; tail -n 15 "$LOG_DIR/$name.err"; fi
    return "$code"
}

has torch transformers yaml pydantic || { echo "error: the check needs torch, transformers, pyyaml and pydantic" >&2; exit 2; }
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
"$PYTHON" -c 'import torch, transformers; print(f"torch {torch.__version__} (cuda {torch.cuda.is_available()}), transformers {transformers.__version__}")'
if ! "$PYTHON" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' && [[ -z "${ALLOW_CPU:-}" ]]; then
    echo "error: torch sees no CUDA device (ALLOW_CPU=1 runs the check on CPUs anyway)" >&2; exit 2
fi
: > "$LOG_DIR/summary.txt"
status=0

# ---------------------------------------------------------------- models
if [[ -z "$MODEL_DIR" ]]; then
    has gguf || { echo "error: building the model from the GGUF needs the 'gguf' package; pass MODEL_DIR instead" >&2; exit 2; }
    stage prepare 150 "$PYTHON" "$HERE/prepare.py" "$LOG_DIR/models" || { echo "error: could not build the models (see above)" >&2; exit 2; }
    read -r BF16_DIR Q_DIR Q_LABEL < <("$PYTHON" -c 'import json,sys; r=json.loads(open(sys.argv[1]).read().splitlines()[-1]); print(r["bf16"], r["quantized"] or "-", r["label"] or "-")' "$LOG_DIR/prepare.out")
    "$PYTHON" -c 'import json,sys; [print(n) for n in json.loads(open(sys.argv[1]).read().splitlines()[-1])["notes"]]' "$LOG_DIR/prepare.out" | while read -r note; do say "$note"; done
else
    [[ -f "$MODEL_DIR/config.json" ]] || { echo "error: $MODEL_DIR has no config.json" >&2; exit 2; }
    if grep -q '"quant_method"' "$MODEL_DIR/config.json"; then BF16_DIR="-"; Q_DIR="$MODEL_DIR"; Q_LABEL="$QUANTIZATION"
    else BF16_DIR="$MODEL_DIR"; Q_DIR="-"; Q_LABEL="-"; say "skipped 4-bit: $MODEL_DIR is not a quantized checkpoint"; fi
fi
VLLM_MODEL="${BF16_DIR/#-/$Q_DIR}"

# ---------------------------------------------------------------- 1. transformers backend
if [[ "$BF16_DIR" != "-" ]]; then
    stage transformers-bf16 90 "$PYTHON" "$HERE/throughput.py" transformers "$BF16_DIR" --quantization none \
        --prompts "$PROMPTS" --max-new-tokens "$MAX_NEW_TOKENS" || status=1
fi
if [[ "$Q_DIR" != "-" ]]; then
    stage "transformers-$Q_LABEL" 90 "$PYTHON" "$HERE/throughput.py" transformers "$Q_DIR" --quantization "$Q_LABEL" \
        --prompts "$PROMPTS" --max-new-tokens "$MAX_NEW_TOKENS" || status=1
fi

# ---------------------------------------------------------------- 2. vLLM
if ! has vllm; then
    say "skipped vLLM: the vllm package is not installed (pip install 'narrative-eval[vllm]')"
elif has mlflow pandas openai; then
    stages="platform_vllm,bare_vllm,server_vllm"
    has llama_cpp && stages="llama_cpp,$stages" || say "skipped llama_cpp stage of batching.py: llama-cpp-python is not installed"
    # Eager engines: three engine starts must fit the budget; both sides of every ratio run eager.
    stage vllm-batching 300 "$PYTHON" "$ROOT/bench/batching.py" --weights "$VLLM_MODEL" --stages "$stages" \
        --prompts "$PROMPTS" --max-new-tokens "$MAX_NEW_TOKENS" --vllm-option enforce_eager=true \
        --vllm-option gpu_memory_utilization=0.5 || status=1
else
    say "bench/batching.py's sweep stages need mlflow, pandas and openai (not installed): platform backend vs bare vLLM on one engine instead"
    stage vllm-throughput 240 "$PYTHON" "$HERE/throughput.py" vllm "$VLLM_MODEL" --prompts "$PROMPTS" \
        --max-new-tokens "$MAX_NEW_TOKENS" || status=1
fi

# ---------------------------------------------------------------- 3. ray
if has ray vllm mlflow; then
    stage ray-cells 120 "$PYTHON" "$HERE/ray_cells.py" "$VLLM_MODEL" || status=1
else
    say "skipped ray cells: ray, vllm and mlflow are not all installed"
fi

echo "== summary (wall $SECONDS s, logs in $LOG_DIR)"
cat "$LOG_DIR/summary.txt"
cat "$LOG_DIR"/*.out 2>/dev/null | "$PYTHON" -c '
import json, sys
rate = {}
for line in sys.stdin:
    if line.startswith("{") and "tokens_per_s" in line:
        row = json.loads(line)
        rate[row["engine"]] = row["tokens_per_s"]
        engine, speed, tokens, seconds = row["engine"], row["tokens_per_s"], row["tokens"], row["seconds"]
        print(f"{engine:40s} {speed:10.1f} tok/s  ({tokens} tokens in {seconds:.1f} s)")  # no quotes inside f-strings before 3.12
    elif line.startswith("ratios:") or line[:14].strip() in ("llama_cpp", "platform_vllm", "bare_vllm", "server_vllm"):
        print(line.rstrip())
bare, ours = rate.get("bare vLLM (LLM.chat)"), rate.get("platform vllm backend")
if bare and ours:
    print(f"platform vllm / bare vLLM = {ours / bare:.2f} (same engine)")
'
exit "$status"
