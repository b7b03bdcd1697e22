"""The pinned Python environment a release worker runs in, built by senri from ``envs/<name>.txt``.

Some releases' models load only under their own transformers (Cambrian-S on 4.37/4.39, InternVideo3 and
VideoChat3 on 4.57.x, Light-Omni's patched Qwen2.5-Omni), which cannot sit beside senri's. Such a model runs in
a worker process (:mod:`senri.backends.worker`) whose interpreter is a virtual environment made here:

- **Pins** are one requirement per line, ``name==version`` (extras and an environment marker allowed) or
  ``name @ url``; ``#`` starts a comment. Anything else is refused before pip runs, naming the file and line
  (:func:`read_pins`), and a pin pip cannot satisfy is named the same way (:class:`EnvironmentBuildError`).
- **Content-addressed**: the folder is ``<cache>/<name>-<digest>`` where the digest covers the pins' normalised
  lines, the base interpreter's version and the pip arguments (:func:`environment_key`), so equal pins share one
  environment and a changed pin builds a new one.
- **Once per node**: the cache folder defaults to node-local disk (``$SENRI_ENV_CACHE``, else
  ``/tmp/senri-envs-<uid>``); parallel jobs on one node take an exclusive ``flock`` on ``<folder>.lock`` and the
  first builds while the others wait, then find the completion marker (``senri-env.json``) and reuse it. A build
  that died half-way leaves no marker and is redone.
- The release's own package is never installed into it nor copied into senri: the worker puts the user's
  checkout on its ``PYTHONPATH`` (:func:`checkout_commit` records which commit that was).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

#: Where the project's pin files live: ``envs/<name>.txt`` at the project root.
PROJECT_ROOT = Path(__file__).resolve().parents[3]
ENVS_DIR = PROJECT_ROOT / "envs"
MARKER = "senri-env.json"

_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?"
_PIN = re.compile(rf"^(?P<name>{_NAME})(?:\[[A-Za-z0-9._,\s-]+\])?\s*"
                  rf"(?:==\s*(?P<version>[A-Za-z0-9.+!*_-]+)|@\s*(?P<url>\S+))\s*(?:;\s*(?P<marker>.+))?$")


class EnvironmentBuildError(RuntimeError):
    """A pin file senri refuses, or pip could not build the environment from it; the message names the file
    (and the line, where one is to blame)."""


@dataclass(frozen=True)
class Pin:
    name: str
    line: str
    lineno: int


@dataclass(frozen=True)
class WorkerEnvironment:
    """A built environment: its interpreter and what identifies it (the cache identity's ``env`` fields)."""

    name: str
    path: Path
    pins_sha256: str
    key: str

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"


def canonical_name(name: str) -> str:
    """PEP 503's normalised project name (``Foo_Bar`` → ``foo-bar``), for matching pip's messages to pins."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pins_path(name: str, override: str | Path | None = None) -> Path:
    """The pin file of environment ``name``: ``override`` if given, else ``envs/<name>.txt``."""
    return Path(override) if override else ENVS_DIR / f"{name}.txt"


def read_pins(path: Path) -> list[Pin]:
    """The pins of ``path``, each checked to be an exact pin; an error names the file and line otherwise."""
    if not path.is_file():
        raise EnvironmentBuildError(f"{path}: no such pin file (an environment's pins are envs/<name>.txt)")
    pins = []
    for lineno, raw in enumerate(path.read_text().splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        match = _PIN.match(line)
        if match is None:
            raise EnvironmentBuildError(
                f"{path}:{lineno}: {raw.strip()!r} is not a pin; each line is one requirement pinned exactly "
                f"(name==version, name[extra]==version; marker, or name @ url)")
        pins.append(Pin(canonical_name(match["name"]), line, lineno))
    return pins


def pins_digest(pins: Sequence[Pin]) -> str:
    """sha256 over the pins' normalised lines in file order (comments and blank lines do not count)."""
    return hashlib.sha256("\n".join(pin.line for pin in pins).encode()).hexdigest()


def interpreter_version(python: str) -> str:
    """``python``'s full version string (the environment's base interpreter is part of its identity)."""
    try:
        out = subprocess.run([python, "-c", "import sys; print(sys.version)"], capture_output=True, text=True,
                             check=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        raise EnvironmentBuildError(f"base interpreter {python!r} for the worker environment does not run: "
                                    f"{exc}") from None
    return out.stdout.strip()


def environment_key(name: str, pins: Sequence[Pin], python_version: str, pip_args: Sequence[str]) -> str:
    """The environment's folder name: ``<name>-<16 hex>`` over pins, interpreter version and pip arguments."""
    payload = json.dumps({"pins": pins_digest(pins), "python": python_version, "pip_args": list(pip_args)},
                         sort_keys=True)
    return f"{name}-{hashlib.sha256(payload.encode()).hexdigest()[:16]}"


def default_cache_root() -> Path:
    """Node-local by default, so a cluster builds each environment once per node."""
    return Path(os.environ.get("SENRI_ENV_CACHE") or f"/tmp/senri-envs-{os.getuid()}")


def ensure_environment(name: str, pins_file: Path, cache_root: Path | None = None, python: str | None = None,
                       pip_args: Sequence[str] = (), timeout_s: float = 7200.0) -> WorkerEnvironment:
    """The built environment for ``pins_file``, building it first if this node has none (under a lock)."""
    pins = read_pins(pins_file)
    base = python or sys.executable
    key = environment_key(name, pins, interpreter_version(base), pip_args)
    root = cache_root or default_cache_root()
    root.mkdir(parents=True, exist_ok=True)
    target = root / key
    env = WorkerEnvironment(name, target, pins_digest(pins), key)
    with open(root / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also if this process dies
        if (target / MARKER).is_file():
            return env
        shutil.rmtree(target, ignore_errors=True)  # a build that died half-way
        _build(env, pins, pins_file, base, pip_args, timeout_s)
        (target / MARKER).write_text(json.dumps({"name": name, "pins_sha256": env.pins_sha256,
                                                 "pins_file": str(pins_file), "python": base}, indent=1))
    return env


def _build(env: WorkerEnvironment, pins: Sequence[Pin], pins_file: Path, python: str, pip_args: Sequence[str],
           timeout_s: float) -> None:
    """``python -m venv`` without pip of its own, then senri's pip installs the pins into it (``--python``)."""
    def run(command: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)

    made = run([python, "-m", "venv", "--without-pip", str(env.path)])
    if made.returncode != 0:
        raise EnvironmentBuildError(f"{pins_file}: could not create the environment {env.path} with {python}:\n"
                                    f"{made.stderr[-2000:]}")
    if not pins:
        return
    installed = run([sys.executable, "-m", "pip", "--python", str(env.python), "install", "--no-input",
                     "--disable-pip-version-check", *pip_args, *(pin.line for pin in pins)])
    if installed.returncode != 0:
        shutil.rmtree(env.path, ignore_errors=True)
        output = installed.stdout + installed.stderr
        culprit = _blamed_pin(output, pins)
        where = f"{pins_file}:{culprit.lineno}: {culprit.line!r}" if culprit else str(pins_file)
        raise EnvironmentBuildError(f"{where}: pip could not install the environment {env.key}:\n{output[-2000:]}")


def _blamed_pin(pip_output: str, pins: Sequence[Pin]) -> Pin | None:
    """The pin pip's message names ("No matching distribution found for x==1", "Could not find a version that
    satisfies the requirement x==1", "Cannot install x==1 …"), if any."""
    for match in re.finditer(r"(?:found for|requirement|Cannot install)\s+([A-Za-z0-9][A-Za-z0-9._-]*)",
                             pip_output):
        named = canonical_name(match.group(1))
        for pin in pins:
            if pin.name == named:
                return pin
    return None


def checkout_commit(path: Path) -> str:
    """The commit of the release checkout at ``path``; ``<commit>+dirty.<sha256[:12] of git diff HEAD>`` when it
    has uncommitted changes to tracked files, so an edited checkout never shares a cache entry with a clean one."""
    if not path.is_dir():
        raise EnvironmentBuildError(f"release_checkout {path}: no such folder (a local git checkout of the "
                                    f"release)")

    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", "-C", str(path), *args], capture_output=True, text=True, check=True,
                                  timeout=60).stdout
        except (OSError, subprocess.CalledProcessError) as exc:
            raise EnvironmentBuildError(f"release_checkout {path}: not a git checkout ({exc})") from None

    commit = git("rev-parse", "HEAD").strip()
    diff = git("diff", "HEAD")
    return f"{commit}+dirty.{hashlib.sha256(diff.encode()).hexdigest()[:12]}" if diff else commit
