"""The release worker's entry point, run by the worker environment's interpreter (standard library only).

    <env>/bin/python worker_main.py --adapter module:Class --options '{"...": ...}'

Protocol (version 1), JSON lines over the process's standard input and a dedicated output pipe:

- The worker first writes ``{"ready": true, "protocol": 1, "python": ..., "info": {...}}`` once the adapter is
  loaded (the model in memory), or ``{"ready": false, "error": ...}`` and exits 3 when it cannot load.
- Each request line ``{"id": n, "op": "generate", "messages": [...], "generation": {...}}`` gets one reply line
  ``{"id": n, "text": ..., "prompt_tokens": .., "completion_tokens": .., "finish_reason": ..}``, or
  ``{"id": n, "error": "..."}`` when the adapter raised (the worker lives on).
- ``{"op": "shutdown"}`` (or the end of standard input) ends the worker.

Message parts are a string, ``{"image": path, "time_s": t}``, or ``{"frames": {"paths": [...], "rate": r,
"indices": [...], "times_s": [...], "fmt": "png"|"jpeg", "timeline": ..., "source_wh": [w, h] | null, "options": {...}}}``
(the source size before senri's resize, and per-video processing options); the files are written by senri
into a scratch folder before the request is sent. Anything libraries print goes to standard error (the
worker's log): file descriptor 1 is pointed at 2 at start, and replies go to the descriptor the original
standard output was duplicated to, so a stray ``print`` can never corrupt the protocol.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import traceback

PROTOCOL = 1


def load_adapter(spec: str, options: dict):
    module_name, _, attribute = spec.partition(":")
    if not attribute:
        raise ValueError(f"adapter {spec!r}: expected module:Class")
    return getattr(importlib.import_module(module_name), attribute)(options)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--adapter", required=True)
    parser.add_argument("--options", default="{}")
    args = parser.parse_args(argv)

    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def send(obj: dict) -> None:
        replies.write(json.dumps(obj) + "\n")
        replies.flush()

    try:
        adapter = load_adapter(args.adapter, json.loads(args.options))
        info = adapter.info() if hasattr(adapter, "info") else {}
    except BaseException as exc:  # the model could not load: say why, then exit
        traceback.print_exc()
        send({"ready": False, "error": f"{type(exc).__name__}: {exc}"})
        return 3
    send({"ready": True, "protocol": PROTOCOL, "python": sys.version, "executable": sys.executable, "info": info})

    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        if request.get("op") == "shutdown":
            break
        try:
            reply = dict(adapter.generate(request))
        except Exception as exc:
            traceback.print_exc()
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        reply["id"] = request.get("id")
        send(reply)
    return 0


if __name__ == "__main__":
    sys.exit(main())
