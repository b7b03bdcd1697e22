import os
import socket
import subprocess
import sys
import textwrap
import time
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


def test_sigkill_to_the_job_still_takes_the_server_with_it(tmp_path):
    """Issue 36 item 5: a job killed outright runs no handler; the parent-death signal ends its server anyway."""
    script = tmp_path / "job.py"
    pids = tmp_path / "pids"
    script.write_text(textwrap.dedent(f"""
        import os, time
        from senri.backends.server import ManagedServer
        server = ManagedServer({HTTP_SERVER!r}, health_path="/").start()
        open({str(pids)!r}, "w").write(f"{{server.process.pid}} {{server.port}}")
        time.sleep(60)
    """))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    job = subprocess.Popen([sys.executable, str(script)], env=env)
    for _ in range(200):
        if pids.exists() and pids.read_text():
            break
        job.poll()
        time.sleep(0.1)
    server_pid, port = map(int, pids.read_text().split())
    assert _alive(server_pid)
    job.kill()
    job.wait()
    deadline = time.monotonic() + 10
    while _alive(server_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(server_pid) and not _listening(port)


def test_a_missing_server_executable_is_a_clear_error(tmp_path):
    with pytest.raises(ServerError, match=r"server executable 'no-such-vllm' not found"):
        ManagedServer(["no-such-vllm", "serve", "--port", "{port}"], log_path=tmp_path / "x.log").start()


KEYED_SERVER = textwrap.dedent("""
    import http.server, sys
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            ok = self.path == "/health" or self.headers.get("Authorization") == "Bearer " + sys.argv[2]
            self.send_response(200 if ok else 401)
            self.end_headers()
            self.wfile.write(b"{}")
        def log_message(self, *a):
            pass
    http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
""")


def test_the_health_check_tells_our_server_from_another_job_s(tmp_path):
    """Issue 36 item 5: a server that answers /health but refuses our key is not ours (another job's server on the
    port), and the start says so; with the key it was given, the same server is ours."""
    code = tmp_path / "keyed.py"
    code.write_text(KEYED_SERVER)
    with ManagedServer([sys.executable, str(code), "{port}", "our-key"], api_key="our-key",
                       log_path=tmp_path / "ours.log") as ours:
        assert ours.process is not None and _listening(ours.port)
    theirs = ManagedServer([sys.executable, str(code), "{port}", "their-key"], api_key="our-key",
                           log_path=tmp_path / "theirs.log", start_attempts=2)
    with pytest.raises(ServerError, match=r"refused our key on /v1/models \(HTTP 401\): it is another job's"):
        theirs.start()
    assert theirs.process is None
