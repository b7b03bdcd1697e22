"""Needle-in-a-video-haystack: short needle clips spliced into long haystack videos at spread positions.

VideoLucy's experiment (its Fig. 4): 10-s needle clips inserted at five timestamps from the beginning to the
end of long videos (400–4000 s), four questions per needle, 20 per video, accuracy against video length.
Here a haystack is a generated walk (:mod:`senri.demo`, several walks back to back when one is too short) or
a user's video; a needle is a generated clip whose answers are visible text (a shop sign, what I am doing,
a board with a count, something passing by), or a user's clip with its own questions. Needle ``k`` of a
video goes to the haystack position ``positions[k]`` (a fraction of the haystack: 0 = before its first
frame, 1 = after its last); user clips rotate over the positions from video to video, so every clip is seen
at every position.

Splicing is exact by frame count: every piece is brought to the output's rate and size, cut to a whole
number of frames, and concatenated, so a needle starts at ``frames_before / fps`` seconds — the question's
evidence window. Generated questions take their distractors from the other needles of the same video
(same kind: place names, activities, counts, passers-by), so the memory holds every option and only the
right part of it answers the question. Everything follows from the seed.

Outputs (``results/needle/``): ``videos/<id>.mp4``, ``questions.jsonl`` (SENRI format plus ``needle_id``,
``needle_position``, ``needle_positions``, ``needle_fraction``, ``haystack_s``), ``needles.parquet`` (one
row per question: those fields and the needle's window), ``clips/`` (generated needle clips).
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import polars as pl

from senri import demo
from senri.media import ffprobe_json
from senri.records import LETTERS

#: Needle content pools, disjoint from the demo's (haystack) names so a haystack never answers a needle
#: question, and paired at random so no option follows from another by meaning.
NEEDLE_PLACES = (
    "KITE SHOP", "CLOCK TOWER", "SURF SCHOOL", "PET GROOMER", "DENTIST", "BARBER", "GREENHOUSE",
    "OBSERVATORY", "BOWLING ALLEY", "LAUNDROMAT", "PIANO STUDIO", "POTTERY CLASS", "CANDLE SHOP",
    "YOGA STUDIO", "SKATE PARK", "FIRE STATION", "PLANETARIUM", "AQUARIUM", "SPICE MARKET", "HAT MAKER",
)
NEEDLE_ACTIVITIES = (
    ("tying a balloon", "Tied a balloon"), ("peeling an orange", "Peeled an orange"),
    ("zipping my jacket", "Zipped my jacket"), ("filling a bottle", "Filled a bottle"),
    ("signing a form", "Signed a form"), ("folding a map", "Folded a map"),
    ("charging my phone", "Charged my phone"), ("sharpening a pencil", "Sharpened a pencil"),
    ("stamping a card", "Stamped a card"), ("wrapping a gift", "Wrapped a gift"),
    ("cleaning my glasses", "Cleaned my glasses"), ("lacing my boots", "Laced my boots"),
    ("writing a postcard", "Wrote a postcard"), ("scanning a code", "Scanned a code"),
    ("blowing bubbles", "Blew bubbles"), ("sorting receipts", "Sorted receipts"),
    ("hanging a coat", "Hung a coat"), ("rolling a poster", "Rolled a poster"),
    ("testing a pen", "Tested a pen"), ("locking a bike", "Locked a bike"),
)
NEEDLE_ITEMS = ("TICKETS", "CHAIRS", "LAMPS", "BOXES", "ROOMS", "SEATS", "TABLES", "BIKES")
NEEDLE_PASSERS = (
    "A HOT AIR BALLOON", "A FIRE TRUCK", "A HORSE CARRIAGE", "A ROBOT", "A MARCHING BAND", "A PARADE FLOAT",
    "A TRAM", "A HELICOPTER", "A GARBAGE TRUCK", "A UNICYCLIST", "A STREET SWEEPER", "A WEDDING CAR",
    "A ROWING TEAM", "A CAMEL", "A FERRY", "A KITE SURFER",
)
NEEDLE_BACKGROUNDS = ("0x264653", "0xE76F51", "0x6A4C93", "0x1D3557", "0xBC6C25", "0x3A5A40", "0x9D0208",
                      "0x003049")
COUNTS = tuple(range(1, 10))
#: The question kinds of a generated needle, one per on-screen text: sign, caption, board, passer-by.
GENERATED_TASKS = ("L", "RER", "OC", "TER")


@dataclass(frozen=True)
class NeedleConfig:
    seed: int
    haystack_s: tuple[int, ...]
    videos_per_length: int
    positions: tuple[float, ...]
    needle_s: int
    width: int
    height: int
    fps: int
    gop_s: float
    place_s: int
    turn_s: int
    clips_dir: str | None = None
    clip_questions: tuple[str, ...] = ()
    clip_ext: tuple[str, ...] = (".mp4", ".mkv", ".mov")
    haystacks_dir: str | None = None
    #: generated needles: which of the four question kinds to ask (the paper asks four per needle)
    tasks: tuple[str, ...] = ("L", "RER", "OC", "TER")

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> "NeedleConfig":
        fields = {f.name: f for f in dataclasses.fields(cls)}
        missing = [n for n, f in fields.items() if n not in data and f.default is dataclasses.MISSING]
        if missing:
            raise KeyError(f"needle config lacks {missing}")
        values = {n: data[n] for n in fields if n in data}
        for name in ("haystack_s", "positions", "clip_questions", "clip_ext", "tasks"):
            if name in values:
                values[name] = tuple(values[name] or ())
        cfg = cls(**values)
        if not cfg.positions or any(not 0 <= p <= 1 for p in cfg.positions) or list(cfg.positions) != sorted(cfg.positions):
            raise ValueError(f"needle config positions: fractions in [0, 1], ascending; got {list(cfg.positions)}")
        if not cfg.tasks or set(cfg.tasks) - set(GENERATED_TASKS):
            raise ValueError(f"needle config tasks: a non-empty subset of {list(GENERATED_TASKS)}; got {list(cfg.tasks)}")
        if bool(cfg.clips_dir) != bool(cfg.clip_questions):
            raise ValueError("needle config: clips_dir and clip_questions go together (your clips and their questions)")
        return cfg

    @property
    def user_clips(self) -> bool:
        return bool(self.clips_dir)


@dataclass(frozen=True)
class GeneratedNeedle:
    """What a generated needle clip shows: every answer of its four questions is text on screen."""

    needle_id: str
    place: str
    activity: str
    activity_past: str
    item: str
    count: int
    passer: str
    background: str


@dataclass(frozen=True)
class Haystack:
    video_id: str
    length_s: int | None       # None: a user's haystack (its length is probed)
    source: str | None         # a user's haystack video, else generated walks
    replicate: int


# --------------------------------------------------------------------------------------------- planning


def haystacks(cfg: NeedleConfig) -> list[Haystack]:
    """Every output video, in a fixed order: user haystacks (sorted by name) or lengths × replicates."""
    if cfg.haystacks_dir:
        files = sorted(p for p in Path(cfg.haystacks_dir).iterdir() if p.suffix.lower() in cfg.clip_ext)
        return [Haystack(f"needle_{p.stem}", None, str(p), i) for i, p in enumerate(files)]
    return [Haystack(f"needle_{length:04d}s_{r + 1:02d}", int(length), None, r)
            for length in cfg.haystack_s for r in range(cfg.videos_per_length)]


def video_ids(cfg: NeedleConfig) -> list[str]:
    return [h.video_id for h in haystacks(cfg)]


def find_haystack(cfg: NeedleConfig, video_id: str) -> Haystack:
    for haystack in haystacks(cfg):
        if haystack.video_id == video_id:
            return haystack
    raise KeyError(f"needle: unknown video {video_id!r}; this config makes {video_ids(cfg)}")


def plan_needles(cfg: NeedleConfig, video_id: str) -> list[GeneratedNeedle]:
    """The generated needles of one video (one per position), all different from each other."""
    n = len(cfg.positions)
    pools = (NEEDLE_PLACES, NEEDLE_ACTIVITIES, NEEDLE_PASSERS)
    if n > min(len(p) for p in pools) or n > len(NEEDLE_ITEMS) * len(COUNTS):
        raise ValueError(f"needle: {n} positions exceed the needle name pools")
    rng = random.Random(f"senri-needle:{cfg.seed}:{video_id}")
    places = rng.sample(NEEDLE_PLACES, n)
    activities = rng.sample(NEEDLE_ACTIVITIES, n)
    passers = rng.sample(NEEDLE_PASSERS, n)
    counts = rng.sample(COUNTS, n)
    backgrounds = [rng.choice(NEEDLE_BACKGROUNDS) for _ in range(n)]
    items = [rng.choice(NEEDLE_ITEMS) for _ in range(n)]
    return [GeneratedNeedle(f"{video_id}_n{k + 1}", places[k], activities[k][0], activities[k][1], items[k],
                            counts[k], passers[k], backgrounds[k]) for k in range(n)]


def insertion_frames(haystack_frames: int, positions: Sequence[float]) -> list[int]:
    """Haystack frame index before which each needle goes (0 = at the start, ``haystack_frames`` = at the end)."""
    return [min(haystack_frames, max(0, round(p * haystack_frames))) for p in positions]


@dataclass(frozen=True)
class Placement:
    needle_index: int          # position index k (0 = nearest the beginning)
    start_frame: int           # in the spliced video
    n_frames: int

    def window_s(self, fps: int) -> tuple[float, float]:
        return self.start_frame / fps, (self.start_frame + self.n_frames) / fps


def placements(haystack_frames: int, needle_frames: Sequence[int], positions: Sequence[float]) -> list[Placement]:
    """Where each needle lands in the spliced video: every earlier needle shifts the later ones."""
    out, shift = [], 0
    for k, (cut, frames) in enumerate(zip(insertion_frames(haystack_frames, positions), needle_frames)):
        out.append(Placement(k, cut + shift, frames))
        shift += frames
    return out


# --------------------------------------------------------------------------------------------- questions


def _options(correct: str, same_kind: Sequence[str], pool: Sequence[str], letter: str,
             rng: random.Random) -> list[str]:
    """Four options, ``correct`` at ``letter``: distractors from this video's other needles first (the memory
    holds them too), topped up from the pool of the same kind."""
    others = [o for o in dict.fromkeys(same_kind) if o != correct]
    rng.shuffle(others)
    extra = [o for o in pool if o != correct and o not in others]
    rng.shuffle(extra)
    chosen = (others + extra)[:3]
    if len(chosen) < 3:
        raise ValueError(f"needle: fewer than 3 distractors for {correct!r}")
    slot = LETTERS.index(letter)
    return chosen[:slot] + [correct] + chosen[slot:]


def generated_questions(needles: Sequence[GeneratedNeedle], video_id: str, seed: int,
                        tasks: Sequence[str] = GENERATED_TASKS) -> list[dict[str, Any]]:
    """Up to four questions per needle (L, RER, OC, TER; those in ``tasks``), answer letters balanced over
    the video."""
    rng = random.Random(f"senri-needle-questions:{seed}:{video_id}")
    letters = [LETTERS[i % 4] for i in range(len(tasks) * len(needles))]
    rng.shuffle(letters)
    title = demo._title
    places = [title(n.place) for n in needles]
    pasts = [n.activity_past for n in needles]
    passers = [n.passer.capitalize() for n in needles]
    questions = []
    for k, needle in enumerate(needles):
        place = title(needle.place)
        item = needle.item.lower()
        specs = [
            ("L", f"Where was I when I was {needle.activity}?", place, places,
             [title(p) for p in NEEDLE_PLACES]),
            ("RER", f"What did I do at the {place}?", needle.activity_past, pasts,
             [a[1] for a in NEEDLE_ACTIVITIES]),
            ("OC", f"How many {item} were left according to the board at the {place}?", str(needle.count),
             [str(n.count) for n in needles], [str(c) for c in COUNTS]),
            ("TER", f"What passed by while I was at the {place}?", needle.passer.capitalize(), passers,
             [p.capitalize() for p in NEEDLE_PASSERS]),
        ]
        specs = [spec for spec in specs if spec[0] in tasks]
        for j, (task, text, correct, same_kind, pool) in enumerate(specs):
            letter = letters[len(specs) * k + j]
            questions.append({"video_id": video_id, "qid": f"{video_id}_p{k + 1}_{task}", "task_type": task,
                              "question": text, "options": _options(correct, same_kind, pool, letter, rng),
                              "answer": letter, "needle_id": needle.needle_id, "needle_position": k})
    return questions


def user_clip_questions(cfg: NeedleConfig) -> dict[str, list[dict[str, Any]]]:
    """The user's questions per clip id, validated like any question file (4 options, answer A–D, the clip
    exists, ...); evidence windows, when given, are seconds within the clip."""
    from senri.ingest import ingest

    table = ingest(list(cfg.clip_questions), cfg.clips_dir, list(cfg.clip_ext))
    by_clip: dict[str, list[dict[str, Any]]] = {}
    for row in table.iter_rows(named=True):
        by_clip.setdefault(row["video_id"], []).append(row)
    return by_clip


def user_clip_order(cfg: NeedleConfig, clip_ids: Sequence[str], video_index: int) -> list[str]:
    """The clips of one video, one per position: a rotation by the video's index over the sorted clip ids,
    so across videos every clip visits every position (as far as there are videos)."""
    n = len(cfg.positions)
    ids = sorted(clip_ids)
    if len(ids) < n:
        raise ValueError(f"needle: {len(ids)} user clips for {n} positions; give at least {n}")
    return [ids[(video_index + k) % len(ids)] for k in range(n)]


# --------------------------------------------------------------------------------------------- rendering


def render_needle_clip(needle: GeneratedNeedle, cfg: NeedleConfig, out: Path, threads: int = 1) -> Path:
    """A ``needle_s`` clip: shop sign at the top, the board with its count, what I am doing (caption) and
    something passing by — all large text, still for the whole clip except the passer, for OCR to read."""
    font = demo.find_font()
    w, h, d = cfg.width, cfg.height, cfg.needle_s
    text = demo._text
    chain = ",".join([
        f"color=c={needle.background}:s={w}x{h}:r={cfg.fps}:d={d}",
        text(font, needle.place, h // 9, "(w-text_w)/2", str(h // 12), box="white"),
        text(font, f"{needle.item} LEFT {needle.count}", h // 14, str(w // 20), str(h * 3 // 8), box="0xF2E8CF"),
        text(font, needle.activity.upper(), h // 14, "(w-text_w)/2", str(h * 9 // 16), color="white",
             box="0x202020"),
        # The passer crosses slowly (half the width over the clip) so several OCR samples read it.
        text(font, needle.passer, h // 12, f"w*0.55-w*0.5*t/{d}", str(h * 3 // 4), box="0xFFD166"),
        "format=yuv420p,setsar=1[v]",
    ])
    args = ["-y", "-filter_complex", chain, "-map", "[v]"]
    return demo.encode_atomically(args, out, cfg.fps, cfg.gop_s, threads, what=f"rendering needle clip {out}")


def render_haystack(cfg: NeedleConfig, haystack: Haystack, work_dir: Path, threads: int = 1) -> list[Path]:
    """Walk videos that together last at least the haystack's length (one walk holds at most the demo's
    name pools; longer haystacks are several walks back to back)."""
    assert haystack.length_s is not None
    period = cfg.place_s + cfg.turn_s
    max_places = min(len(demo.PLACES), len(demo.BACKGROUNDS), len(demo.PASSERS) - 1)
    parts, total, k = [], 0, 0
    while total < haystack.length_s:
        remaining = haystack.length_s - total
        places = min(max_places, max(5, math.ceil((remaining + cfg.turn_s) / period)))
        walk_cfg = demo.DemoConfig(n_videos=1, seed=cfg.seed, places_per_video=places, place_s=cfg.place_s,
                                   turn_s=cfg.turn_s, width=cfg.width, height=cfg.height, fps=cfg.fps,
                                   gop_s=cfg.gop_s)
        walk = demo.plan_walk(walk_cfg, f"{haystack.video_id}_walk_{k + 1:02d}")
        walk = dataclasses.replace(walk, has_audio=False)
        parts.append(demo.render_video(walk, work_dir / f"{walk.video_id}.mp4", threads=threads))
        total += walk.duration_s
        k += 1
    return parts


def _normalize(label_in: str, cfg: NeedleConfig, n_frames: int, label_out: str) -> str:
    """A filter chain bringing any video to the output's rate, size and pixel format, exactly ``n_frames``
    long (a short input is held on its last frame)."""
    w, h, fps = cfg.width, cfg.height, cfg.fps
    return (f"[{label_in}]fps={fps},scale={w}:{h}:force_original_aspect_ratio=decrease,"
            f"pad={w}:{h}:(ow-iw)/2:(oh-ih)/2,setsar=1,format=yuv420p,"
            f"tpad=stop_mode=clone:stop_duration={n_frames / fps + 1},trim=end_frame={n_frames},"
            f"setpts=N/({fps}*TB)[{label_out}]")


def video_frames(path: Path, fps: int) -> int:
    """Frames of ``path`` at ``fps`` covering its whole duration (the normalizing chain pads the last one)."""
    info = ffprobe_json(path, ["-show_entries", "format=duration"])
    return max(1, math.ceil(float(info["format"]["duration"]) * fps - 1e-6))


def splice(haystack_parts: Sequence[Path], haystack_frames: int, needle_clips: Sequence[Path],
           needle_frames: Sequence[int], cfg: NeedleConfig, out: Path, threads: int = 1) -> list[Placement]:
    """Write the haystack (its parts back to back, cut to ``haystack_frames``) with needle ``k`` inserted at
    ``positions[k]``; every piece is a whole number of frames, so the returned placements are exact.

    Each haystack stretch is its own input of the joined haystack, seeked to its start, rather than one
    decode split n+1 ways: a split would queue every frame of the later stretches in memory while the
    earlier ones are encoded.
    """
    fps = cfg.fps
    cuts = insertion_frames(haystack_frames, cfg.positions)
    bounds = [0, *cuts, haystack_frames]
    joined = out.with_name(f".{out.stem}.haystack{out.suffix}")
    chains: list[str] = []
    try:
        # The haystack, its parts joined and cut to length once (the stretches below seek into it).
        inputs = [a for p in haystack_parts for a in ("-i", str(p))]
        part_labels = "".join(f"[{i}:v]" for i in range(len(haystack_parts)))
        join = (f"{part_labels}concat=n={len(haystack_parts)}:v=1:a=0[joined];"
                + _normalize("joined", cfg, haystack_frames, "v"))
        demo.encode_atomically(["-y", *inputs, "-filter_complex", join, "-map", "[v]"], joined, fps,
                               cfg.gop_s, threads, what=f"joining the haystack of {out}")
        args, labels, n_inputs = ["-y"], [], 0
        for k in range(len(bounds) - 1):
            start, end = bounds[k], bounds[k + 1]
            if end > start:
                args += ["-ss", f"{start / fps:.6f}", "-i", str(joined)]
                chains.append(_normalize(f"{n_inputs}:v", cfg, end - start, f"h{k}"))
                labels.append(f"[h{k}]")
                n_inputs += 1
            if k < len(needle_clips):
                args += ["-i", str(needle_clips[k])]
                chains.append(_normalize(f"{n_inputs}:v", cfg, needle_frames[k], f"n{k}"))
                labels.append(f"[n{k}]")
                n_inputs += 1
        total = haystack_frames + sum(needle_frames)
        chains.append(f"{''.join(labels)}concat=n={len(labels)}:v=1:a=0[cat]")
        chains.append(demo.index_strip_source(fps, total / fps, "strip"))
        chains.append("[cat][strip]overlay=x=0:y=0:shortest=1[v]")
        args += ["-filter_complex", ";".join(chains), "-map", "[v]"]
        demo.encode_atomically(args, out, fps, cfg.gop_s, threads, what=f"splicing needles into {out}")
    finally:
        joined.unlink(missing_ok=True)
    return placements(haystack_frames, needle_frames, cfg.positions)


# --------------------------------------------------------------------------------------------- the stage


def build_video(cfg: NeedleConfig, video_id: str, out_dir: Path, threads: int = 1) -> list[dict[str, Any]]:
    """Render one needle video and return its questions (SENRI format plus the needle fields)."""
    haystack = find_haystack(cfg, video_id)
    work = out_dir / "work" / video_id
    work.mkdir(parents=True, exist_ok=True)
    if haystack.source:
        parts = [Path(haystack.source)]
        haystack_frames = video_frames(parts[0], cfg.fps)
    else:
        parts = render_haystack(cfg, haystack, work, threads)
        haystack_frames = int(haystack.length_s) * cfg.fps
    if cfg.user_clips:
        by_clip = user_clip_questions(cfg)
        order = user_clip_order(cfg, list(by_clip), haystacks(cfg).index(haystack))
        from senri.ingest import find_video

        clips = [find_video(cfg.clips_dir, clip_id, cfg.clip_ext) for clip_id in order]
        needle_frames = [video_frames(Path(c), cfg.fps) for c in clips]
    else:
        needles = plan_needles(cfg, video_id)
        clips = [render_needle_clip(n, cfg, out_dir / "clips" / f"{n.needle_id}.mp4", threads) for n in needles]
        needle_frames = [cfg.needle_s * cfg.fps] * len(needles)
    video = out_dir / "videos" / f"{video_id}.mp4"
    placed = splice(parts, haystack_frames, [Path(c) for c in clips], needle_frames, cfg, video, threads)
    for part in parts if not haystack.source else []:
        part.unlink(missing_ok=True)
    haystack_s = haystack_frames / cfg.fps
    if cfg.user_clips:
        questions = []
        for placement, clip_id in zip(placed, order):
            for row in by_clip[clip_id]:
                questions.append(_user_question(row, clip_id, placement, video_id, cfg.fps))
    else:
        questions = generated_questions(needles, video_id, cfg.seed, cfg.tasks)
    windows = {p.needle_index: p.window_s(cfg.fps) for p in placed}
    for q in questions:
        k = q["needle_position"]
        start, end = windows[k]
        q.setdefault("evidence_start_s", start)
        q.setdefault("evidence_end_s", end)
        q.update(needle_start_s=start, needle_end_s=end, needle_positions=len(cfg.positions),
                 needle_fraction=cfg.positions[k], haystack_s=haystack_s)
    return questions


def _user_question(row: Mapping[str, Any], clip_id: str, placement: Placement, video_id: str,
                   fps: int) -> dict[str, Any]:
    start, end = placement.window_s(fps)
    ev_start, ev_end = row.get("evidence_start_s"), row.get("evidence_end_s")
    clamp = lambda t: min(end, max(start, start + t))  # noqa: E731 — clip time → video time, inside the needle
    return {"video_id": video_id, "qid": f"{video_id}_p{placement.needle_index + 1}_{row['qid']}",
            "task_type": row["task_type"], "question": row["question"],
            "options": [row[f"option_{c}"] for c in "abcd"], "answer": row["answer"],
            "needle_id": clip_id, "needle_position": placement.needle_index,
            "evidence_start_s": clamp(ev_start) if ev_start is not None else start,
            "evidence_end_s": clamp(ev_end) if ev_end is not None else end}


NEEDLE_COLUMNS = ("video_id", "qid", "task_type", "needle_id", "needle_position", "needle_positions",
                  "needle_fraction", "haystack_s", "needle_start_s", "needle_end_s")


def write_outputs(questions: Iterable[Mapping[str, Any]], out_dir: Path) -> pl.DataFrame:
    """``questions.jsonl`` (what ingest reads) and ``needles.parquet`` (what the report's figure reads)."""
    questions = list(questions)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "questions.jsonl").write_text("".join(json.dumps(q, ensure_ascii=False) + "\n" for q in questions))
    table = pl.DataFrame([{c: q[c] for c in NEEDLE_COLUMNS} for q in questions],
                         schema={"video_id": pl.Utf8, "qid": pl.Utf8, "task_type": pl.Utf8, "needle_id": pl.Utf8,
                                 "needle_position": pl.Int64, "needle_positions": pl.Int64,
                                 "needle_fraction": pl.Float64, "haystack_s": pl.Float64,
                                 "needle_start_s": pl.Float64, "needle_end_s": pl.Float64})
    table.write_parquet(out_dir / "needles.parquet")
    return table


def per_video_questions(out_dir: Path, video_id: str) -> Path:
    return out_dir / "questions" / f"{video_id}.jsonl"


def build(cfg: NeedleConfig, out_dir: Path, video_id: str, threads: int = 1) -> Path:
    """The needle stage's per-video job: ``videos/<id>.mp4`` and ``questions/<id>.jsonl``."""
    questions = build_video(cfg, video_id, out_dir, threads)
    path = per_video_questions(out_dir, video_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(q, ensure_ascii=False) + "\n" for q in questions))
    return path


def merge(cfg: NeedleConfig, out_dir: Path) -> pl.DataFrame:
    """Gather every video's questions, in the config's video order, into the dataset's question file."""
    questions = []
    for video_id in video_ids(cfg):
        path = per_video_questions(out_dir, video_id)
        questions += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return write_outputs(questions, out_dir)
