#!/usr/bin/env bash
# The prepared GPU checks (run where a device is lent; never in CI), each run when its variables are set:
# - the vLLM paths, in process and served, on one carrier video request: `pip install -e '.[gpu]'` and a local
#   Qwen-VL folder in $SENRI_GPU_MODEL;
# - the direct specialists' load-and-answer checks in their own environments (below);
# - Light-Omni's load-and-answer (the release's own model in its worker environment, envs/light_omni.txt): a git
#   checkout of Clare-Nie/Light-Omni in $SENRI_LIGHT_OMNI_CHECKOUT and the checkpoint in $SENRI_LIGHT_OMNI_MODEL.
#   SENRI_GPU_MODEL=/models/Qwen2.5-VL-7B-Instruct bash bench/gpu_check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv
ran=0
if [[ -n "${SENRI_GPU_MODEL:-}" ]]; then
  python -c "import vllm, senri.backends.vllm_video as v; print('vllm', vllm.__version__, 'senri loader plugin:', v.plugin_installed())"
  python bench/gpu_check.py --model "$SENRI_GPU_MODEL"; ran=1
fi
# The direct-perception specialists (issue 61; spec direct_specialists.md §6): each check builds its model's pinned
# environment once per node, loads the weights in a release worker and answers one plain question (C-G1, I-G1, V-G1;
# L-G1: the LFP streaming memory on 600 frames, and a second question on the reused memory answering as a fresh
# worker recomputing it). Set the folders of the weights you have (and Cambrian-S's checkout):
#   SENRI_CAMBRIAN_S_MODEL=/models/Cambrian-S-7B SENRI_CAMBRIAN_S_CHECKOUT=~/src/cambrian-s \
#   SENRI_CAMBRIAN_S_LFP_MODEL=/models/Cambrian-S-7B-LFP \
#   SENRI_INTERNVIDEO3_MODEL=/models/InternVideo3-8B-Instruct SENRI_VIDEOCHAT3_MODEL=/models/VideoChat3-4B bash bench/gpu_check.sh
if [[ -n "${SENRI_CAMBRIAN_S_MODEL:-}" ]]; then
  python bench/gpu_check_specialists.py --model cambrian_s7b --weights "$SENRI_CAMBRIAN_S_MODEL" \
    --checkout "${SENRI_CAMBRIAN_S_CHECKOUT:?set SENRI_CAMBRIAN_S_CHECKOUT to a checkout of cambrian-mllm/cambrian-s}"; ran=1
fi
if [[ -n "${SENRI_CAMBRIAN_S_LFP_MODEL:-}" ]]; then
  python bench/gpu_check_specialists.py --model cambrian_s7b_lfp --weights "$SENRI_CAMBRIAN_S_LFP_MODEL" --mode stream \
    --checkout "${SENRI_CAMBRIAN_S_CHECKOUT:?set SENRI_CAMBRIAN_S_CHECKOUT to a checkout of cambrian-mllm/cambrian-s}"; ran=1
fi
if [[ -n "${SENRI_INTERNVIDEO3_MODEL:-}" ]]; then
  python bench/gpu_check_specialists.py --model internvideo3_8b --weights "$SENRI_INTERNVIDEO3_MODEL"; ran=1
fi
if [[ -n "${SENRI_VIDEOCHAT3_MODEL:-}" ]]; then
  python bench/gpu_check_specialists.py --model videochat3_4b --weights "$SENRI_VIDEOCHAT3_MODEL"; ran=1
fi
if [[ -n "${SENRI_LIGHT_OMNI_CHECKOUT:-}" ]]; then
  python bench/light_omni_gpu_check.py; ran=1
fi
# M3-Agent's memorizer (omni, with the clip's sound) and controller, when their weights are given (issue 62):
#   SENRI_M3_MEMORIZER=/models/M3-Agent-Memorization SENRI_M3_CONTROLLER=/models/M3-Agent-Control bash bench/gpu_check.sh
if [[ -n "${SENRI_M3_MEMORIZER:-}${SENRI_M3_CONTROLLER:-}" ]]; then
  python bench/gpu_check_m3_agent.py ${SENRI_M3_MEMORIZER:+--memorizer "$SENRI_M3_MEMORIZER"} \
    ${SENRI_M3_CONTROLLER:+--controller "$SENRI_M3_CONTROLLER"}
  ran=1
fi
if [[ "$ran" == 0 ]]; then
  echo "set SENRI_GPU_MODEL (a local Qwen-VL folder), the specialists' SENRI_*_MODEL folders," \
       "SENRI_LIGHT_OMNI_CHECKOUT + SENRI_LIGHT_OMNI_MODEL and/or SENRI_M3_*" >&2; exit 2
fi
