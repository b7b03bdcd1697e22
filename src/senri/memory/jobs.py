"""The ``memory_system`` stage: build (or import) one video's store of one memory system, and export senri's
captions in a system's own input layout — what ``senri memory-system build|import|export`` runs.

One Snakemake job per (system, captioner, video) writes ``results/memory_system/<system>/<captioner>/<video>/``:
first ``config.yaml`` (the stage slice it is built with, every builder model config included — a builder may add
keys to it, e.g. ``visual: skipped (no embedder configured)``), then whatever the registered class's ``build``
or ``import_release`` writes. The folder must then hold ``items.parquet`` (the interface's contract); a job
that leaves none fails naming the folder.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Mapping

import yaml

from senri.memory.store import BuildRequest, MemoryStore, store_class

log = logging.getLogger(__name__)

#: The one table every store folder has (the MemoryItem columns); systems add their own.
ITEMS_TABLE = "items.parquet"


def system_of(stage: Mapping[str, Any]) -> tuple[str, dict[str, Any], type[MemoryStore]]:
    """The system's name, its config (without the name) and its store class, from a ``memory_system`` slice."""
    system = dict(stage["memory_system"])
    name = str(system.pop("name"))
    return name, system, store_class(str(system.get("store", name)), name)


def build_request(stage: Mapping[str, Any], video: Any, out_dir: Path, captions: Path | None = None,
                  caption_cache: Path | None = None, media: Any = None, response_cache: Path | None = None
                  ) -> BuildRequest:
    """What the system's builder reads, from the stage slice: its config, the memory config, the models of
    its roles (name and config) and the job's paths."""
    name, system, _ = system_of(stage)
    models = {role: (spec["name"], spec["config"]) for role, spec in (system.get("model_configs") or {}).items()}
    return BuildRequest(video=video, system=name, system_config=system, memory_config=stage["memory"],
                        out_dir=out_dir, captions=captions, caption_cache=caption_cache, media=media, models=models,
                        response_cache=response_cache, seed=int(stage.get("seed", 0)))


def write_store(stage: Mapping[str, Any], request: BuildRequest, import_dir: Path | None = None) -> Path:
    """Build (``import_dir`` None) or import the store into ``request.out_dir``; returns its items table."""
    name, _, cls = system_of(stage)
    out = request.out_dir
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.yaml").write_text(yaml.safe_dump({"stage": "memory_system", "config": dict(stage)},
                                                    sort_keys=True, allow_unicode=True))
    if import_dir is not None:
        if not Path(import_dir).is_dir():
            raise ValueError(f"memory system {name!r}: import_dir {import_dir} is not a folder")
        cls.import_release(Path(import_dir), request)
    else:
        cls.build(request)
    items = out / ITEMS_TABLE
    if not items.is_file():
        raise ValueError(f"memory system {name!r}: {'import' if import_dir else 'build'} wrote no {ITEMS_TABLE} "
                         f"into {out}")
    log.info("%s/%s: %s store written to %s", name, request.video.video_id,
             "imported" if import_dir else "built", out)
    return items


def export_inputs(stage: Mapping[str, Any], captions: Path, video: Any, out_dir: Path) -> list[Path]:
    """senri's captions of ``video`` in the system's input layout under ``out_dir``."""
    _, system, cls = system_of(stage)
    out_dir.mkdir(parents=True, exist_ok=True)
    return cls.export_inputs(captions, video, out_dir, system)
