#!/usr/bin/env bash
# The prepared GPU checks (run where a device is lent; never in CI), each run when its variables are set:
# - the vLLM paths, in process and served, on one carrier video request: `pip install -e '.[gpu]'` and a local
#   Qwen-VL folder in $SENRI_GPU_MODEL;
# - Light-Omni's load-and-answer (the release's own model in its worker environment, envs/light_omni.txt): a git
#   checkout of Clare-Nie/Light-Omni in $SENRI_LIGHT_OMNI_CHECKOUT and the checkpoint in $SENRI_LIGHT_OMNI_MODEL.
#   SENRI_GPU_MODEL=/models/Qwen2.5-VL-7B-Instruct bash bench/gpu_check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -z "${SENRI_GPU_MODEL:-}" && -z "${SENRI_LIGHT_OMNI_CHECKOUT:-}" ]]; then
  echo "set SENRI_GPU_MODEL (a local Qwen-VL model folder) and/or SENRI_LIGHT_OMNI_CHECKOUT + SENRI_LIGHT_OMNI_MODEL" >&2
  exit 2
fi
nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv
if [[ -n "${SENRI_GPU_MODEL:-}" ]]; then
  python -c "import vllm, senri.backends.vllm_video as v; print('vllm', vllm.__version__, 'senri loader plugin:', v.plugin_installed())"
  python bench/gpu_check.py --model "$SENRI_GPU_MODEL"
fi
if [[ -n "${SENRI_LIGHT_OMNI_CHECKOUT:-}" ]]; then
  python bench/light_omni_gpu_check.py
fi
