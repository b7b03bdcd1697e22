"""Light-Omni's two loops over the pure parts: streaming a video into its memory (L-C1..C9 through the
segmenter) and asking one benchmark question (L-L1..L3: one reaction call, one retrieval, one response call).

Model calls go through :class:`OmniModel` (the three adapters and the embedder), which the worker engine
implements over the release's own patched model and the tests script.
"""

from __future__ import annotations

import wave
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Protocol, Sequence

import numpy as np

from senri.memory.light_omni import stream
from senri.memory.light_omni.memory import DASH, LightOmniMemory, MemoryModel
from senri.memory.light_omni.replies import add_time, query_instruction, query_text, silenced
from senri.memory.light_omni.units import Unit

LONG_EDGE = 480


@dataclass(frozen=True)
class TurnRequest:
    """What LP4 (reaction, retrieve adapter) and LP5 (response, response adapter) are filled with. ``images``
    are every image file in tag order (retrieved episodic frames, then STM frames, then the message's own);
    ``retrieved_*`` are None for LP4. ``query_text`` is L-R3's text the reaction's vector is built from."""

    start_time: str
    end_time: str
    text: str
    faces: str
    short_term_memory: str
    images: tuple[str, ...]
    audio: str = ""
    retrieved_semantic: str | None = None
    retrieved_episodic: str | None = None
    query_text: str = ""


@dataclass(frozen=True)
class Reaction:
    """L-R1/L-R2: the two decisions and the composed query vector (None: the model gave no query)."""

    is_response: bool
    is_retrieve: bool
    query_vector: np.ndarray | None


class OmniModel(MemoryModel, Protocol):
    def react(self, request: TurnRequest) -> Reaction:
        """LP4 through the retrieve adapter, one forward with the 96 latents appended."""

    def respond(self, request: TurnRequest) -> str:
        """LP5 through the response adapter (≤ 1,024 new tokens): the raw response text."""


@dataclass
class AnswerOutcome:
    response: str
    reaction: Reaction
    query_text: str
    calls: list[str] = field(default_factory=list)
    semantic_hits: int = 0
    episodic_hits: int = 0


def answer_question(memory: LightOmniMemory, model: OmniModel, text: str) -> AnswerOutcome:
    """L-L1..L3 for one benchmark question over the built memory (nothing is stored): the message (``text``, the
    question block :func:`~senri.memory.light_omni.replies.question_text` makes) starts at the last stored end
    and lasts 1 s, has no image or audio; retrieval is forced (eval_final_question)."""
    last_end = memory.convs[-1]["message"]["end_time"] if memory.convs else None
    if last_end is None:
        raise ValueError("Light-Omni: the video's memory holds no segment (no units were streamed), so no question "
                         "can be asked (the release drops the video: L-Q1)")
    stm_text, stm_images = memory.short_term_memory()
    faces = memory.profiles.lines([])
    base = dict(start_time=last_end, end_time=add_time(last_end), text=text, faces=faces,
                short_term_memory=stm_text)
    qtext = query_text(text)
    reaction = model.react(TurnRequest(**base, images=tuple(stm_images), query_text=qtext))
    outcome = AnswerOutcome("", reaction, query_instruction(qtext), calls=["LP4"])
    semantic, episodic, retrieved_images = "", "", []
    if reaction.query_vector is not None:  # is_retrieve is forced True for eval_final_question
        sem_hits, epi_hits = memory.retriever.retrieve(reaction.query_vector)
        outcome.semantic_hits, outcome.episodic_hits = len(sem_hits), len(epi_hits)
        semantic, episodic, retrieved_images = memory.render_retrieved(sem_hits, epi_hits)
    response = model.respond(TurnRequest(**base, images=tuple(retrieved_images + stm_images),
                                         retrieved_semantic=semantic, retrieved_episodic=episodic))
    outcome.calls.append("LP5")
    memory.retriever.reset()
    outcome.response = silenced(response)
    return outcome


def merge_wavs(paths: Sequence[Path], out: Path) -> int:
    """L-C5: the units' WAVs concatenated (16-kHz mono s16le) into ``out``; returns its sample count."""
    out.parent.mkdir(parents=True, exist_ok=True)
    frames = []
    for path in paths:
        with wave.open(str(path), "rb") as handle:
            frames.append(handle.readframes(handle.getnframes()))
    data = b"".join(frames)
    with wave.open(str(out), "wb") as handle:
        handle.setnchannels(1)
        handle.setsampwidth(2)
        handle.setframerate(stream.SAMPLE_RATE)
        handle.writeframes(data)
    return len(data) // 2


def read_wav(path: Path) -> np.ndarray:
    """A unit's samples as float32 in [-1, 1] (zeros for one second when unreadable, as the release does)."""
    try:
        with wave.open(str(path), "rb") as handle:
            raw = handle.readframes(handle.getnframes())
            channels = handle.getnchannels()
        samples = np.frombuffer(raw, dtype="<i2").astype(np.float32) / 32768.0
        return samples.reshape(-1, channels).mean(axis=1) if channels > 1 else samples
    except (OSError, EOFError, wave.Error):
        return np.zeros(stream.SAMPLE_RATE, dtype=np.float32)


def processed_frame(unit: Unit, out_dir: Path, long_edge: int = LONG_EDGE) -> Path:
    """L-C2's saved frame without face identification: the unit's frame shrunk to long edge 480 (INTER_AREA,
    only when larger) as ``profiles/data/processed_<TS>.png`` — the only image the model sees."""
    import cv2

    frame = cv2.imread(str(unit.image))
    if frame is None:
        raise ValueError(f"{unit.image}: unreadable frame of unit {unit.index}")
    h, w = frame.shape[:2]
    if max(h, w) > long_edge:
        scale = long_edge / max(h, w)
        frame = cv2.resize(frame, (int(w * scale), int(h * scale)), interpolation=cv2.INTER_AREA)
    out = out_dir / "profiles" / "data" / f"processed_{unit.timestamp}.png"
    out.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(out), frame)
    return out


def identified_frame(unit: Unit, out_dir: Path, analyzer, book, long_edge: int = LONG_EDGE
                     ) -> tuple[Path, list[str]]:
    """L-C2 with a face model: the unit's full-resolution frame through the detector+embedder (RGB), the book's
    identity rules (which draw each identified face's box and ``<face_N>`` label ON the frame), shrunk to long
    edge 480 and saved as ``profiles/data/processed_<TS>.png``; a face registered or given a better shot here
    gets its avatar ``profiles/avatars/<face_N>.png`` (the box padded by 10 px, from the undrawn frame)."""
    import cv2

    from senri.memory.light_omni.faces import Detection

    frame = cv2.imread(str(unit.image))
    if frame is None:
        raise ValueError(f"{unit.image}: unreadable frame of unit {unit.index}")
    original = frame.copy()
    found = analyzer.analyze(np.ascontiguousarray(frame[:, :, ::-1]))
    before = dict(book.avatars)
    saved, names = book.process(frame, [Detection(f.bbox, f.kps, f.score, f.embedding) for f in found],
                                long_edge)
    for name, box in book.avatars.items():
        if before.get(name) != box:
            h, w = original.shape[:2]
            x0, y0, x1, y1 = box
            crop = original[max(0, y0 - 10):min(h, y1 + 10), max(0, x0 - 10):min(w, x1 + 10)]
            path = out_dir / "profiles" / "avatars" / f"{name}.png"
            path.parent.mkdir(parents=True, exist_ok=True)
            if crop.size:
                cv2.imwrite(str(path), crop)
    out = out_dir / "profiles" / "data" / f"processed_{unit.timestamp}.png"
    out.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(out), saved)
    return out, names


@dataclass
class StreamRecord:
    segments: list[tuple[int, int]] = field(default_factory=list)
    vad_resets: int = 0
    faces_seen: int = 0  # identified faces over all units (0 without a face model)


def stream_video(units: Sequence[Unit], memory: LightOmniMemory, out_dir: Path,
                 speaking: Callable[[int], bool], reset: Callable[[], None],
                 frame: Callable[[Unit, Path], Path] = processed_frame,
                 identify: Callable[[Unit, Path], tuple[Path, list[str]]] | None = None) -> StreamRecord:
    """L-C4/L-C5: the units through the segmenter; each segment becomes one eval_memory message (its processed
    frames, its merged WAV ``raw/<start>—<end>.wav``, text "null") added to ``memory``. ``identify`` (a face
    model, :func:`identified_frame`) replaces ``frame``: the faces it names join the turn's faces, which go with
    the next segment sent and are then cleared (the release's current_turn_faces; here in first-seen order where
    the release iterates a set, L-Q3)."""
    record = StreamRecord()
    frames: dict[int, Path] = {}
    trace = stream.SegmenterTrace()
    turn_faces: list[str] = []

    def before(i: int) -> None:
        if identify is None:
            frames[i] = frame(units[i], out_dir)
            return
        frames[i], names = identify(units[i], out_dir)
        turn_faces.extend(n for n in names if n not in turn_faces)
        record.faces_seen += len(names)

    def send(segment: stream.Segment) -> None:
        first, last = units[segment.first], units[segment.last]
        audio = out_dir / "raw" / f"{first.timestamp}{DASH}{last.timestamp}.wav"
        merge_wavs([units[i].audio for i in segment.units], audio)
        message = {"start_time": first.timestamp, "end_time": last.timestamp,
                   "image_path": [str(frames[i]) for i in segment.units], "audio_path": str(audio),
                   "text": "null", "tag": "eval_memory"}
        memory.add_segment(message, faces=list(turn_faces))
        turn_faces.clear()
        end_message = getattr(memory.model, "end_message", None)
        if end_message is not None:  # ag 474/481: media and feature caches cleared after every message
            end_message()
        record.segments.append((segment.first, segment.last))

    reset()
    stream.segment_units(len(units), speaking, reset, on_segment=send, trace=trace, before_unit=before)
    record.vad_resets = len(trace.resets_after_unit)
    return record
