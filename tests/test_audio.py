"""Audio end to end: the one place audio is cut (senri.media), the audio message part on every backend's wire
(OpenAI-compatible ``input_audio`` over real HTTP against the strict server, transformers' omni processor
arguments, vLLM's ``multi_modal_data``), and anonymization keeping the source's track beside blurred pixels."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from senri.backends.base import AudioPart, ChatRequest, Message, VideoPart
from senri.media import (SAMPLE_RATE, MediaError, audio_pcm, clip_wav, has_audio_track, pcm_units, wav_bytes, wav_info,
                         wav_samples)

sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
from strict_openai import StrictOpenAI  # noqa: E402


def make_video(path, seconds=2.0, audio=True, channels=2, rate=44100):
    """A tiny test-pattern video, with a 440-Hz tone (stereo at 44.1 kHz: what phones record) or silent."""
    args = ["ffmpeg", "-nostdin", "-loglevel", "error", "-f", "lavfi", "-i", f"testsrc=size=64x48:rate=10:d={seconds}"]
    if audio:
        args += ["-f", "lavfi", "-i", f"sine=frequency=440:sample_rate={rate}:d={seconds}",
                 "-ac", str(channels), "-c:a", "aac"]
    args += ["-c:v", "libx264", "-pix_fmt", "yuv420p", "-shortest", "-y", str(path)]
    subprocess.run(args, check=True)
    return path


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    root = tmp_path_factory.mktemp("audio")
    return {"sound": make_video(root / "sound.mp4"), "silent": make_video(root / "silent.mp4", audio=False)}


def test_a_clip_s_audio_is_16_khz_mono_wav_and_a_silent_video_is_a_condition_not_an_error(videos):
    assert has_audio_track(videos["sound"]) and not has_audio_track(videos["silent"])
    wav = clip_wav(videos["sound"], 0.5, 1.0)
    info = wav_info(wav)
    assert (info.sample_rate, info.channels, info.sample_width, info.frames) == (SAMPLE_RATE, 1, 2, SAMPLE_RATE)
    samples, rate = wav_samples(wav)
    assert rate == SAMPLE_RATE and samples.dtype == np.float32 and 0.05 < np.abs(samples).max() <= 1.0  # lavfi sine: amplitude 1/8
    # a 440-Hz tone: the spectrum's peak is at 440 Hz
    assert abs(np.argmax(np.abs(np.fft.rfft(samples))) * SAMPLE_RATE / len(samples) - 440) <= 2
    assert clip_wav(videos["silent"], 0.0, 1.0) is None
    with pytest.raises(MediaError, match="silent.mp4"):  # asked for anyway: an error naming the file
        audio_pcm(videos["silent"], 0.0, 100)
    # past the track's end: padded with silence to the length asked for (VideoARM's cumulative ranges)
    tail = audio_pcm(videos["sound"], 1.5, SAMPLE_RATE)
    assert len(tail) == 2 * SAMPLE_RATE and tail[-2000:] == b"\0" * 2000


def test_pcm_is_cut_into_one_second_units_and_stereo_wav_reads_its_first_channel():
    pcm = np.arange(2 * SAMPLE_RATE + 100, dtype="<i2").tobytes()
    units = pcm_units(pcm)
    assert [len(u) for u in units] == [2 * SAMPLE_RATE] * 3 and units[2][200:] == b"\0" * (2 * SAMPLE_RATE - 200)
    assert len(pcm_units(pcm, pad_last=False)[-1]) == 200
    stereo = np.array([[1000, -1000], [2000, -2000]], dtype="<i2").tobytes()
    first, rate = wav_samples(wav_bytes(stereo, 8000, channels=2))
    assert rate == 8000 and first.tolist() == [1000 / 32768, 2000 / 32768]
    with pytest.raises(ValueError, match="not a PCM WAV"):
        wav_info(b"not a wav")


def _omni_request(wav: bytes, with_track: bool) -> ChatRequest:
    from senri.decode import carrier_from_jpegs
    import cv2

    frames = [cv2.imencode(".jpg", np.full((48, 64, 3), 40 * k, np.uint8))[1].tobytes() for k in range(3)]
    video = VideoPart(carrier_from_jpegs(frames, fps=2.0), 2.0, (0.0, 0.5, 1.0), audio=AudioPart(wav) if with_track else None)
    return ChatRequest((Message("user", ("Describe the clip.", video, "Voice features:", AudioPart(wav, "<voice_3>"))),))


def test_audio_parts_go_over_http_as_input_audio_with_use_audio_in_video_and_are_in_the_cache_key(videos):
    from senri.backends.openai import OpenAIBackend

    wav = clip_wav(videos["sound"], 0.0, 1.0)
    request = _omni_request(wav, with_track=True)
    with StrictOpenAI([{"text": "[]"}], video=True, audio=True) as server:
        response = OpenAIBackend(server.model_config()).complete(request)
    assert server.refused() == [] and response.error is None and response.text == "[]"
    body = server.bodies[0]["body"]
    kinds = [p["type"] for p in body["messages"][0]["content"]]
    assert kinds == ["text", "video_url", "input_audio", "text", "text", "input_audio"]
    assert body["mm_processor_kwargs"] == {"use_audio_in_video": True}
    assert body["messages"][0]["content"][2]["input_audio"] == {"data": AudioPart(wav).base64(), "format": "wav"}
    # a server whose model does not hear refuses such a body (as a real one does), and a model config without
    # audio: true never sends one
    with StrictOpenAI([{"text": "[]"}], video=True) as deaf:
        refused = OpenAIBackend({**deaf.model_config(), "audio": True}).complete(request)
        assert refused.error and "input_audio" in deaf.refused()[0]["error"]
        sent = len(deaf.bodies)
        unsent = OpenAIBackend(deaf.model_config()).complete(request)
        assert "does not take audio input" in unsent.error and len(deaf.bodies) == sent
    # the track and the audio parts are in the cache key; a video without one keeps the key it always had
    silent = _omni_request(wav, with_track=False)
    assert request.cache_payload() != silent.cache_payload()
    assert "audio" not in silent.cache_payload()["messages"][0]["content"][1]


def test_transformers_and_vllm_get_the_sound_in_the_order_the_omni_processor_pairs_it(videos, monkeypatch):
    import types

    from senri.backends.transformers import hf_audios, hf_messages, media_kwargs
    from senri.backends.vllm import engine_kwargs, generate_prompt

    wav = clip_wav(videos["sound"], 0.0, 1.0)
    other = wav_bytes(np.full(SAMPLE_RATE // 2, 1000, "<i2").tobytes())
    request = ChatRequest((Message("user", ("clip", _omni_request(wav, True).messages[0].content[1],
                                            AudioPart(other, "<voice_3>"))),))
    messages, images, parts = hf_messages(request, video_ok=True, audio_ok=True)
    assert [c["type"] for c in messages[0]["content"]] == ["text", "video", "text", "audio"]
    audios = hf_audios(request)
    assert [len(a) for a, _ in audios] == [SAMPLE_RATE, SAMPLE_RATE // 2]  # the video's track first, then the part
    monkeypatch.setattr("senri.backends.transformers.carrier_frames", lambda part: ["frame"] * 3)
    kwargs = media_kwargs(request, parts)
    assert kwargs["use_audio_in_video"] is True and kwargs["sampling_rate"] == SAMPLE_RATE and len(kwargs["audio"]) == 2
    with pytest.raises(ValueError, match="no audio input"):
        hf_messages(request, video_ok=True, audio_ok=False)

    tokenizer = types.SimpleNamespace(apply_chat_template=lambda messages, **kw: "PROMPT")
    monkeypatch.setattr("senri.backends.vllm.carrier_video", lambda part: ("frames", {}))
    prompt = generate_prompt(request, tokenizer, {}, audio_ok=True)
    assert prompt["mm_processor_kwargs"] == {"use_audio_in_video": True}
    assert len(prompt["multi_modal_data"]["audio"]) == 2 and prompt["multi_modal_data"]["audio"][0][1] == SAMPLE_RATE
    assert engine_kwargs({"model": "m", "audio": True})["limit_mm_per_prompt"]["audio"] == 8
    assert "audio" not in engine_kwargs({"model": "m"})["limit_mm_per_prompt"]  # seeing-only models unchanged


def test_anonymization_keeps_the_source_s_track_beside_the_blurred_pixels_only_when_asked(videos, tmp_path):
    from senri.anonymize.stage import AnonymizeConfig, anonymize_video

    for keep in (True, False):
        out = tmp_path / f"anon_{keep}.mp4"
        anonymize_video(videos["sound"], out, tmp_path / f"det_{keep}.parquet", "v", AnonymizeConfig(keep_audio=keep))
        assert has_audio_track(out) is keep
        if keep:  # the track is copied, not re-encoded: the same samples come back out
            assert audio_pcm(out, 0.2, 8000) == audio_pcm(videos["sound"], 0.2, 8000)
