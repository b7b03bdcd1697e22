"""A model server owned by one job: started on a free port, health-checked, and always stopped.

Answer jobs that serve a model themselves (``vllm serve``, llama.cpp's server) run it inside the job, so a
cluster job never depends on a server someone else started and never leaves one behind. The server runs in
its own process group; leaving the ``with`` block — normally, by exception, by Ctrl-C, or because the job
got SIGTERM from Snakemake or ``scancel`` — terminates the whole group (SIGTERM, then SIGKILL after a grace
period), so worker processes a server forks die with it. A job killed outright (SIGKILL, the OOM killer) runs
no handler: on Linux the server is started with a parent-death signal, so it goes with the job all the same.
With ``api_key`` the health check also asks ``/v1/models`` with that key: on a shared node another job's server
may answer ``/health`` on our port before ours has failed to bind, and only ours knows our key.

    with ManagedServer(["vllm", "serve", model, "--port", "{port}"]) as server:
        client = OpenAI(base_url=server.url + "/v1")
"""

from __future__ import annotations

import atexit
import ctypes
import ctypes.util
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import FrameType
from typing import Any, Mapping, Sequence

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
#: prctl's option that sends the child a signal when the thread that started it exits (Linux).
PR_SET_PDEATHSIG = 1


def _die_with_parent_hook():
    """A ``preexec_fn`` that asks the kernel to SIGKILL the server when its parent goes, or None where that is
    not available (not Linux, no libc). libc is loaded here, before the fork, not in the child."""
    if not os.uname().sysname == "Linux":
        return None
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    libc = ctypes.CDLL(name, use_errno=True)

    def hook() -> None:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)

    return hook


class ServerError(RuntimeError):
    """The server did not come up; the message quotes the end of its log."""


class NotOurServer(ServerError):
    """What answered on our port refused our key: another job's server holds the port (a start on another port
    may succeed)."""


def require_executable(command: Sequence[str], env: Mapping[str, str] | None = None) -> None:
    """A ServerError naming the server's executable when it is neither on ``PATH`` (of ``env``, else this
    process's) nor a file: no start or restart can help then."""
    executable = command[0]
    if shutil.which(executable, path=(env or os.environ).get("PATH")) is None:
        raise ServerError(f"server executable {executable!r} not found (not on PATH and not a file): "
                          f"install it in this environment, or name its full path in the model config")


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now (the OS picks it; a start that loses the race is retried)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class ManagedServer:
    def __init__(
        self,
        command: Sequence[str],
        health_path: str = "/health",
        host: str = "127.0.0.1",
        startup_timeout_s: float = 900.0,
        stop_grace_s: float = 20.0,
        log_path: str | Path | None = None,
        env: Mapping[str, str] | None = None,
        start_attempts: int = 3,
        api_key: str | None = None,
        models_path: str = "/v1/models",
    ) -> None:
        """``command`` may contain ``{port}`` and ``{host}``; they are filled in at start. ``api_key``: the key
        the server was given; the health check then confirms that the server answering is ours."""
        self.command = list(command)
        self.health_path = health_path
        self.host = host
        self.startup_timeout_s = startup_timeout_s
        self.stop_grace_s = stop_grace_s
        self.log_path = Path(log_path) if log_path else None
        self.env = dict(env) if env is not None else None
        self.start_attempts = start_attempts
        self.api_key = api_key
        self.models_path = models_path
        self.port: int | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self._previous_handlers: dict[int, Any] = {}

    @property
    def url(self) -> str:
        if self.port is None:
            raise ServerError("server not started")
        return f"http://{self.host}:{self.port}"

    def log_tail(self, lines: int = 20) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    # ------------------------------------------------------------------------------------------ start

    def start(self) -> "ManagedServer":
        if self.log_path is None:
            fd, name = tempfile.mkstemp(prefix="senri-server-", suffix=".log")
            os.close(fd)
            self.log_path = Path(name)
        self._install_stop_handlers()
        atexit.register(self.stop)
        last_error: ServerError | None = None
        for _ in range(self.start_attempts):
            self.port = free_port(self.host)
            # Plain replacement, not str.format: arguments may hold JSON or other braces of their own.
            args = [part.replace("{port}", str(self.port)).replace("{host}", self.host) for part in self.command]
            require_executable(args, self.env)
            # The parent-death signal follows the thread that starts the server: only the main thread, which
            # lives as long as the job, may ask for it.
            hook = _die_with_parent_hook() if threading.current_thread() is threading.main_thread() else None
            with self.log_path.open("ab") as log:
                self.process = subprocess.Popen(
                    args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    env=self.env, start_new_session=True, preexec_fn=hook,
                )
            try:
                self._wait_until_healthy()
                return self
            except ServerError as exc:
                last_error = exc
                exited_early = self.process.poll() is not None
                self.stop()
                if not (exited_early or isinstance(exc, NotOurServer)):
                    break  # timed out: another port will not help
        assert last_error is not None
        raise last_error

    def _wait_until_healthy(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            code = self.process.poll()
            if code is not None:
                raise ServerError(
                    f"server {self.command[0]!r} exited with code {code} before answering "
                    f"{self.health_path} on port {self.port}; log {self.log_path}:\n{self.log_tail()}"
                )
            try:
                with urllib.request.urlopen(self.url + self.health_path, timeout=2) as response:
                    if response.status == 200:
                        self._check_it_is_ours()
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            time.sleep(0.25)
        raise ServerError(
            f"server {self.command[0]!r} not healthy at {self.url}{self.health_path} after "
            f"{self.startup_timeout_s:.0f} s; log {self.log_path}:\n{self.log_tail()}"
        )

    def _check_it_is_ours(self) -> None:
        """With a key: the server that answered ``/health`` must accept our key on ``models_path``; a refusal
        (401/403) means another server holds the port (ServerError: the start is retried on another port)."""
        if not self.api_key:
            return
        request = urllib.request.Request(self.url + self.models_path,
                                         headers={"Authorization": f"Bearer {self.api_key}"})
        try:
            with urllib.request.urlopen(request, timeout=5):
                return
        except urllib.error.HTTPError as exc:
            if exc.code in (401, 403):
                raise NotOurServer(f"the server answering on port {self.port} refused our key on "
                                  f"{self.models_path} (HTTP {exc.code}): it is another job's server, not "
                                  f"{self.command[0]!r}") from None
            raise

    # ------------------------------------------------------------------------------------------- stop

    def stop(self) -> None:
        """Terminate the server's whole process group; idempotent."""
        process, self.process = self.process, None
        if process is not None:
            pgid = process.pid  # the server leads its own session, so its pid is the group id
            if _group_alive(pgid):
                os.killpg(pgid, signal.SIGTERM)
                try:
                    process.wait(timeout=self.stop_grace_s)
                except subprocess.TimeoutExpired:
                    pass
                deadline = time.monotonic() + self.stop_grace_s
                while _group_alive(pgid) and time.monotonic() < deadline:
                    time.sleep(0.1)  # forked workers may outlive the leader briefly
                if _group_alive(pgid):
                    os.killpg(pgid, signal.SIGKILL)
            process.wait()
        self._restore_stop_handlers()

    def _install_stop_handlers(self) -> None:
        """Turn SIGTERM/SIGHUP into SystemExit so ``with`` blocks unwind and stop the server.

        Without this, a job cancelled by Snakemake or ``scancel`` dies on the default handler, and a server in
        its own session would outlive it. Only the main thread may set handlers; elsewhere we rely on atexit.
        """
        if threading.current_thread() is not threading.main_thread() or self._previous_handlers:
            return

        def handler(signum: int, frame: FrameType | None) -> None:
            raise SystemExit(128 + signum)

        for sig in STOP_SIGNALS:
            self._previous_handlers[sig] = signal.signal(sig, handler)

    def _restore_stop_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig, previous in self._previous_handlers.items():
            signal.signal(sig, previous)
        self._previous_handlers.clear()

    def __enter__(self) -> "ManagedServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
