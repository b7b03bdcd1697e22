"""The transformers backend on each device and dtype, side by side: the GPU code path, checked for real.

    python bench/transformers_device.py [--requests 8] [--images 8]

Builds the tests' tiny random LLaVA (CLIP + Llama, built here, nothing downloaded), then sends the same
requests — ``--images`` timestamped frames plus a question each — through the backend on the CPU in float32
and, where torch sees a GPU, on CUDA in float32 and bfloat16. Prints per-request latency, the ratio to the
CPU, and whether the greedy outputs equal the CPU's (float32 should; bfloat16 may differ in the last digits
of a random model's logits, so its outputs are reported, not required to match).
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "tests"))


def frames(count: int, seed: int) -> list[bytes]:
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        buffer = io.BytesIO()
        Image.fromarray(rng.integers(0, 255, (96, 128, 3), dtype=np.uint8)).save(buffer, format="JPEG")
        out.append(buffer.getvalue())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=8)
    parser.add_argument("--images", type=int, default=8)
    args = parser.parse_args()

    import torch

    from senri.backends.base import ChatRequest, ImagePart, Message
    from senri.backends.transformers import TransformersBackend
    from tiny_vlm import build_tiny_llava

    folder = build_tiny_llava(Path(tempfile.mkdtemp(prefix="tiny-vlm-")) / "tiny")
    requests = [
        ChatRequest(messages=(Message("user", (*(ImagePart(jpeg, float(t)) for t, jpeg in enumerate(frames(args.images, i))),
                                               "What do I hold? Answer with A, B, C or D.")),),
                    max_tokens=16, letter_logprobs=("A", "B", "C", "D"), purpose="bench")
        for i in range(args.requests)
    ]
    setups = [("cpu", "float32")]
    if torch.cuda.is_available():
        setups += [("cuda", "float32"), ("cuda", "bfloat16")]
        print(f"GPU: {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
    else:
        print(f"no GPU visible to torch {torch.__version__}: CPU only")
    baseline: dict = {}
    print("| device | dtype | s per request | × CPU | outputs equal CPU's | letter arg-max equal | errors |")
    print("|---|---|---|---|---|---|---|")
    for device, dtype in setups:
        backend = TransformersBackend({"backend": "transformers", "path": str(folder), "device": device, "dtype": dtype})
        backend.complete(requests[0])  # warm-up (kernels, allocator)
        if device == "cuda":
            torch.cuda.synchronize()
        started = time.perf_counter()
        responses = [backend.complete(r) for r in requests]
        if device == "cuda":
            torch.cuda.synchronize()
        per_request = (time.perf_counter() - started) / len(requests)
        texts = [r.text for r in responses]
        letters = [max(r.letter_logprobs, key=r.letter_logprobs.get) if r.letter_logprobs else None for r in responses]
        errors = sum(r.error is not None for r in responses)
        if not baseline:
            baseline = {"s": per_request, "texts": texts, "letters": letters}
        print(f"| {device} | {dtype} | {per_request:.4f} | {baseline['s'] / per_request:.2f} | "
              f"{sum(a == b for a, b in zip(texts, baseline['texts']))}/{len(texts)} | "
              f"{sum(a == b for a, b in zip(letters, baseline['letters']))}/{len(letters)} | {errors} |")
        if errors:
            print("  first error:", next(r.error for r in responses if r.error))
        backend.close()


if __name__ == "__main__":
    main()
