"""The workflow through `snakemake --profile slurm` on a real single-node SLURM brought up by the test."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

import polars as pl
import pytest

from conftest import REPO, SMALL_DEMO, clock_free, render_demo
from slurm_cluster import LocalSlurm, available

pytestmark = pytest.mark.workflow

SLURM_PROFILE = REPO / "workflow" / "profiles" / "slurm"
TEST_PROFILE = REPO / "tests" / "slurm" / "profile"
#: `python -m snakemake` with the SLURM executor's status polls 1 s apart (the plugin's back-off, made for jobs of
#: hours, noticed each of the test's jobs of seconds up to half its run time late).
POLLING_SNAKEMAKE = REPO / "tests" / "slurm" / "snakemake_polling_every_second.py"
HARD_TIMEOUT_S = 1500  # a hung poller; a run on a busy 2-core machine takes up to ~15 min


@pytest.fixture(scope="module")
def cluster():
    reason = available()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"the SLURM test cluster cannot start in CI: {reason}")
        pytest.skip(reason)
    root = Path(tempfile.mkdtemp(prefix="senri-slurm-"))  # short: unix socket paths are limited to 108 bytes
    local = LocalSlurm(root).start()
    try:
        yield local
    finally:
        local.stop()
        shutil.rmtree(root, ignore_errors=True)
    assert not any((root / f"{d}.pid").exists() for d in ("slurmctld", "slurmd"))


def snakemake_command(workdir: Path, *args: str, slurm: bool = False) -> list[str]:
    """A run in ``workdir``: locally, or on the test cluster through the shipped SLURM profile with the test
    profile over it."""
    entry = ([str(POLLING_SNAKEMAKE), "--profile", str(SLURM_PROFILE), "--workflow-profile", str(TEST_PROFILE)]
             if slurm else ["-m", "snakemake"])
    return [sys.executable, *entry, "-s", str(REPO / "Snakefile"), "-d", str(workdir), *args]


def scripts_first(env: dict) -> dict:
    """``env`` with the test interpreter's scripts first on PATH: the `python` every job's shell calls."""
    return {**env, "PATH": str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")}


def snakemake(workdir: Path, *args: str, env: dict | None = None, slurm: bool = False) -> subprocess.CompletedProcess:
    """Run snakemake with a hard kill timeout (a hung poller must not hang the test suite)."""
    proc = subprocess.Popen(
        snakemake_command(workdir, *args, slurm=slurm), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env=scripts_first(env or dict(os.environ)), stdin=subprocess.DEVNULL, start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=HARD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"snakemake {' '.join(args)} still running after {HARD_TIMEOUT_S} s:\n{out[-4000:]}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, "")


def on_slurm(cluster: LocalSlurm, workdir: Path, *args: str) -> subprocess.CompletedProcess:
    return snakemake(workdir, *args, env=cluster.env, slurm=True)


def stop_run(run: subprocess.Popen, cluster: LocalSlurm, workdir: Path, exit_s: float = 60,
             interrupt_s: float = 30) -> None:
    """End a Snakemake run on the cluster, started in a session of its own, in bounded time, and leave none of
    its jobs in the queue (a leftover would hold the test node's CPUs from the next run).

    The run gets ``exit_s`` to end by itself, then a SIGINT (Snakemake's Ctrl-C: it scancels its jobs and
    exits), then its whole process group a SIGKILL. Never SIGTERM: Snakemake 9.27's SIGTERM handler takes the
    scheduler's lock, a plain ``threading.Lock`` that the main thread holds while it records a finished or
    failed job (seconds on a busy machine), and a SIGTERM that lands then deadlocks it for good (CI's hang:
    ``terminate()`` right after the scancel, while the run recorded the cancelled batch). Last, every job still
    queued or running with ``workdir`` as its working directory is cancelled and waited out."""
    for signum, grace_s in ((None, exit_s), (signal.SIGINT, interrupt_s), (signal.SIGKILL, 10)):
        if run.poll() is not None:
            break
        if signum == signal.SIGKILL:
            os.killpg(run.pid, signum)  # the session's group: Snakemake and its sbatch/squeue calls
            shutil.rmtree(workdir / ".snakemake" / "locks", ignore_errors=True)  # what `snakemake --unlock` does
        elif signum is not None:
            run.send_signal(signum)
        try:
            run.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
    cluster.cancel_jobs(workdir)


def test_profile_is_found_as_typed_from_the_repository_root(monkeypatch):
    from snakemake.cli import get_profile_dir

    monkeypatch.chdir(REPO)
    found = get_profile_dir("slurm")
    assert found is not None, "no `slurm` profile: run `make install` (it links ~/.config/snakemake/slurm)"
    assert found[1].resolve() == (SLURM_PROFILE / "config.yaml").resolve()


def test_a_run_deaf_to_its_interrupt_is_killed_and_its_queued_jobs_cancelled(cluster, tmp_path):
    """stop_run's last resorts, which the served test's cleanup counts on: a run that ignores SIGINT is killed
    within the grace periods given, and a job of its working directory still in the queue is cancelled (one of
    another folder is left alone)."""
    import time

    other = tmp_path / "other"
    other.mkdir()
    jobs = [subprocess.run(["sbatch", "--parsable", "-D", str(folder), "-o", "/dev/null", "--wrap", "sleep 300"],
                           env=cluster.env, check=True, capture_output=True, text=True, timeout=30).stdout.strip()
            for folder in (tmp_path, other)]
    deaf = subprocess.Popen([sys.executable, "-c", "import signal, subprocess; signal.signal(signal.SIGINT, "
                             "signal.SIG_IGN); subprocess.run(['sleep', '300'])"], start_new_session=True)
    try:
        started = time.monotonic()
        stop_run(deaf, cluster, tmp_path, exit_s=1, interrupt_s=1)
        assert deaf.poll() == -signal.SIGKILL and time.monotonic() - started < 40
        states = dict(line.split("|") for line in subprocess.run(
            ["squeue", "-h", "-t", "all", "-o", "%i|%T", "-j", ",".join(jobs)], env=cluster.env,
            capture_output=True, text=True, timeout=10).stdout.split())
        assert states[jobs[0]] == "CANCELLED" and states[jobs[1]] in ("PENDING", "RUNNING"), states
    finally:
        subprocess.run(["scancel", *jobs], env=cluster.env, timeout=30)
        if deaf.poll() is None:
            os.killpg(deaf.pid, signal.SIGKILL)


#: A small demo (SLURM_DEMO below) with three prompt methods (a model-free one, two on smollm2), every stage on:
#: the cluster runs are about SLURM, not CPU time (the full demo's DAG, memory stages and videolucy have their own
#: tests in test_workflow). cache_prompt off: a fresh call's numerics do not depend on the engine's prompt-cache
#: history (tests/test_serving.py), so the served run below compares with the same local run.
METHODS = "random,blind,blind_letter"

#: smollm2 on one thread, in process and served alike (the default is the job's cores, 2 here): two llama.cpp
#: threads that wait for each other at every layer cost 4x the CPU of one on a busy 2-core machine (measured:
#: 20 vs 5 CPU s for one answer job of 4 questions at load 14), and a 1-CPU answer job leaves the test node's
#: other CPU to the next job and to the local run beside the cluster runs.
ONE_THREAD = "model.smollm2.threads=1"


#: The served case's switch: smollm2 served; the test node's 2 CPUs hold its server's threads only (a batch asks
#: for serving.cpus_per_answer more per concurrent answer, which would leave it unschedulable here).
SERVED = " serving.models=[smollm2] serving.cpus_per_answer=0"


#: The cluster runs' demo: the small demo's generator at a quarter of its pixels, two 22-s walks of four places and
#: 4 questions a video (the smallest balanced set). What the cluster runs prove is about SLURM (jobs, groups, logs,
#: failure and resume, the served batch), not about the stages' numbers, and every stage's and answer job's work
#: scales with frames and questions (the small demo's 68-s walks at 640x360 and 16 questions a video cost
#: each anonymize job 4x and each answer job 4x as much).
SLURM_DEMO = replace(SMALL_DEMO, places_per_video=4, place_s=4, width=320, height=180,
                     questions_per_task={"L": 1, "RR": 1, "OC": 1, "RER": 1, "NP": 0, "TER": 0})
QUESTIONS_PER_VIDEO = sum(SLURM_DEMO.questions_per_task.values())


@pytest.fixture(scope="module")
def slurm_demo(tmp_path_factory) -> dict:
    return render_demo(SLURM_DEMO, tmp_path_factory.mktemp("slurm_demo"))


def fast_overrides(slurm_demo: dict, videos_dir: Path) -> str:
    return (f"overrides=dataset=senri dataset.questions=[{slurm_demo['questions']}] dataset.videos_dir={videos_dir} "
            f"anonymize.stride=30 method=[{METHODS}] +model.smollm2.cache_prompt=false {ONE_THREAD}")


@pytest.fixture(scope="module")
def local_run_started(tmp_path_factory, slurm_demo):
    """The same plan run locally (-c2), started when the cluster runs start and beside them: a cluster run
    leaves a core idle for much of its time (one job at a time, each waiting on its allocation, its Snakemake
    start and the executor's status polls), so the local run costs the module little wall time there."""
    local = tmp_path_factory.mktemp("slurm_local")
    with ThreadPoolExecutor(max_workers=1) as pool:
        yield local, pool.submit(snakemake, local, "-c2", "--config",
                                 fast_overrides(slurm_demo, slurm_demo["videos_dir"]))


@pytest.fixture(scope="module")
def local_run(local_run_started: tuple[Path, Future]) -> Path:
    """The local run, finished: what every cluster run here must reproduce."""
    local, running = local_run_started
    proc = running.result()
    assert proc.returncode == 0, proc.stdout[-6000:]
    return local


@dataclass
class ClusterRun:
    """A run on the cluster with one broken video, then the rerun after the video is repaired."""

    work: Path
    videos: Path
    failed: subprocess.CompletedProcess
    resumed: subprocess.CompletedProcess
    finished_mtime_ns: int  # the healthy video's anonymized file after the failed run (-1: not made)


@pytest.fixture(scope="module")
def cluster_run(cluster, local_run_started, tmp_path_factory, slurm_demo) -> ClusterRun:
    """The run of the first test below, whose finished results the served test starts from (only its serving
    batch then runs on the cluster, not every upstream stage again)."""
    root = tmp_path_factory.mktemp("slurm_run")
    videos = root / "videos"
    videos.mkdir()
    shutil.copy(slurm_demo["videos"]["demo_01"], videos / "demo_01.mp4")
    (videos / "demo_02.mp4").write_bytes(b"not a video at all")
    overrides = fast_overrides(slurm_demo, videos)
    work = root / "work"
    failed = on_slurm(cluster, work, "--config", overrides)
    finished = work / "results/anonymized/demo_01.mp4"
    before = finished.stat().st_mtime_ns if finished.exists() else -1
    shutil.copy(slurm_demo["videos"]["demo_02"], videos / "demo_02.mp4")
    resumed = on_slurm(cluster, work, "--config", overrides)
    return ClusterRun(work, videos, failed, resumed, before)


def test_a_failed_job_names_its_rule_and_log_the_rerun_resumes_and_every_job_ran_inside_slurm_as_locally(
        cluster_run, local_run):
    """The profile's job groups (issue 53): each grouped stage's jobs of both videos ran in one SLURM job."""
    failed, resumed, work = cluster_run.failed, cluster_run.resumed, cluster_run.work
    assert failed.returncode != 0
    assert "Error in rule anonymize" in failed.stdout  # the first stage that reads the video's pixels
    assert re.search(r"\.snakemake/slurm_logs/rule_anonymize/demo_02/\d+\.log", failed.stdout), failed.stdout[-4000:]
    finished = work / "results/anonymized/demo_01.mp4"
    assert cluster_run.finished_mtime_ns > 0  # keep-going: the healthy video's anonymize ran and was kept

    # The grouped stages wait for their group's every input: the healthy video's probe and frames ran with the
    # repaired one's, in the rerun (a broken video holds back its group until then).
    assert resumed.returncode == 0, resumed.stdout[-6000:]
    ran = re.findall(r"^\s*(?:local)?rule (\w+):", resumed.stdout, re.MULTILINE)
    assert sorted(ran) == ["aggregate", "all", "anonymize", *["answer"] * 6, "frames", "frames", "probe", "probe",
                           "report", "videos_table"], ran
    assert finished.stat().st_mtime_ns == cluster_run.finished_mtime_ns
    assert pl.read_parquet(work / "results/tables/main.parquet")["n"].to_list() == [2 * QUESTIONS_PER_VIDEO] * 3

    # Every job of the two runs ran inside SLURM: anonymize ×2 and answer ×6 (3 methods per video) in a job
    # each, as ingest, videos_table, aggregate and report; probe ×2 in one group job, frames ×2 in another.
    logs = sorted((work / "results" / "logs").rglob("*.log"))
    assert len(logs) == 16, [str(log.relative_to(work)) for log in logs]
    job_of = {}
    for log in logs:
        match = re.search(r"SLURM_JOB_ID=(\d+)", log.read_text())
        assert match, f"{log} did not run inside a SLURM job"
        job_of[str(log.relative_to(work / "results" / "logs"))] = match.group(1)
    for stage in ("probe", "frames/uniform_512"):
        assert job_of[f"{stage}/demo_01.log"] == job_of[f"{stage}/demo_02.log"], (stage, job_of)
    assert job_of["anonymize/demo_01.log"] != job_of["anonymize/demo_02.log"]
    assert len(set(job_of.values())) == len(logs) - 2

    # ... and the result is the local run's.
    for table in ("tables/main.parquet", "tables/per_video.parquet", "videos.parquet",
                  "report/tables/paired_stats.parquet"):
        a = pl.read_parquet(work / "results" / table)
        b = pl.read_parquet(local_run / "results" / table)
        assert a.drop("path", strict=False).equals(b.drop("path", strict=False)), table
    for video, run in [(v, r) for v in ("demo_01", "demo_02") for r in ("random/none", "blind/smollm2")]:
        path = f"results/predictions/{run}/{video}.parquet"
        assert clock_free(pl.read_parquet(work / path)).equals(clock_free(pl.read_parquet(local_run / path)))


def test_served_answers_come_from_one_slurm_job_with_one_server_start_and_scancel_leaves_nothing_listening(
        cluster, tmp_path, slurm_demo, local_run, cluster_run):
    import json
    import socket
    import time

    fast = fast_overrides(slurm_demo, cluster_run.videos)  # the cluster run's config: nothing upstream reruns
    targets = [f"results/predictions/{run}/{video}.parquet" for video in ("demo_01", "demo_02")
               for run in ("random/none", "blind/smollm2", "blind_letter/smollm2")]

    def without_model_answers(workdir: Path) -> Path:
        """A copy of the cluster run's results without its model answers (predictions and response caches): what
        is left to run is the serving batch."""
        shutil.copytree(cluster_run.work, workdir, symlinks=True)
        shutil.rmtree(workdir / "results/cache/answer", ignore_errors=True)
        for path in targets:
            if "smollm2" in path:
                (workdir / path).unlink()
        return workdir

    # The served run and the cancelled one start from copies of their own and run side by side (each batch asks
    # for one of the test node's 2 CPUs), and the cancelled one's rerun starts beside the served run as soon as
    # the cancel's claims are checked: the served run's claims are checked after the cancel's, the rerun's last.
    served, cancelled = without_model_answers(tmp_path / "served"), without_model_answers(tmp_path / "cancelled")
    pool = ThreadPoolExecutor(max_workers=2)
    served_run = pool.submit(on_slurm, cluster, served, *targets, "--config", fast + SERVED)

    # scancel the batch while its server runs: the job's server is stopped, nothing listens on its port.
    cancelled_run = subprocess.Popen(snakemake_command(cancelled, *targets, "--config", fast + SERVED, slurm=True),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     env=scripts_first(cluster.env), stdin=subprocess.DEVNULL, start_new_session=True)
    kept = cancelled / "results/serving/kept"
    try:
        log_path, ready = cancelled / "results/logs/serving/smollm2.log", None
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and (ready is None or not list(kept.rglob("*.digest"))):
            text = log_path.read_text() if log_path.exists() else ""
            ready = re.search(r"server pid (\d+) at http://127\.0\.0\.1:(\d+) ready", text)
            time.sleep(0.2)
        assert ready, "the batch's server did not come up"
        assert list(kept.rglob("*.digest")), "no answer finished before the cancel"
        pid, port = int(ready.group(1)), int(ready.group(2))
        job = re.search(r"SLURM_JOB_ID=(\d+)", log_path.read_text()).group(1)
        subprocess.run(["scancel", job], env=cluster.env, check=True, timeout=30)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            queued = subprocess.run(["squeue", "-h", "-j", job, "-t", "PD,R,CG"], env=cluster.env,
                                    capture_output=True, text=True, timeout=10).stdout.strip()
            if not queued:
                break
            time.sleep(0.5)
        deadline = time.monotonic() + 30  # a cancelled job leaves the queue while its processes still unwind
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.5)
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
        (stopped,) = [json.loads(line) for line in (cancelled / "results/serving/smollm2.jsonl").read_text().splitlines()]
        assert stopped["port"] == port and stopped["exit"].startswith("stopped: SystemExit")
    except BaseException:
        stop_run(cancelled_run, cluster, cancelled)
        pool.shutdown(wait=True)
        raise
    stop_run(cancelled_run, cluster, cancelled)  # it only goes on to notice the cancelled job, and exits

    # Issue 36 item 3 (checked last, below): the rerun restores what the cancelled batch finished (Snakemake
    # deleted its outputs), with no model call for it, and starts a server only for what is left.
    import sqlite3

    finished = sorted(kept.rglob("*.digest"))
    calls = {}
    for digest in finished:
        method, _, video = digest.relative_to(kept).with_suffix("").parts
        with sqlite3.connect(cancelled / f"results/cache/answer/{method}/smollm2/{video}.sqlite") as db:
            calls[(method, video)] = db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
    (cancelled / "results/serving/smollm2.jsonl").unlink()
    rerun = pool.submit(on_slurm, cluster, cancelled, *targets, "--config", fast + SERVED)
    pool.shutdown(wait=True)  # both runs, each bounded by HARD_TIMEOUT_S

    # The served run: every smollm2 answer in one batch job, one server start, the local run's predictions.
    proc = served_run.result()
    assert proc.returncode == 0, proc.stdout[-6000:]
    batch_log = (served / "results/logs/serving/smollm2.log").read_text()
    batch_job = re.search(r"SLURM_JOB_ID=(\d+)", batch_log).group(1)
    for run in ("blind", "blind_letter"):  # every smollm2 answer ran inside the one batch job
        for video in ("demo_01", "demo_02"):
            answer_log = (served / f"results/logs/answer/{run}/smollm2/{video}.log").read_text()
            assert re.search(r"SLURM_JOB_ID=(\d+)", answer_log).group(1) == batch_job
    random_log = (served / "results/logs/answer/random/none/demo_01.log").read_text()
    assert re.search(r"SLURM_JOB_ID=(\d+)", random_log).group(1) != batch_job  # model-free runs stay per-video jobs
    starts = [json.loads(line) for line in (served / "results/serving/smollm2.jsonl").read_text().splitlines()]
    assert len(starts) == 1 and starts[0]["exit"] == "stopped: batch done" and starts[0]["answers_done"] == 4
    for path in targets:
        a, b = pl.read_parquet(served / path), pl.read_parquet(local_run / path)
        assert a["error"].null_count() == a.height
        assert clock_free(a).equals(clock_free(b)), path

    # The rerun of the cancelled batch (issue 36 item 3, above).
    proc = rerun.result()
    assert proc.returncode == 0, proc.stdout[-6000:]
    batch_log = (cancelled / "results/logs/serving/smollm2.log").read_text()
    assert f"({len(finished)} restored)" in batch_log
    for (method, video), count in calls.items():
        assert f"restored {method}/smollm2/{video}" in batch_log
        with sqlite3.connect(cancelled / f"results/cache/answer/{method}/smollm2/{video}.sqlite") as db:
            assert db.execute("SELECT COUNT(*) FROM responses").fetchone()[0] == count
    restarts = [json.loads(line) for line in (cancelled / "results/serving/smollm2.jsonl").read_text().splitlines()]
    assert len(restarts) == (1 if len(finished) < 4 else 0)
    assert not restarts or restarts[0]["answers_done"] == 4 - len(finished)  # only what was left was answered
    for path in targets:
        assert clock_free(pl.read_parquet(cancelled / path)).equals(clock_free(pl.read_parquet(local_run / path)))
