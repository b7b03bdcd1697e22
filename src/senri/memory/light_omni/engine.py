"""Light-Omni's model, senri side: the release's patched Qwen2.5-Omni runs in a release worker (its own pinned
environment built from ``envs/light_omni.txt``, the user's release checkout on its path, the adapter
``senri/workers/light_omni.py``), and :class:`WorkerOmniModel` speaks to it op by op. It implements the
memory's :class:`~senri.memory.light_omni.memory.MemoryModel` and the answer loop's
:class:`~senri.memory.light_omni.agent.OmniModel`.

Why a worker and not a port (docs/protocol.md "Light-Omni"): the patch (three LoRA adapters switched per call,
96 appended latents read at fixed offsets, hidden_to_emb, Qwen3-Embedding inside the thinker, visual-token
compression with uncompressed RoPE positions and a separate KV length) targets transformers 4.57's internals and
was never run here on a GPU; running the release's own code keeps every one of those details as released, and
the parts whose arithmetic is fixed (compression mask, latent read-out, query composition) are reimplemented
and tested in :mod:`senri.memory.light_omni.latent` on random tensors and the release cases.
"""

from __future__ import annotations

import threading
from typing import Any, Mapping, Sequence

import numpy as np

from senri.memory.light_omni.agent import Reaction, TurnRequest
from senri.memory.light_omni.memory import LogRequest


class LightOmniModelError(RuntimeError):
    """The worker failed a call (its message quotes the worker's error or log)."""


class WorkerOmniModel:
    """One Light-Omni model in a release worker; ``config`` is a ``release_worker`` model config whose adapter is
    ``light_omni:LightOmniAdapter``. Every call is counted in :attr:`calls` by op."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        from senri.backends.worker import ReleaseWorkerBackend

        self.backend = ReleaseWorkerBackend(dict(config))
        self.calls: dict[str, int] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        self.backend.close()

    def _call(self, op: str, fields: Mapping[str, Any]) -> dict[str, Any]:
        from senri.backends.worker import WorkerFailed

        backend = self.backend
        with self._lock:
            self.calls[op] = self.calls.get(op, 0) + 1
            try:
                if backend._worker is None or not backend._worker.alive():
                    backend._worker = backend._start()
                backend._next_id += 1
                reply = backend._worker.call({"id": backend._next_id, "op": op, "fields": dict(fields)},
                                             float(backend.config.get("request_timeout_s", 3600)))
            except WorkerFailed as exc:
                backend._worker = None
                raise LightOmniModelError(f"Light-Omni worker, op {op}: {exc}") from None
        if reply.get("error"):
            raise LightOmniModelError(f"Light-Omni worker, op {op}: {reply['error']}")
        return reply

    # MemoryModel
    def log(self, request: LogRequest) -> str:
        return str(self._call("log", {"start_time": request.start_time, "end_time": request.end_time,
                                      "own_images": list(request.images), "audio": request.audio,
                                      "text": request.text, "faces": request.faces,
                                      "short_term_memory": request.short_term_memory})["text"])

    def merge(self, memory_sequence: str) -> str:
        return str(self._call("merge", {"memory_sequence": memory_sequence})["text"])

    def update_profiles(self, current_profiles: str, memory_log_sequence: str) -> str:
        return str(self._call("profiles", {"current_profiles": current_profiles,
                                           "memory_sequence": memory_log_sequence})["text"])

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self._call("embed", {"texts": list(texts)})["vectors"], dtype=np.float32)

    # OmniModel
    @staticmethod
    def _turn(request: TurnRequest) -> dict[str, Any]:
        return {"start_time": request.start_time, "end_time": request.end_time, "images": list(request.images),
                "own_images": [], "audio": request.audio, "text": request.text, "faces": request.faces,
                "short_term_memory": request.short_term_memory, "retrieved_semantic": request.retrieved_semantic,
                "retrieved_episodic": request.retrieved_episodic}

    def react(self, request: TurnRequest) -> Reaction:
        reply = self._call("react", self._turn(request))
        vector = reply.get("query_vector")
        return Reaction(bool(reply.get("is_response")), bool(reply.get("is_retrieve")),
                        None if vector is None else np.asarray(vector, dtype=np.float32))

    def respond(self, request: TurnRequest) -> str:
        text = str(self._call("respond", self._turn(request))["text"])
        self._call("end_message", {})
        return text

    def end_message(self) -> None:
        """ag 474/481: the media and feature caches are cleared after every message."""
        self._call("end_message", {})
