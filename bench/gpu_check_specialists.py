"""GPU checks of the direct-perception specialists (shared/spec/direct_specialists.md §6: C-G1, L-G1, I-G1, V-G1), for a
node with the weights (and, for Cambrian-S, a checkout of the release) at hand. Never run in CI: each check builds its
model's pinned environment (network or a wheel folder needed once per node), loads the checkpoint in a release
worker and answers one synthetic question whose answer is plain (every frame red: "A. red").

    python bench/gpu_check_specialists.py --model internvideo3_8b --weights /models/InternVideo3-8B-Instruct
    python bench/gpu_check_specialists.py --model cambrian_s7b --weights /models/Cambrian-S-7B --checkout ~/src/cambrian-s
    python bench/gpu_check_specialists.py --model cambrian_s7b_lfp --weights /models/Cambrian-S-7B-LFP --checkout ~/src/cambrian-s
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from senri.backends.base import ChatRequest, FramesPart, Message  # noqa: E402
from senri.backends.worker import ReleaseWorkerBackend  # noqa: E402
from senri.methods.specialist import png  # noqa: E402
from senri.specialists import cambrian, internvideo3, lfp, videochat3  # noqa: E402

QUESTION, OPTIONS = "Which colour fills the video?", ["red", "green", "blue", "yellow"]


def red(height: int, width: int) -> np.ndarray:
    return np.zeros((height, width, 3), np.uint8) + np.array([220, 20, 20], np.uint8)


def request(name: str) -> tuple[ChatRequest, dict]:
    """A request as the method builds it for ``name``'s release, and what the check expects back."""
    from senri.prompts import prompt_set

    if name.startswith("cambrian"):
        text = prompt_set("cambrian_s")
        frame = png(cambrian.model_pixels(red(1080, 1920)))
        part = FramesPart(frames=(frame,) * 128, rate=1.0, indices=tuple(range(128)), source_wh=(1920, 1080))
        prompt = cambrian.chatml(text.render("system"), cambrian.videomme_text(text, QUESTION, OPTIONS))
        # C-G1's 36 tokens per 16:9 frame are not asserted here (the worker reports the text's tokens only)
        return ChatRequest(messages=(Message("user", (part, prompt)),), max_tokens=16), {"letter": "A"}
    if name.startswith("internvideo3"):
        text = prompt_set("internvideo3")
        h, w = internvideo3.frame_size(1024, 1080, 1920)
        part = FramesPart(frames=(png(red(h, w)),) * 1024, rate=30.0, indices=tuple(range(0, 1024 * 8, 8)))
        body = text.render("mcq", question=QUESTION, options="\n".join(cambrian.lettered(OPTIONS)))
        # I-G1: the grid for 1024 frames at 672×384 is [1024, 24, 42] (16-px patches), 512 stamps
        return ChatRequest(messages=(Message("user", (part, body)),), max_tokens=64), {
            "letter": "A", "grid": [1024, 24, 42]}
    text = prompt_set("videochat3")
    _, (h, w) = videochat3.frame_sizes([(1080, 1920)] * 2048, videochat3.PRESETS["lvbench"].total_pixels)
    part = FramesPart(frames=(png(red(h, w)),) * 2048, rate=0.227556, indices=tuple(range(2048)),
                      options=json.dumps({"placeholder_metadata": True, "sample_fps": 0.227556}))
    stem, choices = videochat3.split_lvbench(videochat3.lvbench_question(QUESTION, OPTIONS))
    body = text.render("lvbench", stem=stem, choices=choices)
    # V-G1: no missing keys, lm_head tied, video_grid_thw [2048, 18, 32] for 448×252 frames
    return ChatRequest(messages=(Message("user", ("", part, body)),), max_tokens=64, temperature=0.01, top_p=0.8,
                       top_k=20, repetition_penalty=1.0), {"letter": "A", "grid": [2048, 18, 32], "tied": True}


def lfp_stream_check(config: dict, frames: int = 600) -> list[str]:
    """L-G1: Cambrian-S-7B-LFP's streaming memory on the model (mode stream, the 10-min preset, ``frames`` red 16:9
    frames at 1 fps, squashed as L-I2): the plain question's letter, and the memory reused by a second question
    answers as a fresh worker that recomputes the memory for that question alone (L-M9)."""
    text = prompt_set_for("cambrian_s")
    preset = lfp.PRESETS[10]
    frame = png(cambrian.model_pixels(red(1080, 1920), squash=True))
    part = FramesPart(frames=(frame,) * frames, rate=1.0, indices=tuple(range(frames)), source_wh=(1920, 1080),
                      options=json.dumps({"lfp": {"window": preset.window, "method": preset.method,
                                                  "topk": preset.topk, "threshold": preset.threshold,
                                                  "budget": preset.budget, "ratio": preset.ratio}}, sort_keys=True))

    def ask(question: str, options: list[str]) -> ChatRequest:
        prompt = cambrian.chatml(text.render("system"), cambrian.lfp_text(text, question, options))
        return ChatRequest(messages=(Message("user", (part, prompt)),), max_tokens=16, repetition_penalty=1.1)

    first, second = ask(QUESTION, OPTIONS), ask("Which colour is absent?", ["red", "green", "blue", "yellow"])
    problems = []
    backend = ReleaseWorkerBackend(config)
    try:
        answers = [backend.complete(first), backend.complete(second)]
    finally:
        backend.close()
    fresh = ReleaseWorkerBackend(config)
    try:
        recomputed = fresh.complete(second)
    finally:
        fresh.close()
    print(json.dumps({"first": answers[0].text, "reused": answers[1].text, "recomputed": recomputed.text}))
    if cambrian.first_word_letter(answers[0].text or "", "ABCD") != "A":
        problems.append(f"L-G1: {answers[0].text!r} ({answers[0].error}) is not A")
    if answers[1].text != recomputed.text or answers[1].error or recomputed.error:
        problems.append(f"L-M9: reused memory answered {answers[1].text!r}, recomputed {recomputed.text!r}")
    return problems


def prompt_set_for(family: str):
    from senri.prompts import prompt_set

    return prompt_set(family)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True, choices=["cambrian_s7b", "cambrian_s7b_lfp", "internvideo3_8b",
                                                           "videochat3_4b"])
    parser.add_argument("--weights", required=True)
    parser.add_argument("--checkout", default=None)
    parser.add_argument("--pip-arg", action="append", default=[])
    parser.add_argument("--mode", choices=["stream", "standard"], default="stream",
                        help="cambrian_s7b_lfp: the streaming memory (L-G1, default) or Cambrian-S's path")
    args = parser.parse_args()
    config = yaml.safe_load((REPO / f"config/model/{args.model}.yaml").read_text())
    config.update(model=args.weights, release_checkout=args.checkout, pip_args=args.pip_arg or config.get("pip_args"))
    if args.model == "cambrian_s7b_lfp" and args.mode == "stream":
        problems = lfp_stream_check(config)
        print("\n".join(problems) or f"{args.model} (stream): OK")
        return 1 if problems else 0
    backend = ReleaseWorkerBackend(config)
    chat, want = request(args.model)
    try:
        response = backend.complete(chat)
        info = backend._worker.hello["info"] if backend._worker else {}
        print(json.dumps({"info": info, "reply": response.text, "error": response.error}, indent=1, default=str))
        reply = backend._worker.call(backend.wire_request(chat), 3600) if "grid" in want else {}
    finally:
        backend.close()
    problems = []
    reader = (cambrian.videomme_letter if args.model.startswith("cambrian") else
              internvideo3.parse_answer if args.model.startswith("internvideo3") else videochat3.lvbench_letter)
    letter = reader(response.text or "")
    if response.error or letter != want["letter"]:
        problems.append(f"answer: {response.text!r} read as {letter!r}, want {want['letter']} ({response.error})")
    grid = reply.get("video_grid_thw")
    if "grid" in want and (not grid or grid[0] != want["grid"]):
        problems.append(f"video_grid_thw {grid}, want {want['grid']}")
    if want.get("tied") and (info.get("missing_keys") or not info.get("lm_head_tied")):
        problems.append(f"missing keys {info.get('missing_keys')[:5]} / lm_head tied {info.get('lm_head_tied')}")
    print("\n".join(problems) or f"{args.model}: OK")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
