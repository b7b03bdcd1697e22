"""``release_worker`` backend: a model that runs in its own pinned environment, in a worker process of the job.

Models whose releases need another transformers than senri's (shared/spec/direct_specialists.md S1, R4; the
omni memories' patched Qwen2.5-Omni) cannot be imported here. This backend builds (once per node) the
environment of the model config's ``env`` from ``envs/<env>.txt`` (:mod:`senri.backends.worker_env`), starts
``senri/workers/worker_main.py`` under that environment's interpreter with the release's checkout on its
``PYTHONPATH`` (never copied into senri, never installed), and exchanges JSON lines with it over pipes.

API (model config keys; ``workflow/schemas/config.schema.json`` ``model_release_worker``):

- ``backend: release_worker``; ``model``: the checkpoint (a local folder or a name in the node's Hugging Face
  cache), ``revision`` (optional, part of the cache identity);
- ``env``: the environment's name (pins ``envs/<env>.txt``, or ``pins:`` a path), ``python``: the base
  interpreter the venv is made from (default senri's), ``pip_args`` (e.g. ``[--no-index, --find-links, DIR]``
  for an offline node, or an index URL for torch's CUDA wheels), ``env_cache`` (default ``$SENRI_ENV_CACHE``,
  else ``/tmp/senri-envs-<uid>``: node-local);
- ``release_checkout``: the user's local git checkout of the release (null: none), ``release_paths``: folders of
  it put on the worker's ``PYTHONPATH`` (default ``["."]``);
- ``adapter``: ``module:Class`` of the worker-side model adapter, imported from ``senri/workers/`` or the
  checkout; ``adapter_options``: a JSON-able dict given to it (``model`` and ``revision`` are added);
- ``startup_timeout_s`` (default 1800: loading weights), ``request_timeout_s`` (default 3600).

The worker starts on the first request, so a rerun answered wholly from the response cache never builds an
environment nor loads a model. A request the worker fails (an adapter exception, a crash, a timeout) comes back
as a :class:`ChatResponse` with ``error`` set: the method records a per-question failure, and the next request
starts a fresh worker. The cache identity (:attr:`ReleaseWorkerBackend.identity`) holds the checkpoint, the
environment's name and pins digest, the base interpreter, the checkout's commit, the adapter and its options and
the protocol version; the method's trace records it with each answer, so the run's records say what ran.

Adapters (worker side) implement ``__init__(options)``, ``generate(request) -> {"text", "prompt_tokens",
"completion_tokens", "finish_reason"}`` and optionally ``info()``; see ``senri/workers/worker_main.py`` for the
request's form and ``senri/workers/stub_model.py`` for a complete example.
"""

from __future__ import annotations

import ast
import hashlib
import json
import logging
import os
import re
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Mapping

from senri.backends.base import (Backend, BackendError, Capabilities, ChatRequest, ChatResponse, FramesPart,
                                 ImagePart, VideoPart)
from senri.backends.server import _die_with_parent_hook, _group_alive
from senri.backends.worker_env import (WorkerEnvironment, checkout_commit, ensure_environment, pins_digest,
                                       pins_path, read_pins)

log = logging.getLogger(__name__)

PROTOCOL = 1
WORKERS_DIR = Path(__file__).resolve().parents[1] / "workers"
WORKER_MAIN = WORKERS_DIR / "worker_main.py"


def worker_code_digest(adapter: str) -> str:
    """sha256[:16] of the worker entry and, when the adapter is one of senri's (``senri/workers/<module>.py``), its
    file: editing an adapter changes the cache identity of every response it made (an adapter from the checkout is
    covered by the checkout's commit)."""
    adapter_file = WORKERS_DIR / f"{adapter.partition(':')[0].replace('.', '/')}.py"
    files = [WORKER_MAIN, adapter_file, *senri_files(adapter_file)]
    digest = hashlib.sha256()
    for path in files:
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def senri_files(adapter_file: Path) -> list[Path]:
    """The files of senri an adapter loads by path (its ``SENRI_FILES = (...)`` line, relative to ``src/senri/``):
    e.g. the LFP block policy the Cambrian-S adapter applies to its caches."""
    if not adapter_file.is_file():
        return []
    match = re.search(r"^SENRI_FILES\s*=\s*(\([^)]*\))", adapter_file.read_text(), re.MULTILINE)
    return [WORKERS_DIR.parent / name for name in ast.literal_eval(match.group(1))] if match else []


class WorkerFailed(RuntimeError):
    """The worker died, timed out or broke the protocol; the message quotes the end of its log."""


class WorkerProcess:
    """One running worker: its own process group (stopped as a whole), a parent-death signal, a log file."""

    def __init__(self, python: Path, adapter: str, options: Mapping[str, Any], pythonpath: list[Path],
                 log_path: Path, startup_timeout_s: float) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
        env.update(PYTHONPATH=os.pathsep.join(str(p) for p in [WORKERS_DIR, *pythonpath]), PYTHONNOUSERSITE="1",
                   HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
        self.log_path = log_path
        hook = _die_with_parent_hook() if threading.current_thread() is threading.main_thread() else None
        with log_path.open("ab") as log_file:
            self.process = subprocess.Popen(
                [str(python), str(WORKER_MAIN), "--adapter", adapter, "--options", json.dumps(dict(options))],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log_file, env=env,
                start_new_session=True, preexec_fn=hook)
        self._buffer = b""
        hello = self.read_line(startup_timeout_s, "starting")
        if not hello.get("ready"):
            self.stop()
            raise WorkerFailed(f"worker could not load its model: {hello.get('error')}; log {log_path}:\n"
                               f"{self.log_tail()}")
        self.hello = hello

    def log_tail(self, lines: int = 20) -> str:
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def read_line(self, timeout_s: float, doing: str) -> dict[str, Any]:
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                self.stop(polite=False)
                raise WorkerFailed(f"worker timed out after {timeout_s:.0f} s {doing}; log {self.log_path}:\n"
                                   f"{self.log_tail()}")
            ready, _, _ = select.select([fd], [], [], min(left, 1.0))
            if ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    code = self.process.wait()
                    raise WorkerFailed(f"worker exited with code {code} while {doing}; log {self.log_path}:\n"
                                       f"{self.log_tail()}")
                self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            return json.loads(line)
        except json.JSONDecodeError:
            self.stop()
            raise WorkerFailed(f"worker broke the protocol while {doing}: {line[:200]!r}") from None

    def call(self, payload: Mapping[str, Any], timeout_s: float) -> dict[str, Any]:
        assert self.process.stdin is not None
        try:
            self.process.stdin.write((json.dumps(payload) + "\n").encode())
            self.process.stdin.flush()
        except (BrokenPipeError, OSError):
            code = self.process.wait()
            raise WorkerFailed(f"worker exited with code {code} before the request; log {self.log_path}:\n"
                               f"{self.log_tail()}") from None
        reply = self.read_line(timeout_s, f"answering request {payload.get('id')}")
        if reply.get("id") != payload.get("id"):
            self.stop()
            raise WorkerFailed(f"worker answered request {reply.get('id')} to request {payload.get('id')}")
        return reply

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self, grace_s: float = 10.0, polite: bool = True) -> None:
        """Ask the worker to end (``polite``: a busy or hung one never reads it), then terminate its whole
        process group; idempotent."""
        process = self.process
        if polite and process.poll() is None and process.stdin is not None:
            try:
                process.stdin.write(b'{"op": "shutdown"}\n')
                process.stdin.close()
                process.wait(timeout=grace_s)
            except (OSError, subprocess.TimeoutExpired):
                pass
        if _group_alive(process.pid):
            try:
                os.killpg(process.pid, signal.SIGTERM)
                process.wait(timeout=grace_s)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                pass
            if _group_alive(process.pid):
                os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        for stream in (process.stdin, process.stdout):
            if stream is not None and not stream.closed:
                stream.close()


class ReleaseWorkerBackend(Backend):
    kind = "release_worker"

    def __init__(self, config: Mapping[str, Any]) -> None:
        super().__init__(config)
        for key in ("env", "adapter"):
            if not config.get(key):
                raise BackendError(f"model config {key}: the release_worker backend needs it")
        self.pins_file = pins_path(str(config["env"]), config.get("pins"))
        self.pins = read_pins(self.pins_file)  # a bad pin fails here, before any question
        checkout = config.get("release_checkout")
        self.checkout = Path(checkout).expanduser().resolve() if checkout else None
        self.release_commit = checkout_commit(self.checkout) if self.checkout else None
        self._worker: WorkerProcess | None = None
        self._environment: WorkerEnvironment | None = None
        self._scratch: Path | None = None
        self._next_id = 0
        self._lock = threading.Lock()

    @classmethod
    def declared_capabilities(cls, config: Mapping[str, Any]) -> Capabilities:
        return Capabilities(images=bool(config.get("images", True)), video=False)

    @property
    def identity(self) -> dict[str, Any]:
        return {"kind": self.kind, "model": self.config.get("model"), "revision": self.config.get("revision"),
                "env": str(self.config["env"]), "pins_sha256": pins_digest(self.pins),
                "python": self.config.get("python"), "pip_args": list(self.config.get("pip_args") or []),
                "release_commit": self.release_commit, "adapter": self.config["adapter"],
                "adapter_options": dict(self.config.get("adapter_options") or {}), "protocol": PROTOCOL,
                "worker_code": worker_code_digest(str(self.config["adapter"]))}

    # ------------------------------------------------------------------------------------------ worker

    def environment(self) -> WorkerEnvironment:
        if self._environment is None:
            cache = self.config.get("env_cache")
            self._environment = ensure_environment(
                str(self.config["env"]), self.pins_file, Path(cache).expanduser() if cache else None,
                self.config.get("python"), [str(a) for a in self.config.get("pip_args") or []])
            log.info("worker environment %s at %s", self._environment.key, self._environment.path)
        return self._environment

    def _start(self) -> WorkerProcess:
        environment = self.environment()
        if self._scratch is None:
            self._scratch = Path(tempfile.mkdtemp(prefix="senri-worker-"))
        paths = [self.checkout / p for p in self.config.get("release_paths") or ["."]] if self.checkout else []
        options = {**dict(self.config.get("adapter_options") or {}), "model": self.config.get("model"),
                   "revision": self.config.get("revision")}
        try:
            worker = WorkerProcess(environment.python, str(self.config["adapter"]), options, paths,
                                   self._scratch / "worker.log", float(self.config.get("startup_timeout_s", 1800)))
        except WorkerFailed as exc:  # no model, no answers: stop the job with the reason, record nothing
            raise BackendError(f"release worker {self.config['adapter']} in {environment.key}: {exc}") from None
        log.info("release worker up (%s, release %s): %s", environment.key, self.release_commit,
                 json.dumps(worker.hello.get("info"), sort_keys=True))
        return worker

    def _media_file(self, data: bytes, digest: str, suffix: str) -> str:
        """``data`` as a file of the scratch folder named by its digest: a video's frames are written once for
        all of its questions."""
        if self._scratch is None:
            self._scratch = Path(tempfile.mkdtemp(prefix="senri-worker-"))
        path = self._scratch / f"{digest}.{suffix}"
        if not path.exists():
            partial = path.with_suffix(".partial")
            partial.write_bytes(data)
            partial.replace(path)
        return str(path)

    def wire_request(self, request: ChatRequest) -> dict[str, Any]:
        """``request`` in the worker protocol's form, its media written to the scratch folder."""
        def part(p: Any) -> Any:
            if isinstance(p, str):
                return p
            if isinstance(p, ImagePart):
                return {"image": self._media_file(p.jpeg, p.digest(), "jpg"), "time_s": p.time_s}
            if isinstance(p, FramesPart):
                paths = [self._media_file(frame, digest, "png" if p.fmt == "png" else "jpg")
                         for frame, digest in zip(p.frames, p.frame_digests())]
                return {"frames": {"paths": paths, "rate": p.rate, "indices": list(p.indices),
                                   "times_s": list(p.times_s), "fmt": p.fmt, "timeline": p.timeline,
                                   "source_wh": list(p.source_wh) if p.source_wh else None,
                                   "options": json.loads(p.options) if p.options else {}}}
            if isinstance(p, VideoPart):
                raise BackendError("release_worker takes frames (FramesPart), not carrier videos")
            raise BackendError(f"release_worker: unknown message part {type(p).__name__}")

        self._next_id += 1
        return {"id": self._next_id, "op": "generate",
                "messages": [{"role": m.role, "content": [part(p) for p in m.content]} for m in request.messages],
                "generation": {"max_tokens": request.max_tokens, "temperature": request.temperature,
                               "top_p": request.top_p, "top_k": request.top_k,
                               "repetition_penalty": request.repetition_penalty, "seed": request.seed,
                               "stop": list(request.stop)}}

    def complete(self, request: ChatRequest) -> ChatResponse:
        started = time.monotonic()
        with self._lock:
            try:
                if self._worker is None or not self._worker.alive():
                    self._worker = self._start()
                reply = self._worker.call(self.wire_request(request), float(self.config.get("request_timeout_s",
                                                                                            3600)))
            except WorkerFailed as exc:
                self._worker = None  # the next request starts a fresh worker
                log.warning("release worker failed: %s", exc)
                return ChatResponse(text="", error=f"release worker: {exc}", latency_s=time.monotonic() - started)
        if reply.get("error"):
            return ChatResponse(text="", error=f"release worker adapter: {reply['error']}",
                                latency_s=time.monotonic() - started)
        return ChatResponse(text=str(reply.get("text", "")), prompt_tokens=int(reply.get("prompt_tokens", 0)),
                            completion_tokens=int(reply.get("completion_tokens", 0)),
                            finish_reason=reply.get("finish_reason"), latency_s=time.monotonic() - started)

    def close(self) -> None:
        if self._worker is not None:
            self._worker.stop()
            self._worker = None
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None

