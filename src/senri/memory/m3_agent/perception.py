"""Faces and voices into graph nodes, and the memorizer's input and reply (shared/spec/omni_memory.md M-C5..M-C9,
M-C12, M-C13, K-3..K-5).

Faces: within one clip, the "good" faces (detection ≥ 0.8 and quality ≥ 20, inclusive) are clustered by HDBSCAN
(min_cluster_size 20, precomputed distances max(1 − dot, 0) in float64; everything else −1, all −1 when fewer
than 20 are good); faces with detection > 0.85 and quality > 22 (strict) are grouped by cluster (−1 dropped, in
order of first appearance), each group keeps its top 3 by (detection, quality), and is matched to the face nodes by
the MEAN of all pairwise cosines (≥ 0.3, best node updated, else a new node). Voices: the diarizer's segments
("MM:SS" times), integer-second duration ≥ 2 kept, invalid times dropped, each cut from the clip's WAV by
milliseconds and embedded (float32, L2-normalised), matched one at a time to the voice nodes (mean pairwise
cosine ≥ 0.6). The memorizer then gets the clip (video with its audio), each face node's best crop and each voice
node's segments as JSON, and answers one JSON object whose two lists become episodic and semantic memories.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from senri.memory.m3_agent.graph import FACE, VOICE, MemoryGraph

# ---------------------------------------------------------------------------------------------------- faces
CLUSTER_DET, CLUSTER_QUALITY = 0.8, 20.0  # K-3: inclusive, for clustering
MAP_DET, MAP_QUALITY = 0.85, 22.0  # pc face_detection_score_threshold / face_quality_score_threshold: strict
MIN_CLUSTER_SIZE = 20
MAX_FACES_PER_CHARACTER = 3
#: HDBSCAN implementations: the release's ``hdbscan`` package (0.8.40) or scikit-learn's port (a named option).
CLUSTERERS = ("hdbscan", "sklearn")


@dataclass
class Face:
    """One detected face of a clip (M-F1's faces JSON row): scores kept as the strings the release writes."""

    frame_id: int
    bbox: tuple[int, int, int, int]
    embedding: list[float]
    detection: str
    quality: str
    crop: Any = None  # the crop as base64 JPEG text (what the release keeps in face nodes and its faces JSON)
    cluster: int = -1
    face_type: str = ""  # "ortho" when 1 < h/w < 1.5, else "side" (written, never read: M-C5)


def frame_faces(frame_id: int, image: np.ndarray, detections: Sequence[Mapping[str, Any]]
                ) -> tuple[list[Face], str | None]:
    """M-C5: one frame's detections (``bbox`` [x1, y1, x2, y2], ``score``, raw ``embedding``) → faces: bbox as
    ints, the normalised embedding, quality = the raw embedding's L2 norm, the crop ``image[y1:y2, x1:x2]`` as
    JPEG. Any failure — an empty crop from a negative or inverted box — drops EVERY face of that frame, as the
    release's per-frame try/except does (fe 79-81); the reason comes back for the build's record."""
    from senri.decode import encode_jpeg

    faces = []
    try:
        for det in detections:
            x1, y1, x2, y2 = (int(v) for v in det["bbox"])
            raw = np.asarray(det["embedding"], dtype=np.float32)  # insightface's dtype: the scores print as there
            quality = np.linalg.norm(raw)
            crop = image[y1:y2, x1:x2]
            if crop.size == 0:
                raise ValueError(f"empty crop for box {[x1, y1, x2, y2]}")
            jpeg = encode_jpeg(np.ascontiguousarray(crop))
            height, width = y2 - y1, x2 - x1
            faces.append(Face(frame_id, (x1, y1, x2, y2), (raw / quality if quality > 0 else raw).tolist(),
                              str(det["score"]), str(quality), crop=base64.b64encode(jpeg).decode("ascii"),
                              face_type="ortho" if 1 < height / width < 1.5 else "side"))
    except (ValueError, KeyError, TypeError) as exc:
        return [], f"frame {frame_id}: {exc}: all {len(detections)} face(s) of the frame dropped"
    return faces, None


FRAME_STEP_S = 0.2  # M-C3: 5 fps


def frame_times(clip_duration_s: float, limit_s: float = 30.0) -> list[float]:
    """M-C3 / K-2: the clip-relative times the release samples, ``np.arange(0, min(30, d), 0.2)`` (float steps)."""
    return [float(t) for t in np.arange(0, min(limit_s, clip_duration_s), FRAME_STEP_S)]


def frame_index(t: float, fps: float, n_frames: int | None = None) -> int:
    """K-2: the frame moviepy 2.1.2 returns for time ``t``: ⌊fps·t + 1e-5⌋ (the last frame past the end)."""
    index = int(fps * t + 1e-5)
    return min(index, n_frames - 1) if n_frames else index


def batch_size(n_frames: int, cluster_size: int = 100) -> int:
    """M-C5 / K-3: frames per detection batch, max(n // 100, 4)."""
    return max(n_frames // cluster_size, 4)


def cluster_faces(faces: Sequence[Face], min_cluster_size: int = MIN_CLUSTER_SIZE,
                  clusterer: str = "hdbscan", min_det: float = CLUSTER_DET,
                  min_quality: float | None = CLUSTER_QUALITY) -> list[int]:
    """M-C6: a cluster label per face (−1: noise, not good, or too few good faces). ``min_quality`` None: the
    face model's embedding norm is no quality (a stand-in's, :class:`senri.memory.identity.Scales`): no gate."""
    labels = [-1] * len(faces)
    good = [i for i, f in enumerate(faces)
            if float(f.detection) >= min_det and (min_quality is None or float(f.quality) >= min_quality)]
    if len(good) < min_cluster_size:
        return labels
    vectors = np.asarray([faces[i].embedding for i in good], dtype=float)
    distances = np.maximum(1 - vectors @ vectors.T, 0).astype(np.float64)
    if clusterer == "hdbscan":
        import hdbscan

        found = hdbscan.HDBSCAN(min_cluster_size=min_cluster_size, metric="precomputed").fit_predict(distances)
    elif clusterer == "sklearn":
        from sklearn.cluster import HDBSCAN

        found = HDBSCAN(min_cluster_size=min_cluster_size, metric="precomputed",
                        copy=True).fit_predict(distances)
    else:
        raise ValueError(f"face clusterer {clusterer!r}: one of {', '.join(CLUSTERERS)}")
    for i, label in zip(good, found):
        labels[i] = int(label)
    return labels


def _best_first(faces: Sequence[Face]) -> list[Face]:
    return sorted(faces, key=lambda f: (float(f.detection), float(f.quality)), reverse=True)[:MAX_FACES_PER_CHARACTER]


def faces_to_nodes(graph: MemoryGraph, faces: Sequence[Face], min_det: float = MAP_DET,
                   min_quality: float | None = MAP_QUALITY) -> dict[int, list[Face]]:
    """M-C7: the clip's clustered faces into face nodes; node id → its faces (top 3), in order of matching
    (``min_quality`` None: no quality gate, as in :func:`cluster_faces`)."""
    groups: dict[int, list[Face]] = {}
    for face in faces:
        if float(face.detection) > min_det and (min_quality is None or float(face.quality) > min_quality):
            groups.setdefault(face.cluster, []).append(face)
    result: dict[int, list[Face]] = {}
    for label, members in groups.items():
        if label == -1 or not members:
            continue
        members = _best_first(members)
        embeddings = [f.embedding for f in members]
        contents = [f.crop for f in members]
        match = best_match(graph, FACE, embeddings, graph.config.face_matching_threshold)
        if match is None:
            node_id = graph.add_face_node(embeddings, contents)
        else:
            node_id = match
            graph.update_node(node_id, embeddings, contents)
        result.setdefault(node_id, []).extend(members)
    return {k: _best_first(v) for k, v in result.items()}


def mean_pairwise_cosine(a: Sequence[Sequence[float]], b: Sequence[Sequence[float]]) -> float:
    """K-4: the mean of ALL pairwise cosines (not max, not centroid); a zero vector scores 0."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    nx, ny = np.linalg.norm(x, axis=1, keepdims=True), np.linalg.norm(y, axis=1, keepdims=True)
    x = np.divide(x, nx, out=np.zeros_like(x), where=nx > 0)
    y = np.divide(y, ny, out=np.zeros_like(y), where=ny > 0)
    return float(np.mean(x @ y.T))


def best_match(graph: MemoryGraph, kind: str, embeddings: Sequence[Sequence[float]], threshold: float) -> int | None:
    """The node of ``kind`` with the highest mean pairwise cosine ≥ ``threshold`` (first on ties), or None."""
    scored = [(node_id, mean_pairwise_cosine(embeddings, node.embeddings))
              for node_id, node in graph.nodes.items() if node.kind == kind and node.embeddings]
    scored = sorted([s for s in scored if s[1] >= threshold], key=lambda s: s[1], reverse=True)
    return scored[0][0] if scored else None


# --------------------------------------------------------------------------------------------------- voices
MIN_DURATION_S = 2
MAX_DIARIZER_RETRIES = 20


@dataclass
class Voice:
    """One diarized segment (M-F1's voices JSON row)."""

    start_time: str
    end_time: str
    asr: str
    duration: int
    wav: bytes | None = None
    embedding: list[float] = field(default_factory=list)


class DiarizationError(ValueError):
    """A diarizer reply the release cannot read (uncaught there: the video's build ends, M-Q3)."""


def _minutes_seconds(text: str) -> tuple[int, int]:
    minutes, seconds = map(int, text.split(":"))  # "00:00:05" / "00:05.5" raise ValueError (K-5)
    return minutes, seconds


def parse_segments(reply: Any) -> list[Voice]:
    """M-C8 / K-5: the diarizer's JSON list → segments with integer-second durations, those ≥ 2 s kept. A reply
    that is not a list of {start_time, end_time, asr}, or a time that is not MM:SS, is a DiarizationError naming
    the segment (the release raises there and loses the video's build)."""
    if not isinstance(reply, list):
        raise DiarizationError(f"diarizer reply is a {type(reply).__name__}, not a list of segments")
    voices = []
    for n, item in enumerate(reply):
        try:
            (sm, ss), (em, es) = _minutes_seconds(item["start_time"]), _minutes_seconds(item["end_time"])
            voice = Voice(item["start_time"], item["end_time"], item["asr"], (em * 60 + es) - (sm * 60 + ss))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise DiarizationError(f"diarizer segment {n}: {type(exc).__name__}: {exc} in {item!r}") from exc
        if voice.duration >= MIN_DURATION_S:
            voices.append(voice)
    return voices


def cut_segment(wav: bytes, start_time: str, end_time: str) -> bytes | None:
    """K-5: the segment's milliseconds cut from the clip's WAV, or None for a time that is invalid (seconds ≥ 60,
    a negative field, start ≥ end, end past the audio)."""
    from senri.media import wav_bytes, wav_info
    import io
    import wave

    try:
        (sm, ss), (em, es) = _minutes_seconds(start_time), _minutes_seconds(end_time)
    except ValueError:
        return None
    if min(sm, ss, em, es) < 0 or ss >= 60 or es >= 60:
        return None
    start_ms, end_ms = (sm * 60 + ss) * 1000, (em * 60 + es) * 1000
    info = wav_info(wav)
    if start_ms >= end_ms or end_ms > info.duration_s * 1000:
        return None
    with wave.open(io.BytesIO(wav), "rb") as reader:
        reader.setpos(start_ms * info.sample_rate // 1000)
        frames = reader.readframes((end_ms - start_ms) * info.sample_rate // 1000)
    return wav_bytes(frames, info.sample_rate, info.channels)


def normalize(vector: Sequence[float]) -> list[float]:
    """K-5: packed as float32, then L2-normalised (a zero vector stays zero)."""
    v = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(v))
    return (v / norm if norm > 0 else v).astype(float).tolist()


def diarize(call: Callable[[], str], max_retries: int = MAX_DIARIZER_RETRIES) -> list[Voice]:
    """M-C8: the diarizer asked again (up to 20 calls) only while its reply is not JSON (the memorizer's strip
    rule, :func:`refine_reply`); 20 failures, or a reply that is not a list of segments, is a
    :class:`DiarizationError` (the release raises: the video's build ends)."""
    for _ in range(max_retries):
        try:
            parsed = json.loads(refine_reply(call()))
        except json.JSONDecodeError:
            continue
        return parse_segments(parsed)
    raise DiarizationError(f"Failed to diarize audio: {max_retries} replies were not JSON")


def embed_voices(wav: bytes, voices: Sequence[Voice], embed: Callable[[bytes], Sequence[float]]) -> list[Voice]:
    """M-C8: each segment cut from the clip's WAV (invalid times dropped), embedded and normalised."""
    kept = []
    for voice in voices:
        voice.wav = cut_segment(wav, voice.start_time, voice.end_time)
        if voice.wav is None:
            continue
        voice.embedding = normalize(embed(voice.wav))
        kept.append(voice)
    return kept


def voices_to_nodes(graph: MemoryGraph, voices: Sequence[Voice]) -> dict[int, list[Voice]]:
    """M-C9: one segment at a time, in reply order: the best voice node at ≥ 0.6 takes its embedding and text,
    else a new voice node."""
    result: dict[int, list[Voice]] = {}
    for voice in voices:
        match = best_match(graph, VOICE, [voice.embedding], graph.config.voice_matching_threshold)
        if match is None:
            node_id = graph.add_voice_node([voice.embedding], [voice.asr])
        else:
            node_id = match
            graph.update_node(node_id, [voice.embedding], [voice.asr])
        result.setdefault(node_id, []).append(voice)
    return result


# ------------------------------------------------------------------------------------------------ memorizer
EPISODIC_KEY, SEMANTIC_KEY = "video_descriptions", "high_level_conclusions"
MAX_RETRIES = 20


def refine_reply(text: str) -> str:
    """M-C13: strip of the CHARACTER SETS "```json", "```python", "```" from both ends, in that order, then of
    whitespace (so "nothing" loses its leading "no")."""
    return text.strip("```json").strip("```python").strip("```").strip()


def parse_reply(text: str) -> Any | None:
    """One memorizer reply: an empty reply reads as "[]"; the refined text as JSON, None when unparsable."""
    try:
        return json.loads(refine_reply(text or "[]"))
    except json.JSONDecodeError:
        return None


class MemorizerReplyError(ValueError):
    """A parsed reply without the two lists (a list, another key): the release raises and ends the video's build."""


@dataclass
class MemorizerResult:
    episodic: list[str]
    semantic: list[str]
    calls: int
    failed: bool  # every call unparsable: both lists empty (the release's fallback)


def memorize(call: Callable[[], str], on_bad_shape: str = "raise") -> MemorizerResult:
    """M-C13: up to 20 calls while the reply does not parse (``null`` parses to None and counts as a failure);
    after 20 both lists are empty. A parsed reply of the wrong shape raises :class:`MemorizerReplyError`
    (``on_bad_shape: raise``, the release) or reads as two empty lists (``empty``, the named fix)."""
    parsed, calls = None, 0
    for _ in range(MAX_RETRIES):
        calls += 1
        parsed = parse_reply(call())
        if parsed is not None:
            break
    if parsed is None:
        return MemorizerResult([], [], calls, True)
    try:
        episodic, semantic = parsed[EPISODIC_KEY], parsed[SEMANTIC_KEY]
    except (KeyError, TypeError, IndexError) as exc:
        if on_bad_shape == "empty":
            return MemorizerResult([], [], calls, True)
        raise MemorizerReplyError(f"memorizer reply has no {EPISODIC_KEY!r}/{SEMANTIC_KEY!r} lists "
                                  f"({type(exc).__name__}: {exc}): {json.dumps(parsed)[:200]}") from exc
    return MemorizerResult(list(episodic), list(semantic), calls, False)


def voices_json(voices: Mapping[int, Sequence[Voice]]) -> str:
    """M-C12: the voice features as the release dumps them (ASCII-escaped JSON, ``<voice_ID>`` keys in node order
    as given, nodes without segments left out, only start_time/end_time/asr per segment)."""
    return json.dumps({f"<voice_{node_id}>": [{"start_time": v.start_time, "end_time": v.end_time, "asr": v.asr}
                                              for v in segs] for node_id, segs in voices.items() if segs})


def memorizer_parts(prompt: str, clip: Any, faces: Mapping[int, Sequence[Face]],
                    voices: Mapping[int, Sequence[Voice]]) -> list[Any]:
    """M-C12: the one user turn's parts in order — MP2, the clip (video with its audio), "Face features:", per face
    node with faces "<face_ID>:" and its best crop, "Voice features:", the voices JSON ("{}" when none)."""
    parts: list[Any] = [prompt, clip, "Face features:"]
    for node_id, members in faces.items():
        if members:
            parts += [f"<face_{node_id}>:", members[0].crop]
    parts += ["Voice features:", voices_json(voices)]
    return parts
