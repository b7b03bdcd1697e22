"""A throw-away single-node SLURM (munged + slurmctld + slurmd from Debian's packages), no systemd needed.

Everything lives in one folder: config, munge key and socket, state, spool, logs and PID files. Clients
find the cluster through ``SLURM_CONF`` (see :attr:`LocalSlurm.env`). :meth:`stop` ends exactly the daemons
this object started, by their PID files, and removes those files.

    python tests/slurm_cluster.py start DIR   # leaves it running (for trying things by hand)
    python tests/slurm_cluster.py stop DIR
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

DAEMONS = ("slurmd", "slurmctld", "munged")  # stop order: reverse of start


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _memory_mb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024
    raise RuntimeError("cannot read MemTotal from /proc/meminfo")


def available() -> str | None:
    """None if the daemons can be started here, else why not."""
    missing = [tool for tool in ("munged", "slurmctld", "slurmd", "sbatch", "squeue") if shutil.which(tool) is None]
    if missing:
        return f"not installed: {', '.join(missing)} (make install-slurm)"
    if os.geteuid() != 0:
        return "starting slurmd needs root"
    return None


class LocalSlurm:
    def __init__(self, root: str | Path, partition: str = "debug") -> None:
        self.root = Path(root).resolve()
        self.partition = partition
        self.host = socket.gethostname().split(".")[0]
        self.conf = self.root / "slurm.conf"
        self.munge_dir = self.root / "munge"
        self.socket = self.munge_dir / "munge.socket"

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf),
                "PATH": f"{self.root / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}

    def write_srun_shim(self) -> None:
        """Inside a job, snakemake-executor-plugin-slurm-jobstep starts the rule with ``srun`` after dropping
        every SLURM_* variable but the job's identity, SLURM_CONF included. Real clusters keep their config
        in /etc/slurm or serve it configless; this one lives in a temp folder, so its ``srun`` is a shim
        that puts SLURM_CONF back (the config file of the system is never touched)."""
        shim = self.root / "bin" / "srun"
        shim.parent.mkdir(parents=True, exist_ok=True)
        shim.write_text(f'#!/bin/sh\nSLURM_CONF="${{SLURM_CONF:-{self.conf}}}" exec {shutil.which("srun")} "$@"\n')
        shim.chmod(0o755)

    def pid_file(self, daemon: str) -> Path:
        return (self.munge_dir if daemon == "munged" else self.root) / f"{daemon}.pid"

    def write_config(self) -> None:
        cpus = os.cpu_count() or 1
        memory = int(_memory_mb() * 0.9)
        for sub in ("state", "spool"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        self.conf.write_text(
            "\n".join(
                [
                    "ClusterName=senri-test",
                    f"SlurmctldHost={self.host}(127.0.0.1)",
                    f"SlurmctldPort={_free_port()}",
                    f"SlurmdPort={_free_port()}",
                    "AuthType=auth/munge",
                    "CredType=cred/munge",
                    f"AuthInfo=socket={self.socket}",
                    "SlurmUser=root",
                    "SlurmdUser=root",
                    f"StateSaveLocation={self.root / 'state'}",
                    f"SlurmdSpoolDir={self.root / 'spool'}",
                    f"SlurmctldPidFile={self.pid_file('slurmctld')}",
                    f"SlurmdPidFile={self.pid_file('slurmd')}",
                    f"SlurmctldLogFile={self.root / 'slurmctld.log'}",
                    f"SlurmdLogFile={self.root / 'slurmd.log'}",
                    "ProctrackType=proctrack/linuxproc",
                    "TaskPlugin=task/none",
                    "SelectType=select/cons_tres",
                    "SelectTypeParameters=CR_Core_Memory",
                    "JobAcctGatherType=jobacct_gather/none",
                    "AccountingStorageType=accounting_storage/none",
                    "GresTypes=gpu",
                    "MpiDefault=none",
                    "ReturnToService=2",
                    "SchedulerType=sched/backfill",
                    # squeue must still see finished jobs when the executor polls (status-command: squeue).
                    "MinJobAge=600",
                    "SlurmctldTimeout=30",
                    "SlurmdTimeout=30",
                    "InactiveLimit=0",
                    # A job's --time (its rule's runtime, a few minutes for the test's small stages) is not
                    # enforced: on a machine loaded by other work a job may run past it, and a TIMEOUT there
                    # would fail the run for no fault of the workflow.
                    "OverTimeLimit=UNLIMITED",
                    "KillWait=5",
                    f"NodeName={self.host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={memory} State=UNKNOWN",
                    f"PartitionName={self.partition} Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
                    "",
                ]
            )
        )

    def _start_munge(self) -> None:
        munge = pwd.getpwnam("munge")
        self.munge_dir.mkdir(parents=True, exist_ok=True)
        key = self.munge_dir / "munge.key"
        key.write_bytes(os.urandom(1024))
        os.chmod(self.root, 0o711)
        os.chmod(self.munge_dir, 0o700)
        os.chmod(key, 0o400)
        for path in (self.munge_dir, key):
            os.chown(path, munge.pw_uid, munge.pw_gid)
        subprocess.run(
            ["runuser", "-u", "munge", "--", "munged", "--force", f"--socket={self.socket}",
             f"--key-file={key}", f"--pid-file={self.pid_file('munged')}",
             f"--log-file={self.munge_dir / 'munged.log'}", f"--seed-file={self.munge_dir / 'munged.seed'}"],
            check=True, stdin=subprocess.DEVNULL, capture_output=True, timeout=30,
        )
        os.chmod(self.munge_dir, 0o711)  # the socket must be reachable by the slurm daemons and clients

    def start(self, timeout_s: float = 60.0) -> "LocalSlurm":
        reason = available()
        if reason:
            raise RuntimeError(reason)
        self.root.mkdir(parents=True, exist_ok=True)
        self.write_config()
        self.write_srun_shim()
        self._start_munge()
        for daemon in ("slurmctld", "slurmd"):
            subprocess.run([daemon, "-f", str(self.conf)], check=True, env=self.env, stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=30)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            state = subprocess.run(["sinfo", "-h", "-N", "-o", "%t"], env=self.env, capture_output=True, text=True,
                                   timeout=10).stdout.strip()
            if state in ("idle", "mix", "alloc"):
                return self
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"SLURM node not idle after {timeout_s:.0f} s; see {self.root}/*.log")

    def cancel_jobs(self, workdir: Path | None = None, timeout_s: float = 30.0) -> None:
        """Cancel every job of this cluster (``workdir``: only those whose working directory it is) that is
        pending, configuring, running, completing or suspended, and wait (bounded) until none is left."""
        if not self.pid_file("slurmctld").exists():
            return
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            queued = subprocess.run(["squeue", "-h", "-o", "%i|%Z", "-t", "PD,R,CG,CF,S"], env=self.env,
                                    capture_output=True, text=True, timeout=10).stdout.splitlines()
            jobs = [job for job, _, folder in (line.partition("|") for line in queued)
                    if workdir is None or Path(folder).resolve() == workdir.resolve()]
            if not jobs:
                return
            subprocess.run(["scancel", *jobs], env=self.env, capture_output=True, timeout=10)
            time.sleep(0.5)

    def stop(self) -> None:
        try:
            self.cancel_jobs()
        except (subprocess.SubprocessError, OSError):
            pass
        running = {}
        for daemon in DAEMONS:  # all at once: each takes 1-2 s to shut down
            pid_file = self.pid_file(daemon)
            if not pid_file.exists():
                continue
            try:
                pid = int(pid_file.read_text().strip())
                os.kill(pid, signal.SIGTERM)
                running[pid] = pid_file
            except (ProcessLookupError, ValueError):
                pid_file.unlink(missing_ok=True)
        deadline = time.monotonic() + 10
        while running and time.monotonic() < deadline:
            for pid in list(running):
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    running.pop(pid).unlink(missing_ok=True)
            time.sleep(0.1)
        for pid, pid_file in running.items():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            pid_file.unlink(missing_ok=True)

    def __enter__(self) -> "LocalSlurm":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


if __name__ == "__main__":  # pragma: no cover - manual use
    action, folder = sys.argv[1], sys.argv[2]
    cluster = LocalSlurm(folder)
    if action == "start":
        cluster.start()
        print(f"export SLURM_CONF={cluster.conf} PATH={cluster.root / 'bin'}:$PATH")
    else:
        cluster.stop()
