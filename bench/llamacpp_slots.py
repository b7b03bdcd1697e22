"""Does a controller keep its cached prompt prefix when other roles' calls come between its rounds (llama.cpp)?

A memory workflow alternates its controller, whose prompt grows round by round from one prefix, with calls of
other roles whose prompts share nothing with it (WorldMM's fact filter and ranking, MAGIC-Video's time
extractor). Issue 34 asked to serve those roles from separate llama.cpp slots so the controller's prefix stays
cached. This bench measures it on the reading model (config/model/qwen15_coder.yaml), side by side in one run:

- ``one slot``: senri's setting — one slot, ``slot_prompt_similarity`` 0.9, llama.cpp's RAM prompt cache (a
  displaced prompt is saved there and loaded back when a request shares most of it);
- ``role slots, unified KV``: slot 0 for the controller (``id_slot``), slot 1 for the rest, one KV buffer;
- ``role slots, split KV``: the same with the context split between the slots.

Five controller rounds, each followed by four unrelated calls of about the same length; greedy, 8 tokens out.
Prints each arm's total and per-controller-call seconds and whether the replies agree with the first arm's.

    python bench/llamacpp_slots.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from senri.backends.base import ChatRequest, Message  # noqa: E402
from senri.backends.llamacpp import request_body, server_params, verified_model_file  # noqa: E402
from senri.config import compose  # noqa: E402

WORDS = "kitchen hallway stairs door shelf mug kettle window street shop counter bag ticket train platform".split()


def words(seed: int, n: int) -> str:
    return " ".join(WORDS[(seed * 7 + i * 3) % len(WORDS)] for i in range(n))


def run(config: dict, arm: str) -> tuple[float, list[float], list[str]]:
    import json

    import xllamacpp

    path, _ = verified_model_file(config)
    params = server_params(config, path)
    if arm != "one slot":
        params.n_parallel = 2
        params.kv_unified = arm == "role slots, unified KV"
    server = xllamacpp.Server(params)

    def send(request: ChatRequest, slot: int | None) -> str:
        body = request_body(config, request)
        if slot is not None and arm != "one slot":
            body["id_slot"] = slot
        reply = server.handle_chat_completions(body)
        reply = json.loads(reply) if isinstance(reply, str) else reply
        return reply["choices"][0]["message"]["content"]

    started, controller_s, replies = time.perf_counter(), [], []
    history = words(1, 1400)
    for round_no in range(5):
        history += " " + words(round_no + 10, 150)
        controller = ChatRequest((Message.text("system", "You control a search."),
                                  Message.text("user", history + "\nDecide: search or answer? Reply JSON.")),
                                 max_tokens=8, purpose="control")
        t = time.perf_counter()
        replies.append(send(controller, 0))
        controller_s.append(time.perf_counter() - t)
        for k in range(4):
            other = ChatRequest((Message.text("user", words(100 + round_no * 5 + k, 700) + "\nWhich facts matter?"),),
                                max_tokens=8, purpose="worldmm:fact_filter")
            replies.append(send(other, 1))
    del server
    return time.perf_counter() - started, controller_s, replies


def main() -> None:
    config = dict(compose("model=[qwen15_coder] method=[blind]")["model"]["qwen15_coder"])
    arms = ("one slot", "role slots, unified KV", "role slots, split KV")
    results = {arm: run(config, arm) for arm in arms}
    first = results[arms[0]][2]
    print("| arm | total s | controller call s (rounds 1–5) | replies equal to one slot's |")
    print("|---|---|---|---|")
    for arm, (total, controller_s, replies) in results.items():
        same = sum(a == b for a, b in zip(first, replies))
        print(f"| {arm} | {total:.1f} | {', '.join(f'{s:.1f}' for s in controller_s)} | {same} / {len(first)} |")


if __name__ == "__main__":
    main()
