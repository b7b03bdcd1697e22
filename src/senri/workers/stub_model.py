"""A stand-in model for the release worker's tests and the CPU demo (standard library only).

It answers deterministically from what it was sent, so a test can check that requests arrive whole: the reply is
``"<L>."`` with L = "ABCD"[sha256(all text parts + every media file's bytes) mod 4] — a form every specialist's
parser reads as L (Cambrian-S's first capital, the LFP first word, InternVideo3's first character, VideoChat3's
"letter followed by a dot"). ``info()`` reports the interpreter and, with ``release_module``, the module imported
from the release checkout (proving the checkout is on the worker's path), with ``dependency`` the version of a
package installed from the environment's pins. Test hooks in the options: ``crash_on`` (a text whose presence
makes the process exit at once, code 7: a crashed worker), ``fail_on`` (raise: an adapter error),
``sleep_on`` / ``sleep_s`` (a slow request), ``record`` (a file each request's summary is appended to as a JSON
line: its texts, generation settings and per-frames-part count, sizes, rate, indices, source size and options).
"""

from __future__ import annotations

import hashlib
import importlib
import os
import struct
import sys
import time


def png_size(path: str) -> tuple[int, int] | None:
    """Width and height from a PNG's IHDR chunk (None for other formats)."""
    with open(path, "rb") as handle:
        head = handle.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n":
        return None
    return struct.unpack(">II", head[16:24])


class StubModel:
    def __init__(self, options: dict) -> None:
        self.options = options
        self.release = importlib.import_module(options["release_module"]) if options.get("release_module") else None
        self.dependency = None
        if options.get("dependency"):
            from importlib.metadata import version
            self.dependency = version(options["dependency"])

    def info(self) -> dict:
        return {"python": sys.executable, "release_file": getattr(self.release, "__file__", None),
                "release_value": getattr(self.release, "VALUE", None), "dependency_version": self.dependency}

    def generate(self, request: dict) -> dict:
        texts, files, frames, sizes = [], [], 0, set()
        for message in request["messages"]:
            for part in message["content"]:
                if isinstance(part, str):
                    texts.append(part)
                elif "image" in part:
                    files.append(part["image"])
                else:
                    paths = part["frames"]["paths"]
                    files += paths
                    frames += len(paths)
                    sizes.update(filter(None, (png_size(p) for p in paths)))
        text = "\n".join(texts)
        if self.options.get("record"):
            import json

            parts = [{k: v for k, v in part["frames"].items() if k != "paths"} | {"n": len(part["frames"]["paths"])}
                     for message in request["messages"] for part in message["content"]
                     if isinstance(part, dict) and "frames" in part]
            with open(self.options["record"], "a") as handle:
                handle.write(json.dumps({"roles": [m["role"] for m in request["messages"]], "texts": texts,
                                         "generation": request.get("generation"), "frames": parts,
                                         "frame_sizes": sorted(sizes)}) + "\n")
        if self.options.get("crash_on") and self.options["crash_on"] in text:
            os._exit(7)
        if self.options.get("fail_on") and self.options["fail_on"] in text:
            raise RuntimeError("stub adapter asked to fail")
        if self.options.get("sleep_on") and self.options["sleep_on"] in text:
            time.sleep(float(self.options.get("sleep_s", 5)))
        digest = hashlib.sha256(text.encode())
        for path in files:
            with open(path, "rb") as handle:
                digest.update(handle.read())
        letter = "ABCD"[int(digest.hexdigest(), 16) % 4]
        return {"text": f"{letter}.", "prompt_tokens": len(text.split()) + 36 * frames, "completion_tokens": 2,
                "finish_reason": "stop", "frames": frames, "frame_sizes": sorted(sizes),
                "generation": request.get("generation", {})}
