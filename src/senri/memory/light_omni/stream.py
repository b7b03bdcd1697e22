"""Light-Omni's streaming front end: voice activity per 1-s unit (L-C3) and the segmenter that cuts the
unit stream into memory messages (L-C4, K-12).

The release runs Silero VAD's ``VADIterator`` over each unit's 16-kHz samples in 512-sample windows (the last
window of a unit zero-padded) and keeps one "speaking" flag across units; the segmenter turns the per-unit
flags into segments of at most 30 units. :class:`VoiceActivity` is that iterator over any speech-probability
function (the real Silero model, or a scripted one in tests); :func:`segment_units` is the segmenter over a
flag source, so a test can feed it scripted flags (T-1).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

import numpy as np

SAMPLE_RATE = 16000
WINDOW = 512
#: L-C4 (scripts/config.py): units per segment at most, speech shorter than this absorbs a silence, and
#: background longer than this is flushed (keeping the last 2 units) when speech starts.
MAX_UNITS = 30
MIN_UNITS = 5
BACKGROUND_BEFORE_SPEECH = 20
CONTEXT_UNITS = 2


@dataclass
class VoiceActivity:
    """Silero's VADIterator (threshold 0.5, hysteresis 0.15, min silence 1000 ms, speech pad 100 ms) plus the
    release's VADHandler flag: ``push(samples)`` runs every 512-sample window of one unit and returns whether
    speech is on after it. ``probability(window)`` is the model (Silero's JIT, or a stand-in)."""

    probability: Callable[[np.ndarray], float]
    threshold: float = 0.5
    min_silence_ms: int = 1000
    speech_pad_ms: int = 100
    speaking: bool = False
    triggered: bool = False
    temp_end: int = 0
    current_sample: int = 0
    events: list[dict[str, float]] = field(default_factory=list)
    reset_model: Callable[[], None] | None = None

    def reset(self) -> None:
        """The handler's reset (after a speech end that was not a forced cut): iterator and flag cleared."""
        if self.reset_model is not None:
            self.reset_model()
        self.triggered, self.temp_end, self.current_sample, self.speaking = False, 0, 0, False

    def window(self, chunk: np.ndarray) -> dict[str, float] | None:
        """One VADIterator step (``return_seconds=True``, one decimal)."""
        size = len(chunk)
        self.current_sample += size
        prob = float(self.probability(chunk))
        pad = SAMPLE_RATE * self.speech_pad_ms / 1000
        if prob >= self.threshold and self.temp_end:
            self.temp_end = 0
        if prob >= self.threshold and not self.triggered:
            self.triggered = True
            return {"start": round(max(0, self.current_sample - pad - size) / SAMPLE_RATE, 1)}
        if prob < self.threshold - 0.15 and self.triggered:
            if not self.temp_end:
                self.temp_end = self.current_sample
            if self.current_sample - self.temp_end < SAMPLE_RATE * self.min_silence_ms / 1000:
                return None
            end = self.temp_end + pad - size
            self.temp_end, self.triggered = 0, False
            return {"end": round(end / SAMPLE_RATE, 1)}
        return None

    def push(self, samples: np.ndarray) -> bool:
        """Every window of one unit (the last zero-padded to 512); the speaking flag after them."""
        self.events = []
        samples = np.asarray(samples, dtype=np.float32).reshape(-1)
        for start in range(0, len(samples), WINDOW):
            chunk = samples[start:start + WINDOW]
            if len(chunk) < WINDOW:
                chunk = np.pad(chunk, (0, WINDOW - len(chunk)))
            event = self.window(chunk)
            if event:
                self.events.append(event)
                if "start" in event:
                    self.speaking = True
                elif "end" in event:
                    self.speaking = False
        return self.speaking


@dataclass(frozen=True)
class Segment:
    """One memory message: the indices of its units (consecutive), start = first unit's TS, end = LAST
    unit's TS (L-C5: not + 1 s)."""

    units: tuple[int, ...]

    @property
    def first(self) -> int:
        return self.units[0]

    @property
    def last(self) -> int:
        return self.units[-1]


@dataclass
class SegmenterTrace:
    """What the segmenter did besides the segments: the VAD resets, each as the number of units pushed before
    it (the first, 0, is the reset before streaming starts; then one after every speech end that was not a
    forced cut: K-12)."""

    resets_after_unit: list[int] = field(default_factory=lambda: [0])


def segment_units(n_units: int, speaking: Callable[[int], bool], reset: Callable[[], None] = lambda: None,
                  on_segment: Callable[[Segment], None] | None = None, trace: SegmenterTrace | None = None,
                  before_unit: Callable[[int], None] | None = None) -> list[Segment]:
    """L-C4 over units ``0..n_units-1``. ``speaking(i)`` pushes unit i's audio through the VAD and returns its
    flag; ``reset()`` resets the VAD; ``before_unit(i)`` runs first for each unit (the release processes the
    unit's faces BEFORE any flush, so faces of the unit that triggers a flush are booked to the flushed
    segment: L-Q3); ``on_segment`` is called as each segment is sent (the memory update)."""
    segments: list[Segment] = []
    buffer: list[int] = []
    is_speaking = False

    def send(units: Sequence[int]) -> None:
        if units:
            segment = Segment(tuple(units))
            segments.append(segment)
            if on_segment is not None:
                on_segment(segment)

    for unit in range(n_units):
        if before_unit is not None:
            before_unit(unit)
        current = speaking(unit)
        force_cut = False
        if is_speaking:
            if not current and len(buffer) < MIN_UNITS:
                current = True
            if len(buffer) >= MAX_UNITS - 1:
                current, force_cut = False, True
        if not is_speaking and current:
            is_speaking = True
            if len(buffer) > BACKGROUND_BEFORE_SPEECH:
                send(buffer[:-CONTEXT_UNITS])
                buffer = buffer[-CONTEXT_UNITS:]
        elif is_speaking and not current:
            is_speaking = False
            buffer.append(unit)
            send(buffer)
            buffer = []
            if not force_cut:
                reset()
                if trace is not None:
                    trace.resets_after_unit.append(unit + 1)
            continue
        elif not is_speaking and len(buffer) >= MAX_UNITS:
            send(buffer)
            buffer = []
        buffer.append(unit)
    send(buffer)
    return segments


def flags_source(flags: Iterable[bool]) -> Callable[[int], bool]:
    """A ``speaking`` callable over scripted per-unit flags (T-1)."""
    table = list(flags)
    return lambda unit: bool(table[unit])


class SileroProbability:
    """L-C3/L-V5's VAD model: Silero VAD's JIT (the release vendors snakers4/silero-vad; senri reads the
    same model from the pinned ``silero-vad`` 6.2.0 wheel, loaded with torch alone because the package's own
    import pulls torchaudio). Callable on one 512-sample window at 16 kHz; ``reset()`` clears its state."""

    def __init__(self) -> None:
        import importlib.util
        from pathlib import Path

        import torch

        spec = importlib.util.find_spec("silero_vad")
        if spec is None or not spec.submodule_search_locations:
            raise ImportError("Light-Omni's VAD needs the silero-vad==6.2.0 package (make install puts it in "
                              "the venv): its silero_vad.jit is the model")
        path = Path(list(spec.submodule_search_locations)[0]) / "data" / "silero_vad.jit"
        if not path.is_file():
            raise FileNotFoundError(f"{path}: silero-vad's JIT model is missing from the installed package")
        self._torch = torch
        # one thread: a 512-sample window gains nothing from more, and on a loaded node torch's default pool
        # makes each window ~30× slower (measured: 3 s a unit against 0.1 s); the build's process runs no other
        # torch work (the model is in its worker)
        torch.set_num_threads(1)
        self.model = torch.jit.load(str(path), map_location="cpu")
        self.model.eval()

    def __call__(self, window: np.ndarray) -> float:
        with self._torch.no_grad():
            return float(self.model(self._torch.from_numpy(np.ascontiguousarray(window, dtype=np.float32)),
                                    SAMPLE_RATE).item())

    def reset(self) -> None:
        self.model.reset_states()


def silero_activity() -> VoiceActivity:
    """The release's VADHandler: Silero with threshold 0.5, 1000 ms min silence, 100 ms pad."""
    model = SileroProbability()
    return VoiceActivity(model, reset_model=model.reset)
