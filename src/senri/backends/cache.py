"""A durable response cache: every finished model call is on disk the moment it completes.

Long runs die (preemption, OOM, a wall-clock limit). A call's response is committed to SQLite (WAL mode,
one transaction per response) as soon as the backend returns it, so a job killed at any instant and
started again re-issues only the calls that had not finished, and — because a cached response carries the
text, token counts and latency recorded when it was made — writes byte-identical predictions.

The key is a sha256 over the backend's identity (kind, model, the weights' hash where known) and the
request's canonical payload (messages with image/video content hashes, sampling parameters, schema; the
seed only when sampling). Failed calls are not cached: a restart tries them again.

Each answer job has its own cache file (``results/cache/answer/<method>/<model>/<video>.sqlite``): SQLite
locking over a cluster's network file system is unreliable, and one writer per file needs none.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import threading
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from senri.backends.base import Backend, Capabilities, ChatRequest, ChatResponse

log = logging.getLogger(__name__)


def request_key(identity: Mapping[str, Any], request: ChatRequest) -> str:
    payload = {"backend": dict(identity), "request": request.cache_payload()}
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


class ResponseCache:
    """Key → response JSON in one SQLite file; safe to share between threads of one process."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, timeout=60, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        # NORMAL in WAL mode survives a killed process (only a power loss may drop the last commits).
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, purpose TEXT, response TEXT NOT NULL,"
            " created_at TEXT DEFAULT CURRENT_TIMESTAMP)"
        )

    def get(self, key: str) -> ChatResponse | None:
        raw = self.get_raw(key)
        return None if raw is None else ChatResponse.from_json(raw)

    def put(self, key: str, response: ChatResponse, purpose: str = "") -> None:
        self.put_raw(key, response.to_json(), purpose)

    def get_raw(self, key: str) -> str | None:
        """A stored text that is not a chat response (a text embedder's vector as JSON:
        :mod:`senri.backends.embeddings`), kept in the same file as the job's chat calls."""
        with self._lock:
            row = self._db.execute("SELECT response FROM responses WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def put_raw(self, key: str, text: str, purpose: str = "") -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO responses (key, purpose, response) VALUES (?, ?, ?)",
                             (key, purpose, text))

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()


class CachedBackend(Backend):
    """Wraps a backend: answers from the cache when it can, stores every successful new response at once."""

    def __init__(self, inner: Backend, cache: ResponseCache) -> None:
        super().__init__(inner.config)
        self.inner = inner
        self.cache = cache
        self.kind = inner.kind  # type: ignore[misc]
        self.hits = 0
        self.misses = 0

    @property
    def capabilities(self) -> Capabilities:
        return self.inner.capabilities

    @property
    def identity(self) -> dict[str, Any]:
        return self.inner.identity

    def count_tokens(self, request: ChatRequest) -> int:
        return self.inner.count_tokens(request)

    def complete(self, request: ChatRequest) -> ChatResponse:
        return self.complete_many([request])[0]

    def complete_many(self, requests: Sequence[ChatRequest],
                      on_done: Callable[[int, ChatResponse], None] | None = None) -> list[ChatResponse]:
        keys = [request_key(self.identity, r) for r in requests]
        results: list[ChatResponse | None] = [self.cache.get(k) for k in keys]
        todo = [i for i, r in enumerate(results) if r is None]
        self.hits += len(requests) - len(todo)
        self.misses += len(todo)
        for i, response in enumerate(results):
            if response is not None and on_done is not None:
                on_done(i, response)

        def store(j: int, response: ChatResponse) -> None:
            i = todo[j]
            if response.error is None:
                self.cache.put(keys[i], response, requests[i].purpose)
            results[i] = response
            if on_done is not None:
                on_done(i, response)

        if todo:
            self.inner.complete_many([requests[i] for i in todo], on_done=store)
        return [r for r in results if r is not None]

    def hit_rate(self) -> float:
        total = self.hits + self.misses
        return self.hits / total if total else 0.0

    def close(self) -> None:
        self.inner.close()
        self.cache.close()
