"""Served answer batches: one model load per batch instead of one per method × model × video job.

The answer stage is one job per (method, model, video), and each GPU job loads its model in process: at the
SENRI paper's scale (10 videos × 14 method variants × 3 models) that is 420 loads of minutes each. A model
listed in ``serving.models`` instead answers in *batches* (``serving.batch``: one per model, or one per method
× model): the batch job starts the model's server once on its own node — llama.cpp's for ``llamacpp``
configs, vLLM's OpenAI-compatible server for ``vllm`` ones, each with the engine flags the in-process engine
gets — on 127.0.0.1 at a free port with a key of its own, waits for ``/health``, and runs the batch's answers
(``senri answer … --server URL``) a few at a time (``serving.answers_at_once``), ordered by video so the
server's prefix cache serves a video's shared memory. Each answer keeps its own response cache, log,
prediction file and sidecar, exactly the files of the in-process rule: the served backend has the in-process
backend's cache identity (:mod:`senri.backends.served`), so either mode replays the other's cache.

A server that dies is the engine's failure: its answers stop without writing (exit
:data:`senri.backends.base.ENGINE_UNAVAILABLE`), the batch starts the server again — at most ``serving.max_restarts``
times — and the answers resume from their caches; then the job fails and the profile's retries take over.
Each finished answer is also kept outside the job's outputs (:data:`KEPT`), so a batch that fails or is killed
and runs again restores what it finished instead of answering it again.
Every server start is one line of ``results/serving/<batch>.jsonl`` (the batch is named by its model, or
``<model>.<method>``; written when that server stops: model, batch, host, port, pid, load seconds, start time,
exit reason).

The plan (:func:`batches`) is pure: the workflow declares one rule per batch from it, and the batch job
recomposes the same config and checks the plan's digest before it starts anything.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import secrets
import subprocess
import sys
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping, Sequence

from senri import config as cfgmod
from senri import workflow
from senri.backends.base import ENGINE_UNAVAILABLE

log = logging.getLogger(__name__)

GRANULARITIES = ("model", "method_model")


class BatchError(RuntimeError):
    """A batch could not finish: an answer failed for a reason of its own, or its server kept dying."""


@dataclass(frozen=True)
class ServedAnswer(workflow.AnswerJobFiles):
    """One answer job of a batch: the files the in-process ``answer`` rule would read and write for it."""

    inputs: Mapping[str, str]

    @property
    def kept(self) -> str:
        """Where its finished files are kept (:data:`KEPT`), without suffix."""
        return f"{KEPT}/{self.method}/{self.model}/{self.video_id}"


#: Finished answers of served batches, kept outside every rule's outputs: Snakemake deletes a job's outputs
#: before it runs and when it fails or is killed, so without a copy a batch killed after 139 of 140 answers
#: would answer all 140 again (replayed from their caches, on a freshly loaded model). A rerun restores an
#: answer whose config, code and inputs are unchanged (:func:`answer_digest`) and starts no server for it.
KEPT = "results/serving/kept"
#: The suffixes of an answer's kept files: its prediction file, its sidecar, its log, and (written last, so
#: a half-kept answer is never restored) the digest it was answered under.
KEPT_FILES = (".parquet", ".config.yaml", ".log", ".digest")


@dataclass(frozen=True)
class Batch:
    """The answers one served job runs against one server of ``model``, ordered by video, then method."""

    name: str
    model: str
    answers: tuple[ServedAnswer, ...]

    @property
    def rule_name(self) -> str:
        """The batch's Snakemake rule (``answer_served_<batch>``, non-word characters as ``_``)."""
        import re

        return "answer_served_" + re.sub(r"\W", "_", self.name)

    @property
    def outputs(self) -> list[str]:
        return [path for a in self.answers for path in (a.out, a.sidecar)]


def served_models(cfg: Mapping[str, Any]) -> list[str]:
    """``serving.models``, each checked: a selected model config of a backend a batch can serve."""
    from senri.backends.base import BackendError
    from senri.backends.served import engine_module

    serving = cfg.get("serving") or {}
    names = list(serving.get("models") or [])
    problems = []
    for name in names:
        spec = cfg["model"].get(name)
        if spec is None:
            problems.append(f"config.serving.models: {name!r} is not a selected model (selected: "
                            f"{', '.join(m for m in cfg['model'] if m != cfgmod.NO_MODEL) or 'none'})")
            continue
        try:
            engine_module({"name": name, **spec})
        except BackendError as exc:
            problems.append(f"config.serving.models: {name!r}: {exc}")
    for name, replicas in (serving.get("replicas") or {}).items():
        if name not in names:
            problems.append(f"config.serving.replicas.{name}: {name!r} is not in config.serving.models")
        elif not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 1:
            problems.append(f"config.serving.replicas.{name}: {replicas!r} is not a whole number ≥ 1")
    for name, granularity in (serving.get("batch") or {}).items():
        if name not in names:
            problems.append(f"config.serving.batch.{name}: {name!r} is not in config.serving.models")
        elif granularity not in GRANULARITIES:
            problems.append(f"config.serving.batch.{name}: {granularity!r} is not one of {', '.join(GRANULARITIES)}")
    if problems:
        raise cfgmod.ConfigError("invalid config: " + "; ".join(problems))
    return names


def video_shares(video_ids: Sequence[str], replicas: int) -> list[list[str]]:
    """The videos split into at most ``replicas`` contiguous shares of sizes differing by at most one, in order
    (contiguous: each server's prefix cache still sees one video's questions back to back)."""
    n = max(1, min(int(replicas), len(video_ids)))
    size, extra = divmod(len(video_ids), n)
    shares, start = [], 0
    for k in range(n):
        end = start + size + (1 if k < extra else 0)
        shares.append(list(video_ids[start:end]))
        start = end
    return shares


def batches(cfg: Mapping[str, Any], video_ids: Sequence[str]) -> list[Batch]:
    """The served batches of this config: per served model one batch (``model``) or one per method
    (``method_model``), each holding its answers in video order; with ``serving.replicas.<model>`` = N, each of
    those split into N batches over contiguous shares of the videos (``<name>.r<k>``: data parallel, one server
    per batch, so the model loads N times and its answers run N at once on N GPUs)."""
    plan = []
    serving = cfg.get("serving") or {}
    granularity = serving.get("batch") or {}
    replicas = serving.get("replicas") or {}
    runs = cfgmod.runs(cfg)
    for model in served_models(cfg):
        methods = [method for method, m in runs if m == model]
        groups = ([(f"{model}.{method}", [method]) for method in methods]
                  if granularity.get(model, "model") == "method_model" else [(model, methods)])
        shares = video_shares(video_ids, int(replicas.get(model, 1)))
        for name, group in groups:
            for k, share in enumerate(shares, 1):
                answers = tuple(ServedAnswer(method, model, video, workflow.answer_inputs(cfg, method, model, video))
                                for video in share for method in group)
                if answers:
                    plan.append(Batch(name if len(shares) == 1 else f"{name}.r{k}", model, answers))
    return plan


#: A model wildcard value (the workflow's model constraint).
MODEL_NAME = r"[A-Za-z0-9][A-Za-z0-9_.-]*"


def in_process_model_pattern(cfg: Mapping[str, Any]) -> str:
    """The in-process answer rule's ``model`` wildcard: any model name but a served one (whose prediction files
    the served batch rules make), so no file has two rules."""
    import re

    served = served_models(cfg)
    if not served:
        return MODEL_NAME
    return f"(?!(?:{'|'.join(re.escape(m) for m in served)})(?:/|$)){MODEL_NAME}"


def batch_mem_mb(cfg: Mapping[str, Any], batch: Batch) -> int:
    """Host memory of a batch job: the model's (its server holds it once) plus 1 GB per concurrent answer."""
    return workflow.answer_resources(cfg, batch.model)["mem_mb"] + 1000 * int(cfg["serving"]["answers_at_once"])


def batch_threads(cfg: Mapping[str, Any], batch: Batch) -> int:
    """CPUs of a batch job: its model's threads (the server's: a llama.cpp server computes on them, a vLLM
    server feeds its GPU from one) plus ``serving.cpus_per_answer`` for each concurrent answer, which decodes
    frames and renders prompts in a process of its own. Locally Snakemake caps it at ``--cores``; on SLURM it is
    the job's ``--cpus-per-task``."""
    serving = cfg["serving"]
    return workflow.answer_resources(cfg, batch.model)["threads"] + \
        int(serving.get("cpus_per_answer", 1)) * int(serving["answers_at_once"])


def answer_config(cfg: Mapping[str, Any], method: str, model: str) -> str:
    """An answer job's config slice as the canonical JSON its ``--config`` carries."""
    return cfgmod.canonical_json(cfgmod.stage_slice(cfg, "answer", method=method, model=model))


def answer_params(cfg: Mapping[str, Any], method: str, model: str) -> dict[str, str]:
    """An answer job's params, in process (rules/answer.smk) and served alike: its config slice as canonical
    JSON and its code digest (the method's and the backend's modules included)."""
    return {"config": answer_config(cfg, method, model),
            "code": workflow.code_digest("answer", **workflow.answer_code_selection(cfg, method, model))}


def batch_digest(cfg: Mapping[str, Any], batch: Batch) -> str:
    """One hash over every answer's files, config slice and code digest: the job refuses to run a plan that is
    not the one the workflow planned (a config file edited in between)."""
    digest = hashlib.sha256()
    params: dict[tuple[str, str], dict[str, str]] = {}  # per run, not per answer: a batch holds every video's
    for answer in batch.answers:
        run = (answer.method, answer.model)
        if run not in params:
            params[run] = answer_params(cfg, *run)
        digest.update(cfgmod.canonical_json({"out": answer.out, "inputs": dict(answer.inputs),
                                             **params[run]}).encode())
    return digest.hexdigest()[:16]


def answer_role_models(cfg: Mapping[str, Any], method: str) -> dict[str, Mapping[str, Any]]:
    """Role → ``{"name", "config"}`` of every model an answer of ``method`` opens besides the run's own: its
    tool models (``tool_model_configs``), the query-time roles of the memory system it reads (the store class's
    ``query_roles``: WorldMM's retriever, MAGIC-Video's time extractor, a clip embedder's text tower) and, for a
    method that re-captions (``Method.recaptions``: VideoLucy), the memory's VLM captioner (``captioner``)."""
    from senri.memory.store import MEMORY_SYSTEMS
    from senri.methods import METHODS

    spec = cfg["method"][method]
    roles: dict[str, Mapping[str, Any]] = dict(spec.get("tool_model_configs") or {})
    system = workflow.method_memory_system(cfg, method)
    if system:
        store = MEMORY_SYSTEMS.load(cfgmod.memory_systems(cfg)[system].get("store", system))
        configs = cfgmod.memory_systems(cfg)[system].get("model_configs") or {}
        roles.update({f"{system}.{role}": configs[role] for role in store.query_roles if configs.get(role)})
    captioner = cfgmod.run_captioner(cfg, method) if spec.get("uses_memory") else None
    if (getattr(METHODS.load(spec.get("implementation", method)), "recaptions", False) and captioner
            and cfgmod.captioner_config(cfg, captioner)):
        roles["captioner"] = {"name": captioner, "config": cfgmod.captioner_config(cfg, captioner)}
    return roles


def role_loads(cfg: Mapping[str, Any], method: str, model: str, served_by: Mapping[str, Any] | None) -> int:
    """Model loads one answer job makes for its roles (:func:`answer_role_models`). In process a role model is
    opened once per job unless it is the run's model by name (``RoleModels``); the captioner is always opened
    by its own caption service. Served (``served_by``: the batch server's model config), a role whose model is
    the server's reaches the server (:func:`senri.backends.served.endpoint_for`) and loads nothing."""
    from senri.backends.served import same_model

    loads, opened = 0, set()
    for role, entry in answer_role_models(cfg, method).items():
        name = str(entry["name"])
        if served_by is not None and same_model({"name": name, **entry["config"]}, served_by):
            continue
        if role != "captioner" and (name == model or name in opened):
            continue
        opened.add(name)
        loads += 1
    return loads


def load_counts(cfg: Mapping[str, Any], video_ids: Sequence[str]) -> dict[str, int]:
    """Model loads a run makes: ``in_process`` (every answer job of a model-calling method loads its model and
    the models of its roles, :func:`role_loads`) and ``served`` (the same with each served batch's one server
    start in place of its answers' loads of that model, their roles' other models still loaded per job).
    ``role_loads_served`` says how many of the served loads are role models beside the servers."""
    runs = [(method, model) for method, model in cfgmod.runs(cfg) if model != cfgmod.NO_MODEL]
    plan = batches(cfg, video_ids)
    served = {(a.method, a.model, a.video_id) for b in plan for a in b.answers}
    in_process = served_total = role_total = 0
    for method, model in runs:
        spec = {"name": model, **cfg["model"][model]}
        alone, beside = role_loads(cfg, method, model, None), role_loads(cfg, method, model, spec)
        for video in video_ids:
            in_process += 1 + alone
            if (method, model, video) in served:
                served_total += beside
                role_total += beside
            else:
                served_total += 1 + alone
    return {"answer_jobs": len(runs) * len(video_ids), "in_process": in_process,
            "served": served_total + len(plan), "batches": len(plan), "role_loads_served": role_total}


# ------------------------------------------------------------------------------------------- the batch job

def answer_command(cfg: Mapping[str, Any], answer: ServedAnswer, server_url: str) -> list[str]:
    """``senri answer`` for one answer of a batch: the in-process rule's command plus ``--server``."""
    config = answer_config(cfg, answer.method, answer.model)
    return [sys.executable, "-m", "senri", "answer", "--config", config,
            "--questions", answer.inputs["questions"], "--video-info", answer.inputs["video"],
            "--method", answer.method, "--model", answer.model,
            *workflow.answer_media_args(cfg, answer.inputs, answer.video_id, answer.method),
            "--cache", answer.cache, "--out", answer.out, "--server", server_url]


@dataclass
class ServerStart:
    """One line of ``results/serving/<batch>.jsonl``."""

    model: str
    batch: str
    host: str
    port: int | None
    pid: int | None
    load_s: float | None
    started_at: str
    exit: str = "running"
    answers_done: int = 0
    answers_left: int = 0

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as out:  # one short append per start: whole lines even with two batches of a model
            out.write(json.dumps(self.__dict__, sort_keys=True) + "\n")


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def run_batch(cfg: Mapping[str, Any], batch: Batch, workdir: Path = Path(".")) -> None:
    """Start ``batch.model``'s server, run every unfinished answer of the batch against it, restart the
    server (bounded) when it dies, and stop it whatever happens (SIGTERM from Snakemake or ``scancel``
    included: :class:`~senri.backends.server.ManagedServer` turns it into SystemExit)."""
    from senri.backends.base import BackendError
    from senri.backends.served import SERVER_KEY_ENV, engine_module
    from senri.backends.server import ManagedServer, ServerError, require_executable
    from senri.secrets import register

    serving = cfg["serving"]
    model_config = {"name": batch.model, **cfg["model"][batch.model]}
    engine = engine_module(model_config)
    key = secrets.token_urlsafe(32)
    register(key)
    try:  # what the engine's server needs in its environment (a served vLLM video model: senri's video loader)
        engine_env = getattr(engine, "server_env", lambda config: {})(model_config)
    except BackendError as exc:
        raise BatchError(f"batch {batch.name}: {exc}") from None
    env = {**os.environ, SERVER_KEY_ENV: key, "VLLM_API_KEY": key, **engine_env}
    record_path = workdir / "results" / "serving" / f"{batch.name}.jsonl"  # one per batch: no two jobs append to one
    server_log = workdir / "results" / "logs" / "serving" / f"{batch.name}.server.log"
    server_log.parent.mkdir(parents=True, exist_ok=True)
    command = engine.server_command(model_config, SERVER_KEY_ENV)
    try:  # no restart can help: say so before any start
        require_executable(command, env)
    except ServerError:
        raise BatchError(f"batch {batch.name}: the {batch.model} server's executable {command[0]!r} is not on PATH "
                         f"(model config backend {model_config['backend']!r}); install it in the job's environment"
                         ) from None
    pending = [a for a in batch.answers if not ((workdir / a.out).exists() and (workdir / a.sidecar).exists())]
    restored = [a for a in pending if restore_answer(cfg, a, workdir)]
    pending = [a for a in pending if a not in restored]
    for answer in restored:
        log.info("restored %s/%s/%s: kept from an earlier run of this batch (same config, code and inputs)",
                 answer.method, answer.model, answer.video_id)
    log.info("batch %s: %d of %d answer(s) to run against one %s server (%d restored)", batch.name, len(pending),
             len(batch.answers), model_config["backend"], len(restored))
    for answer in pending:  # each answer's log starts afresh, as the in-process rule's does; restarts append
        (workdir / answer.log).parent.mkdir(parents=True, exist_ok=True)
        (workdir / answer.log).write_bytes(b"")
    starts = 0
    while pending:
        if starts > int(serving["max_restarts"]):
            why = (f"batch {batch.name}: the {batch.model} server stopped answering {starts} time(s) "
                   f"(serving.max_restarts={serving['max_restarts']}); {len(pending)} answer(s) left; "
                   f"server log {server_log}")
            if serving.get("on_dead_server", "error_rows") == "fail":
                raise BatchError(why)
            for answer in pending:  # what the server did not answer costs its questions; the run goes on
                write_failed_answer(cfg, answer, ENGINE_UNAVAILABLE, workdir, reason=why)
            log.error("%s; error rows written for them (serving.on_dead_server=error_rows)", why)
            break
        starts += 1
        server = ManagedServer(command, health_path="/health",
                               startup_timeout_s=float(serving["startup_timeout_s"]), stop_grace_s=10.0,
                               log_path=server_log, env=env, api_key=key)
        record = ServerStart(batch.model, batch.name, server.host, None, None, None, _now(),
                             answers_left=len(pending))
        started = time.perf_counter()
        try:
            try:
                server.start()
            except ServerError as exc:
                record.exit = f"failed to start: {str(exc).splitlines()[0]}"
                log.error("batch %s: %s", batch.name, exc)
                continue
            assert server.process is not None
            record.port, record.pid = server.port, server.process.pid
            record.load_s = round(time.perf_counter() - started, 3)
            log.info("batch %s: server pid %d at %s ready in %.1f s (start %d)", batch.name, record.pid, server.url,
                     record.load_s, starts)
            pending, failed = _run_answers(cfg, pending, server, workdir, int(serving["answers_at_once"]), env)
            record.answers_done = record.answers_left - len(pending) - len(failed)
            record.answers_left = len(pending) + len(failed)
            code = server.process.poll() if server.process is not None else None
            record.exit = (f"died (exit code {code})" if code is not None else
                           "restarted: stopped answering" if pending else "stopped: batch done")
            for answer, code in failed:  # its own failure costs its questions, never the batch's other answers
                write_failed_answer(cfg, answer, code, workdir)
            if failed:
                record.exit = (f"stopped: batch done, {len(failed)} answer(s) failed for a reason of their own "
                               "(error rows written)" if not pending else record.exit)
        except BaseException as exc:
            if record.exit in ("running",) or isinstance(exc, (SystemExit, KeyboardInterrupt)):
                record.exit = f"stopped: {type(exc).__name__} {exc}".strip()
            raise
        finally:
            server.stop()
            record.write(record_path)
    log.info("batch %s: done with %d server start(s)", batch.name, starts)


def _stamp(path: Path) -> Any:
    """What says a file (or each file of a folder) changed: size and modification time, as Snakemake's own
    rerun check reads files (a video of hours is not hashed)."""
    if path.is_dir():
        return sorted((str(f.relative_to(path)), f.stat().st_size, f.stat().st_mtime_ns)
                      for f in path.rglob("*") if f.is_file())
    return [path.stat().st_size, path.stat().st_mtime_ns] if path.exists() else None


def answer_digest(cfg: Mapping[str, Any], answer: ServedAnswer, workdir: Path) -> str:
    """The answer's config slice, code digest, files and the stamps of its inputs and of its response cache: a
    kept answer is restored only under the same digest (a changed config, code or input answers it again, and
    so does a deleted or changed response cache: whoever removes a cache to get fresh calls gets them)."""
    stamps = {name: _stamp(workdir / path) for name, path in sorted(answer.inputs.items())}
    stamps["response_cache"] = _stamp(workdir / answer.cache)
    identity = {"out": answer.out, "inputs": dict(answer.inputs), "stamps": stamps,
                **answer_params(cfg, answer.method, answer.model)}
    return hashlib.sha256(cfgmod.canonical_json(identity).encode()).hexdigest()


def keep_answer(cfg: Mapping[str, Any], answer: ServedAnswer, workdir: Path) -> None:
    """Copy a finished answer's prediction file, sidecar and log to :data:`KEPT`, its digest last."""
    import shutil

    kept = workdir / answer.kept
    kept.parent.mkdir(parents=True, exist_ok=True)
    for source, suffix in ((answer.out, ".parquet"), (answer.sidecar, ".config.yaml"), (answer.log, ".log")):
        if (workdir / source).exists():
            shutil.copyfile(workdir / source, kept.with_name(kept.name + suffix))
    digest = kept.with_name(kept.name + ".digest")
    partial = digest.with_name(digest.name + ".part")
    partial.write_text(answer_digest(cfg, answer, workdir))
    partial.replace(digest)


def restore_answer(cfg: Mapping[str, Any], answer: ServedAnswer, workdir: Path) -> bool:
    """Put a kept answer back in place when it was answered under the current digest; False otherwise (a
    changed config, code or input, or nothing kept)."""
    import shutil

    kept = workdir / answer.kept
    files = {suffix: kept.with_name(kept.name + suffix) for suffix in KEPT_FILES}
    if not all(files[s].exists() for s in (".parquet", ".config.yaml", ".digest")):
        return False
    if files[".digest"].read_text().strip() != answer_digest(cfg, answer, workdir):
        return False
    for suffix, target in ((".parquet", answer.out), (".config.yaml", answer.sidecar), (".log", answer.log)):
        if files[suffix].exists():
            (workdir / target).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(files[suffix], workdir / target)
    return True


def write_failed_answer(cfg: Mapping[str, Any], answer: ServedAnswer, code: int, workdir: Path,
                        reason: str | None = None) -> None:
    """An answer whose job failed for a reason of its own (a corrupt input or cache, a method that cannot start),
    or that its server never answered (``reason``: it died past ``serving.max_restarts``): its prediction file
    with one error row per question, naming the exit code or reason and the end of its log, and its sidecar —
    the in-process rule's files, so the batch's other answers stand and the failure counts wrong in the tables.
    Fixing the cause and deleting the file (or ``--forcerun``) answers it again."""
    from senri.answer import failed_job_rows
    from senri.records import Prediction, Question, read_table, write_table

    stage = json.loads(answer_config(cfg, answer.method, answer.model))  # as the answer job reads it
    log_path = workdir / answer.log
    tail = " | ".join(log_path.read_text(errors="replace").strip().splitlines()[-3:]) if log_path.exists() else ""
    error = (f"not answered: {reason}" if reason else
             f"answer job failed (exit {code}) in served batch; log {answer.log}: {tail[-400:]}")
    questions = read_table(workdir / answer.inputs["questions"], Question)
    rows = failed_job_rows(questions, answer.video_id, stage, error)
    write_table(rows, workdir / answer.out, Prediction)
    cfgmod.write_sidecar(workdir / answer.out, "answer", stage)
    log.error("%s/%s/%s: %s; %d error row(s) written", answer.method, answer.model, answer.video_id, error,
              rows.height)


def _run_answers(cfg: Mapping[str, Any], answers: list[ServedAnswer], server: Any, workdir: Path, at_once: int,
                 env: Mapping[str, str]) -> tuple[list[ServedAnswer], list[tuple[ServedAnswer, int]]]:
    """Run ``answers`` (in order, ``at_once`` at a time) against ``server``; return those to run again on a new
    server (their engine went away) and those that failed for a reason of their own, with their exit codes.
    Once the server is gone, answers not yet started are not started."""
    processes: dict[int, subprocess.Popen[bytes]] = {}

    def run(index: int, answer: ServedAnswer) -> int:
        if server.process is None or server.process.poll() is not None:
            return ENGINE_UNAVAILABLE
        log_path = workdir / answer.log
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("ab") as out:
            process = subprocess.Popen(answer_command(cfg, answer, server.url), cwd=workdir, env=dict(env),
                                       stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
            processes[index] = process
            return process.wait()

    again: list[int] = []
    failed: list[tuple[ServedAnswer, int]] = []
    pool = ThreadPoolExecutor(max_workers=at_once, thread_name_prefix="answer")
    try:
        futures: dict[Future[int], int] = {pool.submit(run, i, a): i for i, a in enumerate(answers)}
        remaining = set(futures)
        while remaining:
            # A short wait, so SIGTERM (SystemExit in this, the main thread) is handled at once.
            done, remaining = wait(remaining, timeout=1.0, return_when=FIRST_COMPLETED)
            for future in done:
                index, code = futures[future], future.result()
                answer = answers[index]
                if code == ENGINE_UNAVAILABLE:
                    again.append(index)
                elif code != 0:
                    failed.append((answer, code))
                else:
                    keep_answer(cfg, answer, workdir)
                    log.info("answered %s/%s/%s", answer.method, answer.model, answer.video_id)
    finally:
        for process in processes.values():  # on SystemExit: the answers stop with the batch
            if process.poll() is None:
                process.terminate()
        pool.shutdown(wait=True, cancel_futures=True)
    return [answers[i] for i in sorted(again)], failed


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m senri.serving --batch NAME --digest D [--overrides JSON]``: the served rule's job."""
    import argparse

    parser = argparse.ArgumentParser(description="Run one served answer batch (rules/serving.smk).")
    parser.add_argument("--overrides", default=os.environ.get("SENRI_OVERRIDES", "[]"),
                        help="the run's Hydra overrides as a JSON list (default: $SENRI_OVERRIDES, which the "
                             "workflow sets)")
    parser.add_argument("--batch", required=True)
    parser.add_argument("--digest", help="the plan's digest as the workflow computed it")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        stream=sys.stderr)
    from senri.secrets import scrub_logs

    scrub_logs()
    log.info("senri serving batch %s on %s (pid %d, SLURM_JOB_ID=%s)", args.batch, os.uname().nodename, os.getpid(),
             os.environ.get("SLURM_JOB_ID", "none"))
    cfg = cfgmod.compose(json.loads(args.overrides))
    plan = {b.name: b for b in batches(cfg, workflow.planned_video_ids(cfg))}
    if args.batch not in plan:
        print(f"senri serving: no batch {args.batch!r} in this config (batches: {', '.join(plan) or 'none'})",
              file=sys.stderr)
        return 2
    batch = plan[args.batch]
    if args.digest and batch_digest(cfg, batch) != args.digest:
        print(f"senri serving: batch {args.batch}: the config or code changed since the workflow planned it; "
              "run snakemake again", file=sys.stderr)
        return 2
    try:
        run_batch(cfg, batch)
    except BatchError as exc:
        print(f"senri serving: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
