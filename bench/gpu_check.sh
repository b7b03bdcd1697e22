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
