"""The release worker end to end: a real separate virtual environment built from pins (offline, from a wheel this
test makes), a stub "release checkout" (a tiny git repo), the stub model adapter, and the failure paths (a worker
crash and an adapter error become per-request failures, a bad pin names its file and line, a load failure stops
the job). One environment is built per module (a few seconds) and reused by every test here."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import subprocess
import threading
import zipfile
from pathlib import Path

import pytest

from senri.backends import BACKENDS
from senri.backends.base import BackendError, ChatRequest, FramesPart, ImagePart, Message
from senri.backends.cache import request_key
from senri.backends.worker import ReleaseWorkerBackend
from senri.backends.worker_env import EnvironmentBuildError, ensure_environment, read_pins

# A 1×1 and a 2×1 PNG (their sizes are read back by the stub from the files the worker received).
PNG_1x1 = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==")


def png(width: int, height: int) -> bytes:
    import zlib
    raw = b"".join(b"\x00" + b"\x00\x00\x00" * width for _ in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        import struct
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    import struct
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def make_wheel(folder: Path, name: str = "senri_stub_dep", version: str = "1.0") -> Path:
    """A pure-Python wheel pip installs offline (``--no-index --find-links``)."""
    dist = f"{name}-{version}.dist-info"
    files = {f"{name}/__init__.py": f"VERSION = {version!r}\n".encode(),
             f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: {version}\n".encode(),
             f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: senri-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = "".join(f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},"
                     f"{len(data)}\n" for path, data in files.items()) + f"{dist}/RECORD,,\n"
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        for member, data in files.items():
            wheel.writestr(member, data)
        wheel.writestr(f"{dist}/RECORD", record)
    return path


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("worker")
    wheels = root / "wheels"
    wheels.mkdir()
    make_wheel(wheels)
    pins = root / "stub.txt"
    pins.write_text("# the stub model's environment\nsenri-stub-dep==1.0\n")
    checkout = root / "release"
    (checkout / "stubrelease").mkdir(parents=True)
    (checkout / "stubrelease" / "__init__.py").write_text("VALUE = 'from the checkout'\n")
    git = ["git", "-C", str(checkout), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(checkout)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "stub release"], check=True)
    commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    config = {"backend": "release_worker", "model": "stub/checkpoint", "env": "stub", "pins": str(pins),
              "pip_args": ["--no-index", "--find-links", str(wheels)], "env_cache": str(root / "envs"),
              "release_checkout": str(checkout), "adapter": "stub_model:StubModel",
              "adapter_options": {"release_module": "stubrelease", "dependency": "senri-stub-dep",
                                  "crash_on": "CRASH", "fail_on": "FAIL", "sleep_on": "SLOW", "sleep_s": 30},
              "startup_timeout_s": 60, "request_timeout_s": 20}
    return {"root": root, "pins": pins, "checkout": checkout, "commit": commit, "config": config}


def question(text: str, frames: int = 2) -> ChatRequest:
    part = FramesPart(frames=tuple(png(4 + i, 3) for i in range(frames)), rate=0.5, indices=tuple(range(frames)),
                      times_s=tuple(2.0 * i for i in range(frames)))
    return ChatRequest(messages=(Message("user", ("", part, text)),), max_tokens=16, top_k=20)


def test_worker_answers_from_its_own_environment_and_checkout(world):
    backend = BACKENDS.load("release_worker")(world["config"])
    assert isinstance(backend, ReleaseWorkerBackend)
    try:
        first = backend.complete(question("Which colour? A. red B. blue"))
        assert first.error is None and first.text in {"A.", "B.", "C.", "D."}
        info = backend._worker.hello["info"]
        env = backend.environment()
        # the interpreter is the built environment's, the release module is the checkout's, the pin installed
        assert Path(info["python"]).parent == env.python.parent
        assert info["release_file"].startswith(str(world["checkout"]))
        assert info["release_value"] == "from the checkout" and info["dependency_version"] == "1.0"
        # deterministic on the content: the same request answers the same, another text (or frames) may not
        assert backend.complete(question("Which colour? A. red B. blue")).text == first.text
        assert first.prompt_tokens == len("Which colour? A. red B. blue".split()) + 72
        # the generation settings and the frames arrive (the stub echoes them into a side channel in its reply)
        payload = backend.wire_request(question("x", frames=3))
        frames = payload["messages"][0]["content"][1]["frames"]
        assert frames["rate"] == 0.5 and frames["indices"] == [0, 1, 2] and len(frames["paths"]) == 3
        assert payload["generation"]["top_k"] == 20 and payload["generation"]["max_tokens"] == 16
        reply = backend._worker.call(payload, 20)
        assert reply["frames"] == 3 and reply["frame_sizes"] == [[4, 3], [5, 3], [6, 3]]
    finally:
        backend.close()
    assert backend._worker is None


def test_identity_holds_pins_commit_and_protocol(world, tmp_path):
    backend = ReleaseWorkerBackend(world["config"])
    identity = backend.identity
    assert identity["release_commit"] == world["commit"]
    assert identity["pins_sha256"] == hashlib.sha256(b"senri-stub-dep==1.0").hexdigest()
    assert identity["protocol"] == 1 and identity["adapter"] == "stub_model:StubModel"
    key = request_key(identity, question("q"))
    # another pin, or an edited checkout, is another cache entry
    other_pins = tmp_path / "other.txt"
    other_pins.write_text("senri-stub-dep==1.0\nsenri-other==2.0\n")
    assert request_key(ReleaseWorkerBackend({**world["config"], "pins": str(other_pins)}).identity,
                       question("q")) != key
    (world["checkout"] / "stubrelease" / "__init__.py").write_text("VALUE = 'edited'\n")
    try:
        dirty = ReleaseWorkerBackend(world["config"]).identity["release_commit"]
        assert dirty.startswith(world["commit"] + "+dirty.")
    finally:
        subprocess.run(["git", "-C", str(world["checkout"]), "checkout", "-q", "--", "."], check=True)
    # the request side: top_k and the frames' metadata are in the key
    assert request_key(identity, question("q")) != request_key(
        identity, ChatRequest(messages=question("q").messages, max_tokens=16))


def test_environment_is_built_once_and_shared_under_the_lock(world):
    config = world["config"]
    envs = []
    threads = [threading.Thread(target=lambda: envs.append(ensure_environment(
        "stub", world["pins"], Path(config["env_cache"]), None, config["pip_args"]))) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({e.path for e in envs}) == 1 and (envs[0].path / "senri-env.json").is_file()
    assert sorted(p.name for p in Path(config["env_cache"]).iterdir() if not p.name.endswith(".lock")) == [
        envs[0].key]


def test_crash_and_adapter_error_are_per_request_failures(world):
    backend = ReleaseWorkerBackend(world["config"])
    try:
        crashed = backend.complete(question("CRASH now"))
        assert crashed.text == "" and "exited with code 7" in crashed.error
        failed = backend.complete(question("FAIL please"))
        assert "adapter" in failed.error and "stub adapter asked to fail" in failed.error
        assert backend.complete(question("fine")).error is None  # a fresh worker took over after the crash
    finally:
        backend.close()


def test_timeout_is_a_per_request_failure(world):
    backend = ReleaseWorkerBackend({**world["config"], "request_timeout_s": 1})
    try:
        slow = backend.complete(question("SLOW"))
        assert "timed out after 1 s" in slow.error
    finally:
        backend.close()


def test_bad_pin_names_file_and_line(world, tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("# ok\nsenri-stub-dep==1.0\ntorch>=2.0\n")
    with pytest.raises(EnvironmentBuildError, match=rf"{bad}:3: 'torch>=2.0' is not a pin"):
        ReleaseWorkerBackend({**world["config"], "pins": str(bad)})
    missing = tmp_path / "missing.txt"
    missing.write_text("senri-stub-dep==1.0\nsenri-absent==9.9\n")
    with pytest.raises(EnvironmentBuildError, match=rf"{missing}:2: 'senri-absent==9.9': pip could not install"):
        ensure_environment("stub", missing, tmp_path / "envs", None, world["config"]["pip_args"])
    assert not any((tmp_path / "envs").glob("*/senri-env.json"))  # nothing half-built is left as done
    assert [p.name for p in read_pins(world["pins"])] == ["senri-stub-dep"]


def test_worker_that_cannot_load_stops_the_job(world):
    backend = ReleaseWorkerBackend({**world["config"], "adapter_options": {"release_module": "no_such_release"}})
    try:
        with pytest.raises(BackendError, match="could not load its model: ModuleNotFoundError"):
            backend.complete(question("q"))
    finally:
        backend.close()


def test_images_travel_as_files(world):
    backend = ReleaseWorkerBackend(world["config"])
    try:
        payload = backend.wire_request(ChatRequest(messages=(Message("user", (ImagePart(PNG_1x1, 1.5), "q")),)))
        image = payload["messages"][0]["content"][0]
        assert Path(image["image"]).read_bytes() == PNG_1x1 and image["time_s"] == 1.5
    finally:
        backend.close()


def test_an_edited_adapter_is_another_cache_entry(world, tmp_path, monkeypatch):
    from senri.backends import worker

    before = ReleaseWorkerBackend(world["config"]).identity["worker_code"]
    copy = tmp_path / "workers"
    copy.mkdir()
    for name in ("worker_main.py", "stub_model.py"):
        (copy / name).write_text((worker.WORKERS_DIR / name).read_text())
    monkeypatch.setattr(worker, "WORKERS_DIR", copy)
    monkeypatch.setattr(worker, "WORKER_MAIN", copy / "worker_main.py")
    assert ReleaseWorkerBackend(world["config"]).identity["worker_code"] == before
    (copy / "stub_model.py").write_text((copy / "stub_model.py").read_text() + "\n# edited\n")
    assert ReleaseWorkerBackend(world["config"]).identity["worker_code"] != before
