"""M3-Agent's memory as a senri store: built per video from 30-s clips (faces, voices, one memorizer call per clip
with the clip's audio), kept as its graph (``graph.json``) and the interface's items (``items.parquet``).

Roles (``memory_system.m3_agent.models`` / settings), each recorded in the store's ``config.yaml``:

* ``memorizer`` — a chat model that hears (``audio: true``): the release's M3-Agent-Memorization (a Qwen2.5-Omni
  thinker on the transformers backend, ``model_class: Qwen2_5OmniThinkerForConditionalGeneration``); it gets each
  clip at 2 fps WITH its sound (M-C12), the face crops and the transcript per voice node;
* ``diarizer`` — a chat model that takes video (the release's Gemini-1.5-pro, MP1): speaker turns with times;
  null: no voices (recorded);
* faces — the release's insightface buffalo_l has no offline weights here, so none by default (no face nodes,
  recorded). ``face_detector`` + ``face_embedder`` name open STAND-INS (:mod:`senri.memory.identity`: a detector
  of the anonymize registry, e.g. ``centerface``, and ``dlib_resnet``); or ``face_model`` a ``"module:function"``
  of one's own (frames at 5 fps → per frame a list of detections: ``bbox``, ``score``, raw ``embedding``).
  :func:`~.perception.frame_faces` crops and scores them as M-C5 says;
* ``voice_embedder`` — a registered stand-in (``resemblyzer``) or ``"module:function"`` (a segment's WAV → a
  vector): the release's ERes2NetV2 has no offline weights; null: no voice nodes (recorded);
* thresholds — the quality gates and matching cosines are the release's for the release's models; a stand-in
  brings the ones measured for it (:class:`senri.memory.identity.Scales`); ``face_matching_threshold`` /
  ``voice_matching_threshold`` override either; the build records what it used;
* ``text_embedder`` — the release's text-embedding-3-large by default, a model config
  (``config/model/text_embedding_3_large.yaml``) served over the OpenAI-compatible embeddings API
  (:mod:`senri.backends.embeddings`; without its key the build stops naming ``api_key_env``); ``minilm``, the
  packaged all-MiniLM-L6-v2, is the named in-process stand-in (its cosines are on another scale than the 0.5/0.85
  thresholds were tuned on: U-10); or ``"module:Class"``. The build's embedding calls and cached vectors are
  counted in ``config.yaml`` (``embedding_calls``).

What the release does with bad input is followed by default and the fix is a named option; a video whose build
the release would lose is written as a LOST store (its reason in ``config.yaml``), whose questions the method
records as failures (wrong, with the reason) and whose loss shows in run health:

* ``silent_video``: ``release`` (no audio track: the memorizer's audio assertion fails, M-Q3: the video is lost)
  | ``video_only`` (the clip goes without sound, no voices);
* ``empty_last_clip``: ``release`` (a duration that is a multiple of 30 s leaves an empty last clip and the
  release's reader raises: lost) | ``skip``;
* ``on_bad_reply``: ``release`` (a memorizer reply of the wrong shape, a diarizer reply that never parses or has
  non-MM:SS times: lost) | ``empty`` (that clip's memories / voices empty, counted).
"""

from __future__ import annotations

import base64
import json
import logging
import math
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Collection, Mapping, Sequence

import yaml

from senri.memory.m3_agent import perception
from senri.memory.m3_agent.graph import EPISODIC, SEMANTIC, GraphConfig, MemoryGraph
from senri.memory.m3_agent.retrieval import search as graph_search
from senri.memory.m3_agent.retrieval import translate
from senri.memory.store import BuildRequest, MemoryItem, MemoryStore, SearchContext, require_store_files

log = logging.getLogger(__name__)

CLIP_S = 30
GRAPH_FILE, ITEMS_FILE, CONFIG_FILE = "graph.json", "items.parquet", "config.yaml"
MEMORIZER_FPS = 2.0  # qwen-omni-utils' video rate (M-C12)
MEMORIZER_MAX_TOKENS = 4096  # M-V2
POLICIES = {"silent_video": ("release", "video_only"), "empty_last_clip": ("release", "skip"),
            "on_bad_reply": ("release", "empty")}


class VideoLost(RuntimeError):
    """What the release does to this video: its build stops and no graph is written (the reason is recorded)."""


def clip_spans(duration_s: float) -> list[tuple[int, float, float]]:
    """M-C1 / K-1: ⌊d⌋ // 30 + 1 clips, clip k over [30k, min(30k + 30, d)]; the last one is empty (start = d)
    when the duration is a multiple of 30 s. (Clips are cut by time, in numeric order: S-3d; the release's stream
    copy starts at keyframes, which with ffmpeg 5.1 an edit list hides, README §6.4 item 6.)"""
    n = int(math.floor(duration_s)) // CLIP_S + 1
    return [(k, float(CLIP_S * k), min(float(CLIP_S * (k + 1)), float(duration_s))) for k in range(n)]


def policy(config: Mapping[str, Any], name: str) -> str:
    value = str(config.get(name, "release"))
    if value not in POLICIES[name]:
        raise ValueError(f"memory_system.m3_agent.{name}: {value!r} is not one of {', '.join(POLICIES[name])}")
    return value


def load_callable(target: str | None, what: str) -> Callable[..., Any] | None:
    if not target:
        return None
    from senri.registry import import_target

    try:
        return import_target(str(target))
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"memory_system.m3_agent.{what}: {target!r} cannot be loaded ({exc})") from exc


def embedding_calls(encoder: Any) -> dict[str, Any]:
    """``{"embedding_calls": …}``: an API text embedder's call counts (:class:`~senri.backends.embeddings.
    EmbeddingTally`); nothing for an in-process encoder."""
    tally = getattr(encoder, "tally", None)
    return {"embedding_calls": tally.as_dict()} if tally is not None else {}


@dataclass
class BuildLog:
    """What the build read and did, per clip and in total (the store's ``config.yaml`` keeps it)."""

    audio: str = ""
    clips: list[dict[str, Any]] = field(default_factory=list)
    conditions: list[str] = field(default_factory=list)
    calls: dict[str, int] = field(default_factory=lambda: {"memorizer": 0, "diarizer": 0})
    lost: str | None = None


class ClipBuilder:
    """One video's clips through the roles, in the release's order per clip: voices, faces, episodic, semantic."""

    def __init__(self, request: BuildRequest) -> None:
        from senri.backends import open_backend
        from senri.memory.worldmm.common import open_text_encoder
        from senri.prompts import prompt_set

        self.request, self.cfg = request, dict(request.system_config)
        for name in POLICIES:
            policy(self.cfg, name)
        if request.media is None:
            raise ValueError("m3_agent build: the build request has no media (the video M3-Agent builds from)")
        self.video = Path(request.media.video)
        role = request.models.get("memorizer")
        if not role:
            raise ValueError("memory_system.m3_agent.models.memorizer: no model config for the memorizer role")
        self.memorizer = open_backend(role[1], request.response_cache)
        diarizer = request.models.get("diarizer")
        self.diarizer = open_backend(diarizer[1], request.response_cache) if diarizer else None
        self._open_identity_models()
        self.encoder = open_text_encoder(self.cfg, "memory_system.m3_agent.text_embedder", request.response_cache)
        self.prompts = prompt_set("m3_agent", self.cfg.get("prompts_dir"),
                                  from_release=self.cfg.get("prompts_from_release"))
        seed = int(request.seed)
        graph_config = GraphConfig(face_matching_threshold=self.thresholds["face_matching"],
                                   voice_matching_threshold=self.thresholds["voice_matching"])
        self.graph = MemoryGraph(graph_config, random.Random(seed))  # M-Q2 / K-9: the run's seed
        self.log = BuildLog()

    def _open_identity_models(self) -> None:
        """The face and voice roles (by stand-in name or ``module:function``) and the thresholds they are read at:
        the release's for the release's models and one's own functions, a stand-in's measured ones, or the
        config's ``*_matching_threshold``."""
        from senri.memory.identity import RELEASE_M3, VOICE_EMBEDDERS, load_voice_embedder
        from senri.memory.identity.faces import open_face_analyzer

        where = "memory_system.m3_agent"
        analyzer = open_face_analyzer(self.cfg.get("face_detector"), self.cfg.get("face_embedder"), where,
                                      self.cfg.get("face_config"))
        if analyzer is not None and self.cfg.get("face_model"):
            raise ValueError(f"{where}: face_model and face_detector/face_embedder both set: name one face model")
        self.face_model = analyzer or load_callable(self.cfg.get("face_model"), "face_model")
        self.face_record: Any = analyzer.describe() if analyzer else self.cfg.get("face_model")
        face_scales = analyzer.scales if analyzer else RELEASE_M3
        voice = self.cfg.get("voice_embedder")
        if voice and str(voice) in VOICE_EMBEDDERS:
            embedder = load_voice_embedder(str(voice), self.cfg.get("voice_config"))
            self.voice_embedder, voice_scales = embedder, embedder.scales
            self.voice_record: Any = {"model": str(voice), "standin": True, "weights": embedder.weights,
                                      "dimension": embedder.dimension, "scales": voice_scales.record()}
        else:
            self.voice_embedder = load_callable(voice, "voice_embedder")
            voice_scales, self.voice_record = RELEASE_M3, voice
        quality = face_scales.quality
        self.thresholds = {
            "cluster_det": perception.CLUSTER_DET, "map_det": perception.MAP_DET,
            "cluster_quality": quality[0] if quality else None, "map_quality": quality[1] if quality else None,
            "face_matching": float(self.cfg.get("face_matching_threshold") or face_scales.face_matching),
            "voice_matching": float(self.cfg.get("voice_matching_threshold") or voice_scales.voice_matching)}

    # ------------------------------------------------------------------------------------------ media
    def _clip_video(self, start: float, end: float, wav: bytes | None):
        from senri.backends.base import AudioPart, VideoPart
        from senri.decode import at_fps, carrier_from_jpegs, encode_jpeg, read_frames

        times = at_fps(MEMORIZER_FPS, start, end)
        frames = [f for f in read_frames(self.video, times, short_side=self.cfg.get("memorizer_short_side"))
                  if f.image is not None]
        if not frames:
            return None, []
        jpegs = [encode_jpeg(f.image) for f in frames]
        part = VideoPart(carrier_from_jpegs(jpegs, MEMORIZER_FPS), MEMORIZER_FPS,
                         tuple(float(f.pts_s if f.pts_s is not None else f.target_s) for f in frames),
                         audio=AudioPart(wav) if wav is not None else None)
        return part, frames

    # ---------------------------------------------------------------------------------------- one clip
    def clip(self, index: int, start: float, end: float, wav: bytes | None) -> dict[str, Any]:
        entry: dict[str, Any] = {"clip": index, "start_s": start, "end_s": end, "audio": wav is not None}
        if end <= start:
            if policy(self.cfg, "empty_last_clip") == "release":
                raise VideoLost(f"clip {index} is empty (the duration is a multiple of {CLIP_S} s): the release's "
                                f"reader raises and the video's graph is never written")
            entry["skipped"] = "empty"
            return entry
        video, frames = self._clip_video(start, end, wav)
        if video is None:
            raise VideoLost(f"clip {index}: no decodable frame in [{start}, {end}] s")
        voices = self._voices(index, video, wav, entry)
        faces = self._faces(index, start, end, entry)
        result = self._memorize(index, video, faces, voices, entry)
        for kind, texts in ((EPISODIC, result.episodic), (SEMANTIC, result.semantic)):
            if texts:
                vectors = self.encoder.encode(list(texts)).tolist()
                self.graph.insert_memories(texts, vectors, index, kind)
        entry.update(episodic=len(result.episodic), semantic=len(result.semantic))
        return entry

    def _voices(self, index: int, video, wav: bytes | None, entry: dict[str, Any]) -> dict[int, list]:
        if wav is None or self.diarizer is None or self.voice_embedder is None:
            entry["voices"] = ("no audio" if wav is None else "no diarizer" if self.diarizer is None
                               else "no voice embedder")
            return {}
        from senri.backends.base import ChatRequest, Message

        def call() -> str:
            self.log.calls["diarizer"] += 1
            request = ChatRequest((Message("user", (video, self.prompts.render("diarize"))),),
                                  max_tokens=8192, purpose=f"m3_agent:diarize:{index}")
            response = self.diarizer.complete(request)
            return response.text if response.error is None else ""

        try:
            segments = perception.diarize(call)
        except perception.DiarizationError as exc:
            if policy(self.cfg, "on_bad_reply") == "release":
                raise VideoLost(f"clip {index}: {exc}") from exc
            entry["voices"] = f"diarizer failed: {exc}"
            return {}
        kept = perception.embed_voices(wav, segments, self.voice_embedder)
        voices = perception.voices_to_nodes(self.graph, kept)
        entry["voices"] = sum(len(v) for v in voices.values())
        return voices

    def _faces(self, index: int, start: float, end: float, entry: dict[str, Any]) -> dict[int, list]:
        if self.face_model is None:
            entry["faces"] = "no face model"
            return {}
        from senri.decode import read_frames

        # M-C3 / K-2: the release's 5-fps times and moviepy's frame pick, read as exact frame times
        fps = float(getattr(self.request.video, "avg_fps", 0.0) or 0.0)  # the probe table's frame rate
        times = [start + (perception.frame_index(t, fps) / fps if fps > 0 else t)
                 for t in perception.frame_times(end - start)]
        frames = [f for f in read_frames(self.video, times, short_side=self.cfg.get("face_short_side"))
                  if f.image is not None]
        detections = self.face_model([f.image for f in frames])
        faces, dropped = [], []
        for frame_id, (frame, found) in enumerate(zip(frames, detections)):
            kept, why = perception.frame_faces(frame_id, frame.image, found)
            faces += kept
            if why:
                dropped.append(why)
        if dropped:
            entry["faces_dropped"] = dropped
        t = self.thresholds
        labels = perception.cluster_faces(faces, clusterer=str(self.cfg.get("face_clusterer", "hdbscan")),
                                          min_det=t["cluster_det"], min_quality=t["cluster_quality"])
        for face, label in zip(faces, labels):
            face.cluster = label
        nodes = perception.faces_to_nodes(self.graph, faces, min_det=t["map_det"], min_quality=t["map_quality"])
        entry["faces"] = {"detected": len(faces), "nodes": sorted(nodes)}
        return nodes

    def _memorize(self, index: int, video, faces, voices, entry: dict[str, Any]) -> perception.MemorizerResult:
        from senri.backends.base import ChatRequest, ImagePart, Message

        parts = perception.memorizer_parts(self.prompts.render("memorize"), video, faces, voices)
        # parts[1] is the clip; face crops (base64 JPEG text) follow each "<face_N>:" label
        content = tuple(ImagePart(base64.b64decode(p)) if i > 1 and str(parts[i - 1]).startswith("<face_") else p
                        for i, p in enumerate(parts))
        request = ChatRequest((Message("user", content),), max_tokens=MEMORIZER_MAX_TOKENS,
                              purpose=f"m3_agent:memorize:{index}")

        def call() -> str:
            self.log.calls["memorizer"] += 1
            response = self.memorizer.complete(request)
            return response.text if response.error is None else ""

        try:
            result = perception.memorize(call, on_bad_shape="raise")
        except perception.MemorizerReplyError as exc:
            if policy(self.cfg, "on_bad_reply") == "release":
                raise VideoLost(f"clip {index}: {exc}") from exc
            self.log.conditions.append(f"clip {index}: {exc} (read as no memories)")
            result = perception.MemorizerResult([], [], 0, True)
        if result.failed:
            entry["memorizer"] = f"no parsable reply in {result.calls} calls: no memories"
        return result

    # ---------------------------------------------------------------------------------------------- all
    def run(self) -> None:
        from senri.media import clip_wav, has_audio_track

        has_audio = has_audio_track(self.video)
        self.log.audio = (f"{self.video} (its first audio track, 16 kHz mono per clip)" if has_audio
                          else f"none: {self.video} has no audio track")
        if not has_audio:
            self.log.conditions.append("video without audio")
            if policy(self.cfg, "silent_video") == "release":
                raise VideoLost("the video has no audio track: the memorizer's has-audio assertion fails under "
                                "use_audio_in_video (M-Q3) and the release's build of the video ends")
        for index, start, end in clip_spans(float(self.request.video.duration_s)):
            wav = clip_wav(self.video, start, end - start) if has_audio and end > start else None
            self.log.clips.append(self.clip(index, start, end, wav))
        self.graph.refresh_equivalences()


def store_items(graph: MemoryGraph, duration_s: float) -> list[MemoryItem]:
    """U-1: every text node as an item (episodic/semantic, level 30sec) over its clip's nominal span, translated
    to characters as the controller reads it; equivalence texts, which translation drops, are left out."""
    items = []
    for node_id in graph.text_nodes:
        node = graph.nodes[node_id]
        texts = translate(graph, [node.contents[0]])
        if not texts:
            continue
        start = float(CLIP_S * node.clip)
        items.append(MemoryItem(f"m3:{node_id}", node.kind, texts[0], start, min(start + CLIP_S, duration_s),
                                level="30sec"))
    return sorted(items, key=lambda i: (i.start_s, int(i.item_id[3:])))


class M3AgentStore(MemoryStore):
    system: ClassVar[str] = "m3_agent"
    memory_types: ClassVar[tuple[str, ...]] = ()
    extra_code: ClassVar[tuple[str, ...]] = ("memory/m3_agent/graph.py", "memory/m3_agent/retrieval.py",
                                             "memory/m3_agent/perception.py", "memory/m3_agent/control.py",
                                             "media.py")

    def __init__(self, folder: Path, config: Mapping[str, Any], video: Any) -> None:
        self.folder, self.config, self.video = Path(folder), dict(config), video
        self.record = yaml.safe_load((self.folder / CONFIG_FILE).read_text()) or {}
        data = json.loads((self.folder / GRAPH_FILE).read_text())
        self.lost: str | None = self.record.get("lost")
        self.graph = MemoryGraph.from_dict(data, random.Random(int(self.record.get("seed", 0))))
        self._encoder = None
        #: The answer job's response cache, where an API text embedder keeps the query vectors (set by the
        #: method that opens the store; None: not kept).
        self.response_cache: Path | None = None

    @classmethod
    def build(cls, request: BuildRequest) -> None:
        out = Path(request.out_dir)
        out.mkdir(parents=True, exist_ok=True)
        builder = ClipBuilder(request)
        try:
            builder.run()
        except VideoLost as exc:
            builder.log.lost = str(exc)
            builder.graph = MemoryGraph(GraphConfig(), builder.graph.rng)  # the release writes no graph
            log.warning("m3_agent %s: video lost as the release loses it: %s", request.video.video_id, exc)
        (out / GRAPH_FILE).write_text(json.dumps(builder.graph.to_dict()))
        record = {"source": "built", "seed": int(request.seed), "audio": builder.log.audio,
                  "lost": builder.log.lost, "conditions": builder.log.conditions, "clips": builder.log.clips,
                  "calls": builder.log.calls, "models": {r: m[0] for r, m in request.models.items()},
                  "face_model": builder.face_record, "voice_embedder": builder.voice_record,
                  "thresholds": builder.thresholds,
                  "text_embedder": str(builder.cfg.get("text_embedder", "minilm")),
                  "text_encoder": builder.encoder.name, **embedding_calls(builder.encoder),
                  "prompts": builder.prompts.identity(),
                  "policies": {name: policy(builder.cfg, name) for name in POLICIES}}
        path = out / CONFIG_FILE
        existing = (yaml.safe_load(path.read_text()) or {}) if path.is_file() else {}
        path.write_text(yaml.safe_dump({**existing, **record}, sort_keys=False, allow_unicode=True))
        from senri.records import to_frame, write_table

        items = store_items(builder.graph, float(request.video.duration_s))
        write_table(to_frame(items, MemoryItem), out / ITEMS_FILE, MemoryItem)

    @classmethod
    def open(cls, folder: Path, system_config: Mapping[str, Any], video: Any) -> "M3AgentStore":
        require_store_files(folder, (GRAPH_FILE, CONFIG_FILE), "an m3_agent store")
        return cls(folder, system_config, video)

    # ---------------------------------------------------------------------------------------------- reading
    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if self._encoder is None:
            from senri.memory.worldmm.common import open_text_encoder

            self._encoder = open_text_encoder(self.config, "memory_system.m3_agent.text_embedder",
                                              self.response_cache)
        return self._encoder.encode(list(texts)).tolist()

    def embedding_calls(self) -> dict[str, Any]:
        """The query embedder's calls so far (an API embedder's counts; empty for an in-process one)."""
        return embedding_calls(self._encoder) if self._encoder is not None else {}

    def fresh_graph(self) -> MemoryGraph:
        """The graph as the release reloads it for every search (M-R1)."""
        data = json.loads((self.folder / GRAPH_FILE).read_text())
        return MemoryGraph.from_dict(data, self.graph.rng)

    def items(self, level: str | None = None) -> list[MemoryItem]:
        duration = float(getattr(self.video, "duration_s", 0.0) or 0.0) or math.inf
        return [i for i in store_items(self.graph, duration) if level is None or i.level == level]

    def search(self, query: str, k: int, exclude: Collection[str] = (), memory_type: str | None = None,
               context: SearchContext | None = None) -> list[MemoryItem]:
        """M-R5 as a store search: the clips the normal search returns (clips whose items are all in ``exclude``
        count as held), their texts as items."""
        self.check_memory_type(memory_type)
        by_clip: dict[int, list[MemoryItem]] = {}
        for item in self.items():
            by_clip.setdefault(int(item.start_s // CLIP_S), []).append(item)
        held = [c for c, items in by_clip.items() if items and all(i.item_id in exclude for i in items)]
        graph = self.fresh_graph()
        graph.refresh_equivalences()
        result, found = graph_search(graph, query, self.embed, held)
        scores = found.clip_scores
        out = []
        for key in result:
            clip = int(key.split("_")[1])
            out += [MemoryItem(i.item_id, i.kind, i.text, i.start_s, i.end_s, i.description, i.level,
                               float(scores.get(clip, 0.0))) for i in by_clip.get(clip, [])]
        return out

    def question_counts(self) -> dict[str, int]:
        return {"builder_losses": 1} if self.lost else {}

    def summary(self) -> dict[str, Any]:
        return {**super().summary(), "lost": self.lost, "audio": self.record.get("audio")}
