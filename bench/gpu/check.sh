#!/usr/bin/env bash
# GPU throughput check: one 4-bit GPTQ or AWQ model through the platform's transformers
# backend, the platform's vllm backend and bare vLLM, on the same 200 prompts.
#
#   bash bench/gpu/check.sh MODEL_DIR [gptq-4bit|awq-4bit]
#
# MODEL_DIR must already be on the machine (nothing is downloaded; see README.md). Target:
# platform vllm tokens/s >= 0.8 x bare vLLM; then two cells through the ray executor.
# Whole run bounded to under 8 minutes.
set -euo pipefail

MODEL_DIR="${1:?usage: bash bench/gpu/check.sh MODEL_DIR [gptq-4bit|awq-4bit]}"
QUANTIZATION="${2:-gptq-4bit}"
PROMPTS="${PROMPTS:-200}"
MAX_NEW_TOKENS="${MAX_NEW_TOKENS:-128}"
PYTHON="${PYTHON:-python}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
LOG_DIR="${LOG_DIR:-$(mktemp -d)}"
# Stage limits (seconds); together they stay under the 8-minute budget.
VLLM_LIMIT="${VLLM_LIMIT:-200}"
TRANSFORMERS_LIMIT="${TRANSFORMERS_LIMIT:-120}"
RAY_LIMIT="${RAY_LIMIT:-140}"

# No hub traffic: every weight and tokenizer file must be local.
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
export PYTHONPATH="$ROOT/platform${PYTHONPATH:+:$PYTHONPATH}"

if [[ ! -f "$MODEL_DIR/config.json" ]]; then
    echo "error: $MODEL_DIR has no config.json; place a 4-bit GPTQ/AWQ checkpoint directory there first" >&2
    exit 2
fi
if ! grep -q '"quant_method"' "$MODEL_DIR/config.json" && [[ ! -f "$MODEL_DIR/quantize_config.json" ]]; then
    echo "error: $MODEL_DIR is not a pre-quantized checkpoint (no quantization_config in config.json)" >&2
    exit 2
fi
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
"$PYTHON" - <<'PY'
import importlib.util, sys
missing = [m for m in ("torch", "vllm", "transformers", "yaml", "pydantic") if importlib.util.find_spec(m) is None]
if missing:
    sys.exit(f"error: missing Python packages {missing}; install the platform with its 'vllm' and 'quant' extras first")
import torch, vllm, transformers
if not torch.cuda.is_available():
    sys.exit("error: torch sees no CUDA device")
print(f"torch {torch.__version__}, vllm {vllm.__version__}, transformers {transformers.__version__}, {torch.cuda.get_device_name(0)}")
PY

started=$SECONDS
status=0
echo "== vLLM: bare LLM.chat and the platform backend on one engine ($PROMPTS prompts, $MAX_NEW_TOKENS new tokens)"
timeout --kill-after=10 "$VLLM_LIMIT" "$PYTHON" "$HERE/throughput.py" vllm "$MODEL_DIR" --quantization "$QUANTIZATION" \
    --prompts "$PROMPTS" --max-new-tokens "$MAX_NEW_TOKENS" 2>"$LOG_DIR/vllm.err" | tee "$LOG_DIR/vllm.jsonl" || {
    status=$?; echo "vLLM stage failed (exit $status); last lines of $LOG_DIR/vllm.err:"; tail -n 30 "$LOG_DIR/vllm.err"; }

echo "== transformers backend (same prompts and settings)"
timeout --kill-after=10 "$TRANSFORMERS_LIMIT" "$PYTHON" "$HERE/throughput.py" transformers "$MODEL_DIR" --quantization "$QUANTIZATION" \
    --prompts "$PROMPTS" --max-new-tokens "$MAX_NEW_TOKENS" 2>"$LOG_DIR/transformers.err" | tee "$LOG_DIR/transformers.jsonl" || {
    code=$?; [[ $status -eq 0 ]] && status=$code
    echo "transformers stage failed (exit $code); last lines of $LOG_DIR/transformers.err:"; tail -n 30 "$LOG_DIR/transformers.err"; }

echo "== two infilling cells through the ray executor (half a GPU each)"
timeout --kill-after=10 "$RAY_LIMIT" "$PYTHON" "$HERE/ray_cells.py" "$MODEL_DIR" --quantization "$QUANTIZATION" \
    2>"$LOG_DIR/ray.err" | tee "$LOG_DIR/ray.jsonl" || {
    code=$?; [[ $status -eq 0 ]] && status=$code
    echo "ray stage failed (exit $code); last lines of $LOG_DIR/ray.err:"; tail -n 30 "$LOG_DIR/ray.err"; }

echo "== summary (wall $((SECONDS - started)) s, logs in $LOG_DIR)"
cat "$LOG_DIR"/vllm.jsonl "$LOG_DIR"/transformers.jsonl 2>/dev/null | "$PYTHON" -c '
import json, sys
rows = {}
for line in sys.stdin:
    if line.startswith("{"):
        row = json.loads(line)
        rows[row["engine"]] = row
for name, row in rows.items():
    print(f"{name:32s} {row[\"tokens_per_s\"]:10.1f} tok/s  ({row[\"tokens\"]} tokens in {row[\"seconds\"]} s)")
bare, ours = rows.get("bare vLLM (LLM.chat)"), rows.get("platform vllm backend")
if bare and ours:
    ratio = ours["tokens_per_s"] / bare["tokens_per_s"]
    print(f"platform vllm / bare vLLM = {ratio:.2f} (target >= 0.80): {\"PASS\" if ratio >= 0.8 else \"FAIL\"}")
    sys.exit(0 if ratio >= 0.8 else 1)
sys.exit(1)
' || status=1
exit "$status"
