"""Build each release worker environment from its pins and answer one demo question through ``backend:
release_worker`` on a TINY RANDOM checkpoint in it (spec direct_specialists.md T7; issue 61). Needs network to
PyPI for the builds (once per node: environments are content-addressed and reused), so it is a bench command, not
a test; nothing in the test suite depends on it.

    python bench/worker_envs.py [--env-cache DIR] [--checkout DIR] [--only cambrian_s,hf457,light_omni] [--frames N]

What each row does:

- ``cambrian_s``: builds ``envs/cpu/cambrian_s.txt`` (the published pins with CPU torch: see its header), builds
  a tiny CambrianQwenForCausalLM from the release's classes (bench/worker_tiny_models.py, inside the env), and
  runs senri's ``specialist`` method on one question of a one-video demo: Cambrian-S (C: 128-frame rule, grey
  pad, the release's ``generate``) and Cambrian-S-LFP (L: every frame of the 1-fps stream, squashed, the
  streaming memory on the model with senri's block policy, then the same question again to show the memory
  reused). Needs a checkout of the release (``--checkout``, default /work/wt/_src/cambrian_s or
  ``$SENRI_CAMBRIAN_S_CHECKOUT``).
- ``hf457``: builds ``envs/cpu/hf457.txt`` and runs the ``specialist`` method for InternVideo3 (I) and VideoChat3
  (V) through the adapter (``hf_video_model``: AutoModelForCausalLM + AutoProcessor with trust_remote_code,
  do_resize / do_sample_frames off, the release's metadata) on a STAND-IN: their model code is the checkpoints'
  remote code, on the Hugging Face hub only (unreachable here), so the tiny checkpoint is transformers 4.57.3's
  own Qwen3-VL class registered through a remote-code file, with 16-px patches for I and 14-px for V.
- ``light_omni``: the published pins are resolved by pip for Python 3.10, wheels only, without installing: pins
  with no wheel (flash_attn: a CUDA source build) are named and left out; the adapter also needs the release's
  patched transformers from a Light-Omni checkout, so no load is tried.

Prints one table: env, build s, pins resolved, adapter loaded, answered, seconds (the answer's wall time).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from senri.backends.worker_env import ensure_environment  # noqa: E402

#: The CPU torchvision 0.28.0 wheel from PyPI is a CUDA build: its extension cannot load beside torch+cpu, and
#: its import then fails registering fake kernels for two operators that the extension would have defined.
#: Defining their schemas first lets ``torchvision.transforms`` (all the releases use) import; no op runs.
TORCHVISION_SHIM = '''import torch
for _name in ("nms", "qnms"):
    try:
        torch.library.define(f"torchvision::{_name}", "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    except RuntimeError:
        pass
'''


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def build(name: str, pins: Path, cache: Path) -> tuple[object | None, float, str]:
    started = time.monotonic()
    try:
        env = ensure_environment(name, pins, cache)
    except Exception as exc:  # noqa: BLE001 - the row records why
        return None, time.monotonic() - started, f"{type(exc).__name__}: {str(exc)[:300]}"
    site = next((env.path / "lib").glob("python3*/site-packages"))
    if not (site / "senri_cpu_torchvision.pth").exists():
        (site / "senri_cpu_torchvision_shim.py").write_text(TORCHVISION_SHIM)
        (site / "senri_cpu_torchvision.pth").write_text("import senri_cpu_torchvision_shim\n")
    return env, time.monotonic() - started, ""


def demo_video(folder: Path):
    """One short 16:9 demo video and its questions (senri's own demo generator)."""
    from senri import demo
    from senri.probe import probe
    from senri.records import Question

    cfg = demo.DemoConfig(n_videos=1, seed=7, places_per_video=4, place_s=3, turn_s=2, width=320, height=180,
                          fps=4, gop_s=1, questions_per_task={"L": 1, "RR": 1, "OC": 1, "RER": 1, "NP": 0,
                                                              "TER": 0})
    (video_id,) = demo.video_ids(cfg)
    path = demo.render_video(demo.plan_walk(cfg, video_id), folder / f"{video_id}.mp4")
    rows = demo.write_questions(cfg, folder / "questions.jsonl")
    questions = [Question(video_id=row["video_id"], qid=row["qid"], task_type=row["task_type"], direction="past",
                          question=row["question"], option_a=row["options"][0], option_b=row["options"][1],
                          option_c=row["options"][2], option_d=row["options"][3], answer=row["answer"])
                 for row in rows]
    return path, probe(path, video_id), questions


def answer(method_name: str, method: dict, model: dict, clip, questions: list) -> dict:
    """Open the backend, run the ``specialist`` method on the questions, close; per question the wall time."""
    from senri.backends import open_backend
    from senri.methods.base import RunContext
    from senri.methods.specialist import SpecialistDirect

    path, info = clip
    backend = open_backend(model, None)
    runs = []
    try:
        context = RunContext(video=info, method_name=method_name, method_config=method, model_name="tiny",
                             model_config=model, seed=7, backend=backend, pixels=path)
        specialist = SpecialistDirect(context)
        for q in questions:
            started = time.monotonic()
            result = specialist.answer(q)
            runs.append({"seconds": round(time.monotonic() - started, 1), "reply": result.raw_output,
                         "pred": result.pred, "errors": list(result.tally.errors),
                         "frames": result.tally.behaviour.get("frames_seen")})
    except Exception as exc:  # noqa: BLE001 - a row that failed says why
        runs.append({"seconds": None, "errors": [f"{type(exc).__name__}: {str(exc)[:600]}"]})
    finally:
        log_file = backend._scratch / "worker.log" if backend._scratch else None
        streams = [json.loads(line.split("LFP stream: ", 1)[1]) for line in
                   (log_file.read_text(errors="replace").splitlines() if log_file and log_file.exists() else [])
                   if "LFP stream: " in line]  # the Cambrian-S adapter's per-question trace of the memory
        backend.close()
    return {"runs": runs, "lfp_streams": streams}


def cambrian_rows(cache: Path, checkout: Path, frames: int, work: Path) -> list[dict]:
    env, build_s, why = build("cambrian_s", ROOT / "envs/cpu/cambrian_s.txt", cache)
    rows = []
    if env is None:
        return [{"env": "cambrian_s", "build_s": build_s, "resolved": False, "loaded": False, "answered": False,
                 "note": why}]
    if not checkout.is_dir():
        return [{"env": "cambrian_s", "build_s": build_s, "resolved": True, "loaded": False, "answered": False,
                 "note": f"no release checkout at {checkout} (--checkout)"}]
    tiny = work / "tiny_cambrian_s"
    made = subprocess.run([str(env.python), str(ROOT / "bench/worker_tiny_models.py"), "cambrian", str(tiny), "--lfp"],
                          capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([str(checkout), str(checkout / "lmms-eval")])})
    if made.returncode != 0:
        return [{"env": "cambrian_s", "build_s": build_s, "resolved": True, "loaded": False, "answered": False,
                 "note": "tiny checkpoint: " + made.stderr[-400:]}]
    log(made.stdout.strip())
    clip = demo_video(work)
    questions = clip[2][:1]
    model = {"backend": "release_worker", "model": str(tiny), "env": "cambrian_s",
             "pins": str(ROOT / "envs/cpu/cambrian_s.txt"), "env_cache": str(cache), "release_checkout": str(checkout),
             "release_paths": [".", "lmms-eval"], "adapter": "cambrian_model:CambrianS",
             "adapter_options": {"device": "cpu", "miv_token_len": 64, "max_frames": frames},
             "startup_timeout_s": 600, "request_timeout_s": 1800, "images": True}
    base = {"approach": "direct_perception", "uses_model": True, "uses_pixels": True, "implementation": "specialist",
            "prompts": "cambrian_s"}
    runs_presets = {"cambrian_s_lfp (L)": {"window": 4, "method": "drop_merge", "topk": 4, "threshold": 1.01,
                                           "budget": 300, "ratio": 2}}
    runs = {
        "cambrian_s (C)": answer("cambrian_s", {**base, "release": "cambrian_s", "max_frames": frames},
                                 model, clip[:2], questions),
        # L with a preset of its own whose window and budget the short clip overflows, so frames are evicted,
        # pooled (τ = 1.01 sits among the random model's surprises, 1.004–1.015) and merged / dropped; the same question twice:
        # the second is answered from the memory built once (L-M9)
        "cambrian_s_lfp (L)": answer("cambrian_s_lfp", {**base, "release": "cambrian_s_lfp", "mode": "stream",
                                                        "stream_fps": 1.0,
                                                        "preset": runs_presets["cambrian_s_lfp (L)"]},
                                     {**model, "adapter_options": {**model["adapter_options"]}}, clip[:2],
                                     questions * 2),
    }
    for label, result in runs.items():
        ok = [r for r in result["runs"] if r.get("seconds") is not None and not r["errors"]]
        for stream in result["lfp_streams"]:  # the memory on the model = senri's policy on the model's surprises
            from senri.specialists import lfp

            preset = lfp.Preset(**runs_presets["cambrian_s_lfp (L)"])
            want = lfp.build_memory(stream["surprises"], tuple(stream["grid_hw"]), stream["prefix_tokens"],
                                    preset.window, preset.threshold, preset.ratio, preset.method, preset.budget)
            stream["policy_agrees"] = want.lengths == stream["lengths"] and stream["layers_agree"]
            ok = ok if stream["policy_agrees"] else []
        rows.append({"env": "cambrian_s", "model": label, "build_s": build_s, "resolved": True,
                     "loaded": bool(ok) or not any("could not load" in e for r in result["runs"] for e in r["errors"]),
                     "answered": len(ok) == len(result["runs"]), "seconds": [r.get("seconds") for r in result["runs"]],
                     "note": json.dumps(result["runs"])[:500]
                     + (f"; LFP memory per question: {json.dumps([{k: v for k, v in x.items() if k != 'surprises'} for x in result['lfp_streams']])[:1200]}"
                        if result["lfp_streams"] else "")})
    return rows


def hf457_rows(cache: Path, frames: int, work: Path) -> list[dict]:
    env, build_s, why = build("hf457", ROOT / "envs/cpu/hf457.txt", cache)
    if env is None:
        return [{"env": "hf457", "build_s": build_s, "resolved": False, "loaded": False, "answered": False,
                 "note": why}]
    clip = demo_video(work)
    rows = []
    base = {"approach": "direct_perception", "uses_model": True, "uses_pixels": True, "implementation": "specialist"}
    for release, patch, method in (
            ("internvideo3", 16, {"release": "internvideo3", "max_frames": frames, "prompts": "internvideo3",
                                  "max_new_tokens": 16}),
            # the release's sampling settings (V-D1) but 16 new tokens, not 32768: a random model never stops
            ("videochat3", 14, {"release": "videochat3", "preset": "lvbench", "frames_limit": frames,
                                "prompts": "videochat3", "max_new_tokens": 16})):
        tiny = work / f"tiny_qwen3vl_{patch}"
        made = subprocess.run([str(env.python), str(ROOT / "bench/worker_tiny_models.py"), "qwen3vl", str(tiny),
                               "--patch", str(patch)], capture_output=True, text=True)
        if made.returncode != 0:
            rows.append({"env": "hf457", "model": release, "build_s": build_s, "resolved": True, "loaded": False,
                         "answered": False, "note": "tiny checkpoint: " + made.stderr[-400:]})
            continue
        model = {"backend": "release_worker", "model": str(tiny), "env": "hf457",
                 "pins": str(ROOT / "envs/cpu/hf457.txt"), "env_cache": str(cache),
                 "adapter": "hf_video_model:HFVideoModel",
                 "adapter_options": {"dtype": "float32", "attn_implementation": "sdpa", "device_map": "cpu"},
                 "startup_timeout_s": 600, "request_timeout_s": 1800, "images": True}
        result = answer(release, {**base, **method}, model, clip[:2], clip[2][:1])
        ok = [r for r in result["runs"] if r.get("seconds") is not None and not r["errors"]]
        rows.append({"env": "hf457", "model": f"{release} (Qwen3-VL stand-in)", "build_s": build_s,
                     "resolved": True, "loaded": bool(ok), "answered": len(ok) == len(result["runs"]),
                     "seconds": [r.get("seconds") for r in result["runs"]],
                     "note": "transformers' own Qwen3-VL class behind a remote-code stand-in (the checkpoints' "
                             "remote code is on the Hugging Face hub only): " + json.dumps(result["runs"])[:500]})
    return rows


def light_omni_row(work: Path) -> dict:
    """Light-Omni's published pins resolved by pip for its Python 3.10 on Linux x86-64, wheels only (nothing is
    built or installed): each pin with no wheel is named and left out, and resolution goes on without it."""
    import re

    started = time.monotonic()
    lines = (ROOT / "envs/light_omni.txt").read_text().splitlines()
    no_wheel = []
    for _ in range(6):
        pins = work / "light_omni_pins.txt"
        pins.write_text("\n".join(line for line in lines if line.split("==")[0].strip() not in no_wheel) + "\n")
        dry = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
                              "--python-version", "3.10", "--only-binary=:all:", "--target", str(work / "lo_dry"),
                              *(f"--platform={p}" for p in ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64",
                                                             "manylinux_2_24_x86_64", "manylinux_2_17_x86_64",
                                                             "manylinux2014_x86_64", "manylinux2010_x86_64",
                                                             "manylinux1_x86_64", "linux_x86_64")),
                              "-r", str(pins)], capture_output=True, text=True)
        missing = re.search(r"No matching distribution found for ([A-Za-z0-9_.-]+)==", dry.stdout + dry.stderr)
        pinned = {line.split("==")[0].strip() for line in lines}
        if dry.returncode == 0 or missing is None or missing.group(1) not in pinned:
            break
        no_wheel.append(missing.group(1))
    resolved = dry.returncode == 0 and not no_wheel
    tail = "" if dry.returncode == 0 else " | ".join((dry.stdout + dry.stderr).strip().splitlines()[-2:])[-300:]
    return {"env": "light_omni", "model": "light_omni", "build_s": time.monotonic() - started,
            "resolved": resolved, "loaded": False, "answered": False,
            "note": f"wheels-only dry run for Python 3.10 (not built): no wheel on PyPI for {', '.join(no_wheel) or 'none'} (sdists); "
                    f"the rest {'resolves' if dry.returncode == 0 else 'fails: ' + tail}. flash_attn is an sdist that "
                    f"needs CUDA and torch to build; the adapter also needs the release's patched transformers from "
                    f"a Light-Omni checkout (none here), so no load was tried"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env-cache", type=Path, default=Path(os.environ.get("SENRI_ENV_CACHE", "/work/wt/_envs")))
    parser.add_argument("--checkout", type=Path,
                        default=Path(os.environ.get("SENRI_CAMBRIAN_S_CHECKOUT", "/work/wt/_src/cambrian_s")))
    parser.add_argument("--only", default="cambrian_s,hf457,light_omni")
    parser.add_argument("--frames", type=int, default=8, help="Cambrian-S (C) frame cap: 128 is the release's")
    parser.add_argument("--work", type=Path, default=Path("/tmp/senri-worker-envs"))
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    only = set(args.only.split(","))
    rows = []
    if "cambrian_s" in only:
        rows += cambrian_rows(args.env_cache, args.checkout, args.frames, args.work)
    if "hf457" in only:
        rows += hf457_rows(args.env_cache, args.frames, args.work)
    if "light_omni" in only:
        rows.append(light_omni_row(args.work))
    yn = lambda flag: "y" if flag else "n"  # noqa: E731
    print(f"{'env':<11} {'model':<28} {'build s':>8} {'pins resolved':>13} {'adapter loaded':>14} {'answered':>8}  seconds")
    for row in rows:
        print(f"{row['env']:<11} {row.get('model', ''):<28} {row['build_s']:>8.1f} {yn(row['resolved']):>13} "
              f"{yn(row['loaded']):>14} {yn(row['answered']):>8}  {row.get('seconds', '')}")
    for row in rows:
        print(f"- {row['env']} {row.get('model', '')}: {row['note']}")


if __name__ == "__main__":
    main()
