"""The native readers on the benchmarks' whole real annotation files: every question read, no problem raised,
the quirk flags as the spec counts them (spec/benchmarks.md VM8, ML8, EM6), and the time each read takes.

    python bench/native_files.py [--videomme FILE] [--mlvu FILE ...] [--egomem FILE]

Without arguments the files are taken from the mirrored repositories at the commits the spec names (the search
tool's ``fetch`` brings them to /work/.mirror/<owner>+<name>/repo): Video-MME's 900 videos in the nested layout
(Leon1207/Video-RAG-master), MLVU dev's seven task files (JUNJIE99/MLVU), EgoMem.json (worldbench/VideoLucy,
deleted after that commit). LVBench's meta file is in no public repository reachable here (spec LV1). The suite
reads excerpts of these (tests/data/benchmarks/); this reads them whole. Nothing of them is kept here.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from senri.benchmarks import BENCHMARKS  # noqa: E402

MIRRORS = Path("/work/.mirror")
#: benchmark → (mirror, commit, paths), as spec/benchmarks.md's source table names them.
SOURCES = {
    "videomme": ("Leon1207+Video-RAG-master", "887a05abe309370361adbb18e843b1c77ece2c9d",
                 ["evals/videomme_json_file.json"]),
    "mlvu": ("JUNJIE99+MLVU", "fd060c10a43ea48a35100a22688a927b8e531199",
             [f"data/{n}.json" for n in ("1_plotQA", "2_needle", "3_ego", "4_count", "5_order", "6_anomaly_reco",
                                         "7_topic_reasoning")]),
    "egomem": ("worldbench+VideoLucy", "4caf6706af83614e2329c7c9f14f7cf9b2bfa7bc", ["EgoMem/EgoMem.json"]),
}
#: What the spec counts in each whole file: questions, videos, and the flags every reader must keep.
EXPECTED = {
    "videomme": (2700, 900, {"repeated_option": 11}),
    "mlvu": (2175, None, {"repeated_option": 14, "answer_text_repeated": 5, "empty_option": 4,
                          "answer_text_not_in_candidates": 2, "empty_record": 1}),
    "egomem": (504, 42, {"repeated_option": 4, "empty_answer": 2, "disputed": 2, "answer_not_an_option": 2}),
}


def from_mirror(benchmark: str, out: Path) -> list[Path]:
    mirror, commit, paths = SOURCES[benchmark]
    files = []
    for path in paths:
        target = out / benchmark / Path(path).name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(subprocess.run(["git", "--git-dir", str(MIRRORS / mirror / "repo"), "show",
                                           f"{commit}:{path}"], check=True, capture_output=True).stdout)
        files.append(target)
    return files


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--videomme", nargs="+")
    parser.add_argument("--mlvu", nargs="+")
    parser.add_argument("--egomem", nargs="+")
    args = parser.parse_args()
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for benchmark in SOURCES:
            given = getattr(args, benchmark)
            try:
                files = [Path(f) for f in given] if given else from_mirror(benchmark, Path(tmp))
            except (subprocess.CalledProcessError, FileNotFoundError) as exc:
                print(f"{benchmark}: skipped, no file given and no mirror ({exc})")
                continue
            start = time.perf_counter()
            native = BENCHMARKS.load(benchmark).read({"questions": [str(f) for f in files], "video_ext": [".mp4"]})
            seconds = time.perf_counter() - start
            flags = Counter(q.flag for q in native.quirks if q.flag != "file_note")
            questions, videos, expected_flags = EXPECTED[benchmark]
            ok = (len(native.questions) == questions and (videos is None or len(native.videos) == videos)
                  and dict(flags) == expected_flags)
            failed += not ok
            print(f"{benchmark}: {len(native.questions):,} questions on {len(native.videos):,} videos in "
                  f"{seconds:.2f} s; flags {dict(sorted(flags.items()))}; {'as the spec counts' if ok else 'DIFFERS'}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
