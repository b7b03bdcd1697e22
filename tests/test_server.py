import os
import socket
import subprocess
import sys
import textwrap
import urllib.request

import pytest

from senri.backends.server import ManagedServer, ServerError

HTTP_SERVER = [sys.executable, "-m", "http.server", "{port}", "--bind", "{host}"]


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for its reaper counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_server_runs_on_a_free_port_and_is_gone_after_the_block(tmp_path):
    with ManagedServer(HTTP_SERVER, health_path="/", log_path=tmp_path / "a.log") as a, \
            ManagedServer(HTTP_SERVER, health_path="/", log_path=tmp_path / "b.log") as b:
        assert a.port != b.port
        with urllib.request.urlopen(a.url + "/") as response:
            assert response.status == 200
        pid, port = a.process.pid, a.port
    assert not _alive(pid) and not _listening(port)


def test_a_server_that_dies_at_start_is_an_error_with_its_log(tmp_path):
    crash = [sys.executable, "-c", "import sys; print('model file missing', flush=True); sys.exit(3)"]
    with pytest.raises(ServerError, match=r"exited with code 3(.|\n)*model file missing"):
        ManagedServer(crash, log_path=tmp_path / "crash.log", start_attempts=2).start()


def test_a_server_that_never_gets_healthy_is_stopped(tmp_path):
    silent = ManagedServer([sys.executable, "-c", "import time; time.sleep(600)"], startup_timeout_s=1.5,
                           log_path=tmp_path / "silent.log")
    with pytest.raises(ServerError, match="not healthy"):
        silent.start()
    assert silent.process is None


def test_sigterm_to_the_job_stops_the_server_and_its_children(tmp_path):
    """A job cancelled by Snakemake or scancel gets SIGTERM: the server group must die with it."""
    script = tmp_path / "job.py"
    pids = tmp_path / "pids"
    script.write_text(textwrap.dedent(f"""
        import os, signal, sys, time
        from senri.backends.server import ManagedServer
        # A server that forks a worker, as vLLM does: both must go.
        command = ["sh", "-c", "sleep 600 & exec {sys.executable} -m http.server {{port}} --bind 127.0.0.1"]
        with ManagedServer(command, health_path="/") as server:
            worker = int(os.popen(f"pgrep -g {{server.process.pid}} sleep").read().split()[0])
            open({str(pids)!r}, "w").write(f"{{server.process.pid}} {{worker}} {{server.port}}")
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(30)
    """))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 128 + 15, proc.stderr
    server_pid, worker_pid, port = map(int, pids.read_text().split())
    assert not _alive(server_pid) and not _alive(worker_pid) and not _listening(port)
