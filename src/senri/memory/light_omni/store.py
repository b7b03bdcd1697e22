"""Light-Omni's store behind the memory interface (issue 62 item 3; spec U-1, U-2): the streamed memory of one
video — logs, short-term memory, the archived episodic items and semantic facts with their Qwen3-Embedding
vectors, the face profiles — built by streaming the video's 1-s units through the release's own model.

Folder (``results/memory_system/light_omni/<captioner>/<video>/``; the captions are not read: Light-Omni
captions with its own model, U-3):

- ``state.json`` — the session (convs without their raw paths' folders, logs, STM, LTM, profiles, the semantic
  and episodic items in index order) and ``vectors.npz`` (``semantic``, ``episodic``: float32, one row per item);
- ``items.parquet`` — the interface's items: semantic facts (anchored at their log's span), episodic items (one
  per archived log, anchored) and face profiles (unanchored), seconds = TS − START_TIME (end + 1 s);
- ``config.yaml`` — the build's record: units, the audio read (the track or 1-s silences), segments, VAD resets,
  model calls by op, fact order, and ``lost`` when the build failed (the release's worker dies and the video's
  questions vanish, L-L4/L-Q1; senri keeps the video and fails each of its questions with the reason).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any, ClassVar, Collection, Mapping

import numpy as np
import polars as pl
import yaml

from senri.memory.light_omni.memory import DASH, FACT_ORDERS, LightOmniMemory, Profiles, Retriever
from senri.memory.light_omni.replies import seconds_since_start
from senri.memory.store import BuildRequest, MemoryItem, MemoryStore, SearchContext, require_store_files

STATE_FILE = "state.json"
VECTORS_FILE = "vectors.npz"
ITEMS_FILE = "items.parquet"
CONFIG_FILE = "config.yaml"


def _span(start: str, end: str) -> tuple[float, float]:
    return seconds_since_start(start), seconds_since_start(end) + 1.0


def memory_items(state: Mapping[str, Any]) -> list[MemoryItem]:
    """U-1: the memory as MemoryItem rows."""
    items: list[MemoryItem] = []
    for i, fact in enumerate(state.get("semantic", [])):
        times, _, text = fact.partition(": ")
        start, _, end = times.partition(DASH)
        try:
            s, e = _span(start, end)
        except ValueError:
            s = e = None
        items.append(MemoryItem(f"semantic:{i}", "semantic", fact, s, e, level="fact"))
    for i, item in enumerate(state.get("episodic", [])):
        s, e = _span(item["start_time"], item["end_time"])
        text = (f"{item['start_time']}{DASH}{DASH}{item['end_time']}\nVisual description: "
                f"{item['visual description']}\nAudio description: {item['audio description']}")
        items.append(MemoryItem(f"episodic:{i}", "episodic", text, s, e, level="log"))
    for face, profile in sorted((state.get("profiles") or {}).items()):
        if face.startswith("<face_"):
            items.append(MemoryItem(f"profile:{face}", "profile", f"{face}: {profile}"))
    return items


def save_memory(memory: LightOmniMemory, out: Path) -> dict[str, Any]:
    state = {"convs": memory.convs, "logs": memory.logs, "stm": memory.stm, "ltm": memory.ltm,
             "profiles": memory.profiles.meta, "semantic": memory.retriever.semantic.items,
             "episodic": memory.retriever.episodic.items}
    (out / STATE_FILE).write_text(json.dumps(state, ensure_ascii=False))
    with open(out / VECTORS_FILE, "wb") as handle:
        np.savez(handle, semantic=memory.retriever.semantic.vectors, episodic=memory.retriever.episodic.vectors)
    return state


def load_memory(folder: Path, model: Any, fact_order: str = "seeded", seed: int = 0) -> LightOmniMemory:
    """The stored session as a :class:`LightOmniMemory` whose model is ``model`` (the answer job's worker)."""
    state = json.loads((folder / STATE_FILE).read_text())
    retriever = Retriever(model.embed_documents if model is not None else _no_model)
    with np.load(folder / VECTORS_FILE, allow_pickle=False) as data:
        for index, name in ((retriever.semantic, "semantic"), (retriever.episodic, "episodic")):
            index.items = list(state[name])
            index.vectors = data[name].astype(np.float32)
            if len(index.items) != len(index.vectors):
                raise ValueError(f"{folder / VECTORS_FILE}: field {name} has {len(index.vectors)} rows for "
                                 f"{len(index.items)} items in {STATE_FILE}")
    memory = LightOmniMemory(model, fact_order=fact_order, seed=seed, retriever=retriever,
                             profiles=Profiles(state.get("profiles")))
    memory.convs, memory.logs, memory.stm, memory.ltm = state["convs"], state["logs"], state["stm"], state["ltm"]
    return memory


def _no_model(texts):
    raise RuntimeError("Light-Omni store opened without its model: documents cannot be embedded")


def open_engine(models: Mapping[str, tuple[str, Mapping[str, Any]]], where: str):
    """The ``omni`` role's model: a release_worker config running Light-Omni's adapter."""
    from senri.memory.light_omni.engine import WorkerOmniModel

    role = models.get("omni")
    if not role:
        raise ValueError(f"{where}: no model config for the omni role (Light-Omni's patched Qwen2.5-Omni, "
                         "config/model/light_omni.yaml)")
    name, config = role
    if config.get("backend") != "release_worker":
        raise ValueError(f"{where}: the omni model {name!r} must be a release_worker config running "
                         f"light_omni:LightOmniAdapter (got backend {config.get('backend')!r})")
    return WorkerOmniModel(config)


class LightOmniStore(MemoryStore):
    system: ClassVar[str] = "light_omni"
    memory_types: ClassVar[tuple[str, ...]] = ("semantic", "episodic")
    query_roles: ClassVar[tuple[str, ...]] = ("omni",)
    extra_code: ClassVar[tuple[str, ...]] = (
        "memory/light_omni/memory.py", "memory/light_omni/agent.py", "memory/light_omni/stream.py",
        "memory/light_omni/units.py", "memory/light_omni/replies.py", "memory/light_omni/engine.py",
        "workers/light_omni.py")

    def __init__(self, folder: Path, config: Mapping[str, Any], video: Any) -> None:
        self.folder, self.config, self.video = Path(folder), dict(config), video
        self.record = yaml.safe_load((self.folder / CONFIG_FILE).read_text()) or {}
        self.table = pl.read_parquet(self.folder / ITEMS_FILE)
        self._engine = None

    @property
    def lost(self) -> str | None:
        """Why the build lost the video (None when it was built)."""
        return self.record.get("lost")

    @classmethod
    def build(cls, request: BuildRequest) -> None:
        from senri.memory.identity.faces import open_face_analyzer
        from senri.memory.light_omni.agent import identified_frame, read_wav, stream_video
        from senri.memory.light_omni.faces import FaceBook
        from senri.memory.light_omni.stream import silero_activity
        from senri.memory.light_omni.units import extract_units

        cfg = request.system_config
        fact_order = str(cfg.get("fact_order", "seeded"))
        if fact_order not in FACT_ORDERS:
            raise ValueError(f"memory_system.light_omni.fact_order {fact_order!r} is not one of {FACT_ORDERS}")
        if "faces" in cfg:
            raise ValueError("memory_system.light_omni.faces: replaced by face_detector/face_embedder (null: no "
                             "face identification; centerface/dlib_resnet: the open stand-ins)")
        analyzer = open_face_analyzer(cfg.get("face_detector"), cfg.get("face_embedder"),
                                      "memory_system.light_omni", cfg.get("face_config"))
        if request.media is None:
            raise ValueError("light_omni build: the request has no video (Light-Omni streams the video itself)")
        out = Path(request.out_dir)
        out.mkdir(parents=True, exist_ok=True)
        units = extract_units(Path(request.media.video), out / "input")
        model = open_engine(request.models, "memory_system.light_omni.models")
        memory = LightOmniMemory(model, merge_factor=int(cfg.get("merge_factor", 8)), fact_order=fact_order,
                                 seed=int(request.seed))
        identify, book = None, None
        if analyzer is None:
            faces_record: Any = ("none: the release's insightface buffalo_s has no offline weights (no face "
                                 "identification, no profiles)")
        else:
            cosine = float(cfg.get("identity_cosine") or analyzer.scales.identity_cosine)
            book = FaceBook(memory.profiles.meta, identity_cosine=cosine)  # one dict: profiles.json's
            faces_record = {**analyzer.describe(), "identity_cosine": cosine}
            identify = functools.partial(identified_frame, analyzer=analyzer, book=book)
        record: dict[str, Any] = {"system": {k: v for k, v in cfg.items() if k != "model_configs"},
                                  "source": "built", "units": len(units.units), "audio": units.audio_source,
                                  "faces": faces_record,
                                  "models": {r: m[0] for r, m in request.models.items()}, "seed": request.seed}
        try:
            if not units.units:
                raise ValueError(f"{request.media.video}: no 1-s unit could be extracted (the release drops such "
                                 "a video: L-C1)")
            vad = silero_activity()
            streamed = stream_video(units.units, memory, out, lambda i: vad.push(read_wav(units.units[i].audio)),
                                    vad.reset, identify=identify)
            record.update(segments=[list(s) for s in streamed.segments], vad_resets=streamed.vad_resets)
            if book is not None:
                record.update(faces_identified=streamed.faces_seen, face_profiles=len(book.meta["mapping"]))
        except Exception as exc:  # noqa: BLE001 - the release's worker dies on any error (L-L4): record it
            record["lost"] = f"{type(exc).__name__}: {exc}"
        finally:
            model.close()
        record.update(model_calls=dict(model.calls), logs=len(memory.logs), archived=len(memory.ltm),
                      semantic=len(memory.retriever.semantic), episodic=len(memory.retriever.episodic))
        state = save_memory(memory, out)
        if book is not None and book.known:  # L-F2: profiles/vectors.npy, one float32 row per registered face
            (out / "profiles").mkdir(parents=True, exist_ok=True)
            np.save(out / "profiles" / "vectors.npy", np.stack(book.known).astype(np.float32))
        pl.DataFrame([i.__dict__ for i in memory_items(state)] or None,
                     schema={"item_id": pl.Utf8, "kind": pl.Utf8, "text": pl.Utf8, "start_s": pl.Float64,
                             "end_s": pl.Float64, "description": pl.Utf8, "level": pl.Utf8, "score": pl.Float64}
                     ).write_parquet(out / ITEMS_FILE)
        path = out / CONFIG_FILE
        existing = (yaml.safe_load(path.read_text()) or {}) if path.is_file() else {}
        path.write_text(yaml.safe_dump({**existing, **record}, sort_keys=False, allow_unicode=True))

    @classmethod
    def open(cls, folder: Path, system_config: Mapping[str, Any], video: Any) -> "LightOmniStore":
        require_store_files(folder, (STATE_FILE, VECTORS_FILE, ITEMS_FILE, CONFIG_FILE), "a Light-Omni store")
        return cls(folder, system_config, video)

    def memory(self, model: Any) -> LightOmniMemory:
        return load_memory(self.folder, model, str(self.config.get("fact_order", "seeded")))

    def question_counts(self) -> dict[str, int]:
        return {"builder_losses": int(bool(self.lost))}

    def items(self, level: str | None = None) -> list[MemoryItem]:
        out = [MemoryItem(**row) for row in self.table.iter_rows(named=True)]
        out = [i for i in out if level is None or i.level == level]
        return sorted(out, key=lambda i: (i.start_s if i.start_s is not None else -1.0, i.item_id))

    def search(self, query: str, k: int, exclude: Collection[str] = (), memory_type: str | None = None,
               context: SearchContext | None = None) -> list[MemoryItem]:
        """U-2: a text query embedded by the model's Qwen3-Embedding as a DOCUMENT-side query without a soft
        prompt (the native loop's vector comes from the latents; this entry point serves memory_search)."""
        self.check_memory_type(memory_type)
        if self._engine is None:
            self._engine = open_engine({r: (s["name"], s["config"]) for r, s in
                                        (self.config.get("model_configs") or {}).items()}, "light_omni search")
        vector = self._engine.embed_documents([query])[0]
        memory = self.memory(self._engine)
        ranked = []
        for kind, index in (("semantic", memory.retriever.semantic), ("episodic", memory.retriever.episodic)):
            if memory_type in (None, kind) and len(index):
                ranked += [(score, f"{kind}:{i}") for i, score in index.search(vector, len(index))]
        by_id = {i.item_id: i for i in self.items()}
        hits = [(s, i) for s, i in sorted(ranked, key=lambda x: -x[0]) if i not in exclude][:k]
        return [MemoryItem(**{**by_id[i].__dict__, "score": float(s)}) for s, i in hits]
