#!/usr/bin/env bash
# The one prepared GPU check (run where a device is lent): the vLLM paths, in process and served, on one
# carrier video request. Needs `pip install -e '.[gpu]'` and a local Qwen-VL folder in $SENRI_GPU_MODEL.
#   SENRI_GPU_MODEL=/models/Qwen2.5-VL-7B-Instruct bash bench/gpu_check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
: "${SENRI_GPU_MODEL:?set SENRI_GPU_MODEL to a local Qwen-VL model folder}"
nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv
python -c "import vllm, senri.backends.vllm_video as v; print('vllm', vllm.__version__, 'senri loader plugin:', v.plugin_installed())"
python bench/gpu_check.py --model "$SENRI_GPU_MODEL"
# M3-Agent's memorizer (omni, with the clip's sound) and controller, when their weights are given (issue 62):
#   SENRI_M3_MEMORIZER=/models/M3-Agent-Memorization SENRI_M3_CONTROLLER=/models/M3-Agent-Control bash bench/gpu_check.sh
if [[ -n "${SENRI_M3_MEMORIZER:-}${SENRI_M3_CONTROLLER:-}" ]]; then
  python bench/gpu_check_m3_agent.py ${SENRI_M3_MEMORIZER:+--memorizer "$SENRI_M3_MEMORIZER"} \
    ${SENRI_M3_CONTROLLER:+--controller "$SENRI_M3_CONTROLLER"}
fi
