"""A generated demo benchmark: egocentric-style walks rendered with ffmpeg, and questions right by construction.

Each video is a walk through named places joined by left/right turns. At each place the camera sees a sign
with the place's name, a landmark to the front left or front right, a row of countable coloured squares, and
for a few seconds an action caption ("TASTING TEA") standing for what the wearer does there. During each turn
the view pans over a texture (content moving left = turning right) while something passes by ("A CYCLIST").
Every question is derived from the same :class:`Walk` that drives the rendering, so its answer is known, and
answer letters are balanced per video.

A 20-bit frame-index strip is burned into the top 8 rows (bit b is the luma of x ∈ [32b, 32b+32): bright = 1)
so decoding can be checked frame-exactly against the pixels; :func:`read_frame_index` decodes it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from senri.media import run_ffmpeg
from senri.benchmarks.senri.taxonomy import TASK_TYPES
from senri.records import LETTERS

PLACES = (
    "BAKERY", "MUSEUM", "TEA HOUSE", "BOOKSHOP", "PHARMACY", "FLOWER MARKET", "SUBWAY STATION", "BANK",
    "POST OFFICE", "NOODLE BAR", "TOY STORE", "CAMERA SHOP", "FISH POND", "ICE CREAM STAND", "LIBRARY",
    "BUS STOP", "FOOD COURT", "SHOE STORE", "ART GALLERY", "FRUIT STALL", "PARK GATE", "CINEMA", "HOTEL LOBBY",
    "CAFE",
)
#: (what the wearer is doing, the same as a past-tense answer option)
EVENTS = (
    ("tasting tea", "Tasted tea"), ("buying bread", "Bought bread"), ("reading a map", "Read a map"),
    ("paying at the counter", "Paid at the counter"), ("taking a photo", "Took a photo"),
    ("feeding the fish", "Fed the fish"), ("tying my shoes", "Tied my shoes"),
    ("checking my phone", "Checked my phone"), ("drinking water", "Drank water"),
    ("waving to a friend", "Waved to a friend"), ("picking up a book", "Picked up a book"),
    ("throwing away trash", "Threw away trash"), ("smelling flowers", "Smelled flowers"),
    ("buying a ticket", "Bought a ticket"), ("eating noodles", "Ate noodles"),
    ("trying on a hat", "Tried on a hat"), ("sitting on a bench", "Sat on a bench"),
    ("asking for directions", "Asked for directions"), ("washing my hands", "Washed my hands"),
    ("opening an umbrella", "Opened an umbrella"), ("sending a letter", "Sent a letter"),
    ("counting coins", "Counted coins"), ("stroking a cat", "Stroked a cat"), ("buying fruit", "Bought fruit"),
)
LANDMARKS = ("EXIT", "ELEVATOR", "STAIRS", "RESTROOM", "ATM", "INFO DESK")
PASSERS = (
    "A CYCLIST", "A DOG", "A DELIVERY VAN", "A STREET MUSICIAN", "A BALLOON SELLER", "A TAXI", "A JOGGER",
    "A POLICE CAR", "A SKATEBOARDER", "A TOUR GROUP", "A FOOD CART", "A MAIL CARRIER", "A RED BUS",
    "A WINDOW CLEANER",
)
OBJECT_COLORS = {"red": "0xD03030", "blue": "0x3050D0", "green": "0x30A040", "yellow": "0xE0C020",
                 "white": "0xF0F0F0"}
BACKGROUNDS = ("0x6B705C", "0x3D405B", "0x81B29A", "0x7F5539", "0x5E548E", "0x2A9D8F", "0x8D99AE",
               "0x6D597A", "0x355070", "0x9C6644", "0x52796F", "0x4A4E69")
RELATIONS = ("To my front left", "To my front right", "To my rear left", "To my rear right")
#: Questions per video and task type when the config names none: 16 a video, every type at least twice.
QUESTIONS_PER_TASK: Mapping[str, int] = {"L": 3, "RR": 2, "OC": 3, "NP": 2, "RER": 3, "TER": 3}
#: geq expression of the turn panorama: a static, non-repeating texture, strongest at coarse scales so optical
#: flow follows large pans without locking onto a repeated pattern.
PANORAMA = ("geq=lum='128+45*sin(X/29+2*sin(Y/41))+35*sin(Y/17+X/61)+25*sin((X+Y)/11+3*sin(X/97))'"
            ":cb='128+50*sin(X/83+Y/59)':cr='128+50*cos(X/47-Y/71)'")
INDEX_BITS = 20
INDEX_BIT_WIDTH = 32
INDEX_STRIP_ROWS = 8
FONT_CANDIDATES = (
    "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans-Bold.ttf",
)


@dataclass(frozen=True)
class DemoConfig:
    n_videos: int
    seed: int
    places_per_video: int
    place_s: int
    turn_s: int
    width: int
    height: int
    fps: int
    gop_s: float
    #: The synthetic camera's horizontal field of view: a turn of θ pans the view by f·θ pixels,
    #: f = (width/2)/tan(hfov/2), so the ego-motion track can recover the angle.
    camera_hfov_deg: float = 90.0
    turn_deg: int = 90
    #: Questions per video and task type. The demo's size is its run time (answer jobs cost per question),
    #: so `make demo` asks fewer than the default; the letters stay balanced, so the total must divide by 4.
    questions_per_task: Mapping[str, int] = dataclasses.field(default_factory=lambda: dict(QUESTIONS_PER_TASK))

    def __post_init__(self) -> None:
        counts, where = self.questions_per_task, "config.dataset.demo.questions_per_task"
        unknown = sorted(set(counts) - set(TASK_TYPES))
        if unknown:
            raise ValueError(f"{where} names unknown task types {unknown} (known: {', '.join(TASK_TYPES)})")
        total = sum(counts.values())
        if total == 0 or total % len(LETTERS):
            raise ValueError(f"{where} sums to {total} a video; answer letters are balanced per video, so it "
                             f"must be a positive multiple of {len(LETTERS)}")
        # Distinct subjects per type: places, routes over three turns (NP), turns (TER).
        n = self.places_per_video
        limits = {"L": n, "RR": n, "OC": n, "RER": n, "NP": n - 3, "TER": n - 1}
        over = {task: (k, limits[task]) for task, k in counts.items() if k > limits[task]}
        if over:
            raise ValueError(f"{where} asks more than {n} places a video allow: {over} (asked, most)")

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> "DemoConfig":
        fields = dataclasses.fields(cls)
        required = [f for f in fields if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
        missing = [f.name for f in required if f.name not in data]
        if missing:
            raise KeyError(f"demo config lacks {missing}")
        return cls(**{f.name: data[f.name] for f in fields if f.name in data})


@dataclass(frozen=True)
class Place:
    name: str
    start_s: int
    end_s: int
    background: str
    event: str
    event_past: str
    event_start_s: int
    event_end_s: int
    object_color: str
    object_count: int
    landmark: str
    landmark_side: str  # "left" | "right"


@dataclass(frozen=True)
class Turn:
    direction: str  # "left" | "right"
    passer: str
    start_s: int
    end_s: int
    degrees: int = 90


@dataclass(frozen=True)
class Walk:
    video_id: str
    places: tuple[Place, ...]
    turns: tuple[Turn, ...]
    duration_s: int
    width: int
    height: int
    fps: int
    gop_s: float
    has_audio: bool
    camera_hfov_deg: float = 90.0

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def video_ids(cfg: DemoConfig) -> list[str]:
    return [f"demo_{i + 1:02d}" for i in range(cfg.n_videos)]


def plan_walk(cfg: DemoConfig, video_id: str) -> Walk:
    """The deterministic script of one demo video (same config and id → same walk)."""
    if cfg.places_per_video > min(len(PLACES), len(BACKGROUNDS), len(PASSERS) - 1):
        raise ValueError(f"demo: places_per_video {cfg.places_per_video} exceeds the name pools")
    rng = random.Random(f"senri-demo:{cfg.seed}:{video_id}")
    n = cfg.places_per_video
    names = rng.sample(PLACES, n)
    events = rng.sample(EVENTS, n)
    backgrounds = rng.sample(BACKGROUNDS, n)
    passers = rng.sample(PASSERS, n - 1)
    places, turns = [], []
    period = cfg.place_s + cfg.turn_s
    for i in range(n):
        start = i * period
        places.append(
            Place(
                name=names[i],
                start_s=start,
                end_s=start + cfg.place_s,
                background=backgrounds[i],
                event=events[i][0],
                event_past=events[i][1],
                event_start_s=start + round(cfg.place_s * 0.35),
                event_end_s=start + round(cfg.place_s * 0.7),
                object_color=rng.choice(sorted(OBJECT_COLORS)),
                object_count=rng.randint(1, 6),
                landmark=rng.choice(LANDMARKS),
                landmark_side=rng.choice(("left", "right")),
            )
        )
        if i < n - 1:
            turns.append(
                Turn(rng.choice(("left", "right")), passers[i], start + cfg.place_s, start + period, cfg.turn_deg)
            )
    index = int(video_id.rsplit("_", 1)[-1]) if video_id.rsplit("_", 1)[-1].isdigit() else 0
    return Walk(
        video_id=video_id,
        places=tuple(places),
        turns=tuple(turns),
        duration_s=n * cfg.place_s + (n - 1) * cfg.turn_s,
        width=cfg.width,
        height=cfg.height,
        fps=cfg.fps,
        gop_s=cfg.gop_s,
        has_audio=index % 2 == 1,  # odd videos carry an audio track, even ones none: both kinds get probed
        camera_hfov_deg=cfg.camera_hfov_deg,
    )


# --------------------------------------------------------------------------------------------- questions


def _title(name: str) -> str:
    return name.title()


def _options(correct: str, distractors: Sequence[str], letter: str, rng: random.Random) -> tuple[list[str], str]:
    """Four distinct options with ``correct`` at ``letter``'s position, distractors in random order."""
    others = list(dict.fromkeys(d for d in distractors if d != correct))
    if len(others) < 3:
        raise ValueError(f"need 3 distractors distinct from {correct!r}, got {others!r}")
    others = rng.sample(others, 3)
    slot = LETTERS.index(letter)
    return others[:slot] + [correct] + others[slot:], letter


def _turn_phrase(directions: Sequence[str]) -> str:
    steps = [f"turn {d}" for d in directions]
    text = ", ".join(steps[:-1]) + f", then {steps[-1]}" if len(steps) > 1 else steps[0]
    return text[0].upper() + text[1:]


def make_questions(walk: Walk, seed: int,
                   per_task: Mapping[str, int] = QUESTIONS_PER_TASK) -> list[dict[str, Any]]:
    """SENRI-format questions about ``walk``, ``per_task[t]`` of each task type t (by default 3 L, 2 RR, 3 OC,
    2 NP, 3 RER, 3 TER); letters balanced. Each type draws its subjects in a fixed order, so the default
    counts give the same questions as ever."""
    rng = random.Random(f"senri-demo-questions:{seed}:{walk.video_id}")
    places, turns = walk.places, walk.turns
    count = {task: per_task.get(task, 0) for task in TASK_TYPES}
    plan: list[tuple[str, Any]] = (
        [("L", p) for p in rng.sample(places, count["L"])]
        + [("RR", p) for p in rng.sample(places, count["RR"])]
        + [("OC", p) for p in rng.sample(places, count["OC"])]
        + [("NP", i) for i in rng.sample(range(len(places) - 3), count["NP"])]
        + [("RER", p) for p in rng.sample(places, count["RER"])]
        + [("TER", i) for i in rng.sample(range(len(turns)), count["TER"])]
    )
    letters = [LETTERS[i % 4] for i in range(len(plan))]
    rng.shuffle(letters)
    counters: dict[str, int] = {}
    questions = []
    for (task, subject), letter in zip(plan, letters):
        counters[task] = counters.get(task, 0) + 1
        if task == "L":
            text = f"Where was I when I was {subject.event}?"
            options, answer = _options(
                _title(subject.name), [_title(p.name) for p in places], letter, rng
            )
            evidence = (subject.event_start_s, subject.event_end_s)
        elif task == "RR":
            text = f"When I was {subject.event}, where was the {subject.landmark.lower()} sign relative to me?"
            correct = RELATIONS[0] if subject.landmark_side == "left" else RELATIONS[1]
            options, answer = _options(correct, RELATIONS, letter, rng)
            evidence = (subject.event_start_s, subject.event_end_s)
        elif task == "OC":
            text = f"When I was {subject.event}, how many {subject.object_color} squares were in front of me?"
            options, answer = _options(
                str(subject.object_count), [str(c) for c in range(1, 8)], letter, rng
            )
            evidence = (subject.event_start_s, subject.event_end_s)
        elif task == "NP":
            start, end = places[subject], places[subject + 3]
            route = [t.direction for t in turns[subject : subject + 3]]
            flip = {"left": "right", "right": "left"}
            variants = [
                _turn_phrase(route[:k] + [flip[route[k]]] + route[k + 1 :]) for k in range(len(route))
            ]
            text = f"After I left the {_title(start.name)}, how did I walk to the {_title(end.name)}?"
            options, answer = _options(_turn_phrase(route), variants, letter, rng)
            evidence = (start.end_s, end.start_s)
        elif task == "RER":
            text = f"What did I do at the {_title(subject.name)}?"
            options, answer = _options(subject.event_past, [p.event_past for p in places], letter, rng)
            evidence = (subject.start_s, subject.end_s)
        else:  # TER
            turn = turns[subject]
            seen_elsewhere = [t.passer for t in turns if t is not turn]
            unseen = [p for p in PASSERS if p not in {t.passer for t in turns}]
            distractors = rng.sample(seen_elsewhere, 2) + rng.sample(unseen, 1)
            text = (
                f"What did I see while walking from the {_title(places[subject].name)} "
                f"to the {_title(places[subject + 1].name)}?"
            )
            options, answer = _options(
                turn.passer.capitalize(), [d.capitalize() for d in distractors], letter, rng
            )
            evidence = (turn.start_s, turn.end_s)
        questions.append(
            {
                "video_id": walk.video_id,
                "qid": f"{walk.video_id}_{task}_{counters[task]}",
                "task_type": task,
                "question": text,
                "options": options,
                "answer": answer,
                "evidence_start_s": float(evidence[0]),
                "evidence_end_s": float(evidence[1]),
            }
        )
    return questions


# --------------------------------------------------------------------------------------------- rendering


def find_font() -> str:
    for candidate in FONT_CANDIDATES:
        if Path(candidate).is_file():
            return candidate
    if shutil.which("fc-match"):
        found = subprocess.run(
            ["fc-match", "-f", "%{file}", "DejaVu Sans:bold"], capture_output=True, text=True, check=False
        ).stdout.strip()
        if found and Path(found).is_file():
            return found
    raise FileNotFoundError("no TrueType font found for the demo's signs; install fonts-dejavu-core")


def _text(font: str, text: str, size: int, x: str, y: str, color: str = "black", box: str | None = None,
          enable: str | None = None) -> str:
    spec = f"drawtext=fontfile={font}:text='{text}':fontsize={size}:fontcolor={color}:x={x}:y={y}"
    if box:
        spec += f":box=1:boxcolor={box}:boxborderw=10"
    if enable:
        spec += f":enable='{enable}'"
    return spec


def _place_chain(place: Place, walk: Walk, font: str) -> str:
    w, h, duration = walk.width, walk.height, place.end_s - place.start_s
    filters = [f"color=c={place.background}:s={w}x{h}:r={walk.fps}:d={duration}"]
    filters.append(_text(font, place.name, h // 9, "(w-text_w)/2", str(h // 12), box="white"))
    side_x = str(w // 20) if place.landmark_side == "left" else f"w-text_w-{w // 20}"
    filters.append(_text(font, place.landmark, h // 16, side_x, str(h * 3 // 8), box="0xF2E8CF"))
    size, gap = h // 9, h // 18
    row_w = place.object_count * size + (place.object_count - 1) * gap
    for k in range(place.object_count):
        x = (w - row_w) // 2 + k * (size + gap)
        filters.append(
            f"drawbox=x={x}:y={h * 3 // 4}:w={size}:h={size}:color={OBJECT_COLORS[place.object_color]}:t=fill"
        )
    local_start, local_end = place.event_start_s - place.start_s, place.event_end_s - place.start_s
    filters.append(
        _text(font, place.event.upper(), h // 14, "(w-text_w)/2", str(h * 9 // 16), color="white",
              box="0x202020", enable=f"between(t,{local_start},{local_end - 1e-3})")
    )
    return ",".join(filters)


def pan_pixels(degrees: float, width: int, hfov_deg: float) -> float:
    """Horizontal image travel of a rotation by ``degrees`` for a pinhole camera of ``hfov_deg``."""
    focal = (width / 2) / math.tan(math.radians(hfov_deg) / 2)
    return focal * math.radians(degrees)


def _turn_chain(turn: Turn, walk: Walk, font: str) -> str:
    w, h, duration = walk.width, walk.height, turn.end_s - turn.start_s
    travel = round(pan_pixels(turn.degrees, w, walk.camera_hfov_deg))
    # Turning right moves the scene left in the frame: the crop window slides right over the texture.
    x = f"{travel}*t/{duration}" if turn.direction == "right" else f"{travel}-{travel}*t/{duration}"
    return ",".join(
        [
            # A still, textured panorama (one frame, looped): only the camera moves it, and every part of
            # it has texture for optical flow to follow.
            f"color=c=gray:s={w + travel + (w + travel) % 2}x{h}:r={walk.fps}:d=1,{PANORAMA},trim=end_frame=1,"
            f"loop=loop={duration * walk.fps - 1}:size=1:start=0,setpts=N/({walk.fps}*TB)",
            f"crop=w={w}:h={h}:x='{x}':y=0",
            _text(font, turn.passer, h // 12, f"w-(w+text_w)*t/{duration}", str(h // 2), box="0xFFD166"),
        ]
    )


def render_video(walk: Walk, out: Path, threads: int = 1) -> Path:
    """Encode ``walk`` to H.264 MP4 with a fixed GOP and B-frames, like an action camera's file.

    The bytes are reproducible for a given ``threads`` (x264's frame threads change its decisions), so the
    workflow always encodes with one thread per video and runs videos in parallel instead; the fingerprint
    of a demo video is then the same on every machine.
    """
    font = find_font()
    chains, labels = [], []
    segments: list[tuple[str, Any]] = []
    for i, place in enumerate(walk.places):
        segments.append(("place", place))
        if i < len(walk.turns):
            segments.append(("turn", walk.turns[i]))
    for k, (kind, segment) in enumerate(segments):
        chain = _place_chain(segment, walk, font) if kind == "place" else _turn_chain(segment, walk, font)
        chains.append(f"{chain},format=yuv420p,setsar=1[s{k}]")
        labels.append(f"[s{k}]")
    chains.append(f"{''.join(labels)}concat=n={len(labels)}:v=1:a=0[walk]")
    chains.append(index_strip_source(walk.fps, walk.duration_s, "strip"))
    chains.append("[walk][strip]overlay=x=0:y=0:shortest=1[v]")
    args = ["-y"]
    if walk.has_audio:
        args += ["-f", "lavfi", "-i", f"sine=frequency=440:sample_rate=48000:duration={walk.duration_s}"]
    args += ["-filter_complex", ";".join(chains), "-map", "[v]"]
    if walk.has_audio:
        args += ["-map", "0:a", "-c:a", "aac", "-b:a", "64k"]
    return encode_atomically(args, out, walk.fps, walk.gop_s, threads, what=f"rendering demo video {out}")


def encode_atomically(args: list[str], out: Path, fps: int, gop_s: float, threads: int, what: str) -> Path:
    """Run ffmpeg ``args`` (inputs, filters, maps) with the project's camera-like H.264 settings, writing
    ``out`` atomically: fixed GOP of ``gop_s``, B-frames, and reproducible bytes for a given ``threads``."""
    gop = max(1, round(gop_s * fps))
    args = [
        *args,
        "-c:v", "libx264", "-preset", "veryfast", "-crf", "23", "-pix_fmt", "yuv420p",
        "-g", str(gop), "-keyint_min", str(gop), "-sc_threshold", "0", "-bf", "2",
        "-threads", str(max(1, threads)), "-r", str(fps),
        "-map_metadata", "-1", "-fflags", "+bitexact", "-flags:v", "+bitexact", "-flags:a", "+bitexact",
        "-movflags", "+faststart",
    ]
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.stem}.tmp{out.suffix}")
    try:
        run_ffmpeg([*args, str(tmp)], what=what)
        tmp.replace(out)
    finally:
        tmp.unlink(missing_ok=True)
    return out


def index_strip_source(fps: int, duration_s: float, label: str) -> str:
    """An ffmpeg filter-graph source ``[label]``: the frame-index strip, to overlay at the top-left corner."""
    bit = f"mod(floor(N/pow(2,floor(X/{INDEX_BIT_WIDTH}))),2)"
    return (
        f"color=c=black:s={INDEX_BITS * INDEX_BIT_WIDTH}x{INDEX_STRIP_ROWS}:r={fps}:d={duration_s},"
        f"format=yuv420p,geq=lum='if({bit},235,16)':cb=128:cr=128[{label}]"
    )


def read_frame_index(luma_rows: Any) -> int:
    """Decode the burned-in frame index from a frame's luma plane (a 2-D array, at least 8 rows)."""
    row = luma_rows[INDEX_STRIP_ROWS // 2]
    value = 0
    for b in range(INDEX_BITS):
        if row[b * INDEX_BIT_WIDTH + INDEX_BIT_WIDTH // 2] > 128:
            value |= 1 << b
    return value


def write_questions(cfg: DemoConfig, out: Path, walks_out: Path | None = None) -> list[dict[str, Any]]:
    """Write every demo video's questions as JSONL (and the walk scripts as JSON, the ground truth)."""
    walks = [plan_walk(cfg, vid) for vid in video_ids(cfg)]
    questions = [q for walk in walks for q in make_questions(walk, cfg.seed, cfg.questions_per_task)]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(q, ensure_ascii=False) + "\n" for q in questions))
    if walks_out is not None:
        walks_out.write_text(json.dumps([w.to_json() for w in walks], indent=1, ensure_ascii=False))
    return questions
