"""GPU check of the vLLM paths (run on a machine with a GPU, vLLM and a local Qwen-VL model folder).

One carrier video request (8 frames with source times) is answered three ways and compared:

1. in process: :class:`senri.backends.vllm.VLLMBackend` (``LLM.generate`` with senri's video metadata);
2. served: ``vllm serve`` started as a served batch starts it (:func:`senri.backends.vllm.server_command`,
   ``VLLM_VIDEO_LOADER_BACKEND=senri`` from :func:`senri.backends.vllm_video.server_env`), the request sent by
   :class:`senri.backends.served.ServedBackend` as a senri carrier;
3. served, the same MP4 as a plain ``video/mp4`` data URL (vLLM's own loader: frames 0…n−1), to show the
   difference the carrier makes.

It prints each reply, its prompt tokens and whether (1) and (2) agree, and exits 1 when they do not. Greedy
decoding; one GPU.

    python bench/gpu_check.py --model /models/Qwen2.5-VL-7B-Instruct
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def carrier_request():
    import numpy as np

    from senri.backends.base import ChatRequest, Message, VideoPart
    from senri.decode import carrier_from_jpegs, encode_jpeg

    frames = []
    for k in range(8):
        image = np.zeros((224, 320, 3), dtype=np.uint8)
        image[:, : 40 * (k + 1)] = (200, 30 * k, 240 - 30 * k)  # a bar that grows frame by frame
        frames.append(encode_jpeg(image, quality=90))
    part = VideoPart(carrier_from_jpegs(frames, fps=1.0), 1.0, tuple(float(60 + 7 * k) for k in range(8)))
    question = "The video shows a coloured bar. Does it grow or shrink, and at what time does it fill half the frame?"
    return ChatRequest((Message("user", (part, question)),), max_tokens=64, temperature=0.0), part


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="a local Qwen-VL model folder (nothing is downloaded)")
    parser.add_argument("--max-model-len", type=int, default=32768)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    config = {"name": "gpu_check_vlm", "backend": "vllm", "model": args.model, "max_model_len": args.max_model_len,
              "gpu_memory_utilization": 0.45, "video": True, "video_frames": 64, "max_images": 8}
    request, part = carrier_request()

    from senri.backends.vllm import VLLMBackend

    local = VLLMBackend(config)
    first = local.complete(request)
    print(f"in process : {first.prompt_tokens} prompt tokens: {first.text!r} {first.error or ''}")
    local.close()
    del local

    import secrets

    from senri.backends.base import ChatRequest, Message
    from senri.backends.served import SERVER_KEY_ENV, Endpoint, ServedBackend
    from senri.backends.server import ManagedServer
    from senri.backends.vllm import server_command
    from senri.backends.vllm_video import server_env

    key = secrets.token_urlsafe(16)
    env = {**os.environ, SERVER_KEY_ENV: key, "VLLM_API_KEY": key, **server_env(config)}
    os.environ[SERVER_KEY_ENV] = key
    server = ManagedServer(server_command(config, SERVER_KEY_ENV), health_path="/health", startup_timeout_s=900,
                           stop_grace_s=10.0, log_path=Path("gpu_check.server.log"), env=env, api_key=key)
    server.start()
    try:
        served = ServedBackend(config, Endpoint(server.url, config))
        second = served.complete(request)
        print(f"served     : {second.prompt_tokens} prompt tokens: {second.text!r} {second.error or ''}")
        plain = ChatRequest((Message("user", (part, request.messages[0].content[1])),), max_tokens=64,
                            temperature=0.0)
        body = served.request_body(plain)
        body["messages"][0]["content"][0]["video_url"]["url"] = part.data_url()  # vLLM's own loader
        import httpx

        reply = httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=600,
                           headers={"Authorization": f"Bearer {key}"}).json()
        text = reply.get("choices", [{}])[0].get("message", {}).get("content")
        print(f"plain MP4  : {reply.get('usage', {}).get('prompt_tokens')} prompt tokens: {text!r}")
    finally:
        server.stop()
    same = first.text == second.text and first.prompt_tokens == second.prompt_tokens
    print("in process = served:", same)
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
