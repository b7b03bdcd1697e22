"""Anonymization throughput and memory: detectors × detection width × stride, and RSS vs video length.

    python bench/anonymize.py [--short-min 1] [--long-min 10]

Generates (once, under results/bench/anonymize/) 1280×720 30 fps H.264 videos with the astronaut's head
(the real photograph inside scikit-image) moving across a textured background, then prints, measured side by
side in one run:
- frames/s of the whole stage (decode → detect → blur → encode) for each configuration on the short video,
  with the detection share of the time and the fraction of frames detected vs propagated;
- peak RSS of the stage on the short and the long video (each in its own process), which must stay flat.
A 2.5 h video is 270,000 frames: at 400 ms per full-size detection, detecting every frame is 30 CPU-hours;
stride and detection width are the levers.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
OUT = REPO / "results" / "bench" / "anonymize"

CONFIGS = [  # (label, detectors, detect_width, stride)
    ("centerface full 1280, every frame", ["centerface"], None, 1),
    ("centerface full 1280, stride 5", ["centerface"], None, 5),
    ("centerface 640, stride 5", ["centerface"], 640, 5),
    ("centerface full 1280, stride 15", ["centerface"], None, 15),
    ("centerface + plates 1280, stride 5", ["centerface", "plates"], None, 5),
]


def make_video(path: Path, minutes: float) -> Path:
    if path.exists():
        return path
    import av
    import cv2
    import numpy as np
    from skimage import data

    head = data.astronaut()[30:300, 130:330]
    rng = np.random.default_rng(0)
    background = cv2.GaussianBlur(np.clip(rng.normal(110, 25, (720, 2560, 3)), 0, 255).astype(np.uint8), (0, 0), 3)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.mp4")
    with av.open(str(tmp), "w") as container:
        stream = container.add_stream("libx264", rate=30)
        stream.width, stream.height, stream.pix_fmt = 1280, 720, "yuv420p"
        stream.options = {"crf": "20", "preset": "ultrafast", "g": "30"}
        for i in range(int(minutes * 60 * 30)):
            pan = (i * 4) % 1280  # the camera pans: the background moves, as in a walk
            image = background[:, pan:pan + 1280].copy()
            for k, size in enumerate((160, 80, 48)):
                x = int(200 + 900 * (0.5 + 0.5 * np.sin(i / (90 + 40 * k))))
                y = 80 + 220 * k
                w = round(size * head.shape[1] / head.shape[0])
                image[y:y + size, x:x + w] = cv2.resize(head, (w, size), interpolation=cv2.INTER_AREA)
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    tmp.replace(path)
    return path


def run_stage(video: Path, detectors: list[str], width: int | None, stride: int) -> dict:
    """One stage run in a fresh process (so peak RSS is the stage's own); returns its stats."""
    code = f"""
import json, resource, sys
sys.path.insert(0, {str(REPO / 'src')!r})
from senri.anonymize.stage import AnonymizeConfig, anonymize_video
config = AnonymizeConfig(detectors={tuple(detectors)!r}, stride={stride},
                         detector_config={{"face_threshold": 0.3, "detect_width": {width!r}}})
s = anonymize_video({str(video)!r}, {str(OUT / 'out.mp4')!r}, {str(OUT / 'out.parquet')!r}, "bench", config)
print(json.dumps({{"frames": s.frames, "detected": s.detected_frames, "propagated": s.propagated_frames,
                  "detect_s": s.detect_s, "wall_s": s.wall_s,
                  "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--short-min", type=float, default=1.0)
    parser.add_argument("--long-min", type=float, default=10.0)
    parser.add_argument("--memory-only", action="store_true", help="skip the throughput table (RSS is not "
                        "affected by other work on the machine; frames/s is)")
    args = parser.parse_args()
    short = make_video(OUT / f"faces_{args.short_min:g}min.mp4", args.short_min)
    long = make_video(OUT / f"faces_{args.long_min:g}min.mp4", args.long_min)

    if not args.memory_only:
        print(f"throughput on {short.name} (1280×720, 30 fps), whole stage:")
        print(f"{'configuration':<38} {'frames/s':>9} {'detect share':>13} {'detected':>9} {'propagated':>11} "
              f"{'h per 2.5 h video':>18}")
    for label, detectors, width, stride in ([] if args.memory_only else CONFIGS):
        s = run_stage(short, detectors, width, stride)
        fps = s["frames"] / s["wall_s"]
        print(f"{label:<38} {fps:>9.1f} {s['detect_s'] / s['wall_s']:>12.0%} "
              f"{s['detected'] / s['frames']:>9.1%} {s['propagated'] / s['frames']:>11.1%} "
              f"{270_000 / fps / 3600:>18.1f}")

    print("\npeak RSS of the stage (centerface full size, stride 15), by video length:")
    small, big = (run_stage(v, ["centerface"], None, 15) for v in (short, long))
    print(f"  {args.short_min:g} min: {small['rss_mib']:.0f} MiB   {args.long_min:g} min: {big['rss_mib']:.0f} MiB   "
          f"ratio {big['rss_mib'] / small['rss_mib']:.2f} (frames ×{big['frames'] / small['frames']:.0f})")


if __name__ == "__main__":
    main()
