"""The crop/re-sample arithmetic of ParaVT and Video-o3 (issue 38, shared/spec/evidence_seekers.md S3): the
spec's worked vectors V1-V3 and V6, and its DERIVED sizes."""

from __future__ import annotations

import pytest

from senri.resample import (capped_rate_indices, header_numbers, overview_indices, qwen25_video_tokens,
                                    qwen3_image_tokens, smart_resize, video_frame_max_pixels, window_indices)


def test_v1_paravt_crops_and_overview():
    crop = window_indices(10, 40, 30.0, 30 * 3600, target_fps=1.0, min_frames=1, max_frames=16)
    assert crop == list(range(300, 1201, 60))  # 16 frames, step 60
    assert len(window_indices(10, 15, 30.0, 30 * 3600, target_fps=1.0, min_frames=1, max_frames=16)) == 4
    assert overview_indices(1000, 64)[:6] == [0, 16, 32, 48, 63, 79] and overview_indices(1000, 64)[-1] == 999


def test_paravt_frame_sizes_and_the_tokens_vllm_s_qwen3_vl_processor_makes_of_them():
    assert smart_resize(720, 1280, 28, 128 * 784, 602112) == (560, 1008)  # P-I2: the overview
    assert smart_resize(720, 1280, 28, 784, 50176) == (168, 280)  # P-T1: a crop frame
    assert qwen3_image_tokens(560, 1008) == 576 and qwen3_image_tokens(168, 280) == 77  # P-T3: 576x1024, 224x352
    assert 64 * 576 == 36864 and 15 * 16 * 77 == 18480  # V6: the overview and 15 crops of 16 frames


def test_v2_video_o3_crop_at_the_medium_quota():
    indices = window_indices(10, 40, 30.0, 30 * 3600, target_fps=2.0, min_frames=4, max_frames=768)
    assert len(indices) == 60 and indices[:6] == [300, 315, 331, 346, 361, 376] and indices[-1] == 1200
    ceiling = video_frame_max_pixels(4096 * 784, 60)
    assert smart_resize(720, 1280, 28, 15680, ceiling) == (224, 420)
    assert qwen25_video_tokens(60, 224, 420) == 3600
    assert header_numbers(60, 2.0, 10, 40) == ("2.00", "60.0", "10.0", "40.0")


def test_v3_video_o3_s_main_video_over_768_frames():
    indices, rate = capped_rate_indices(108000, 30.0)
    assert len(indices) == 768 and indices[:3] == [140, 280, 421] and indices[-1] == 107859
    assert header_numbers(768, rate, 0, 3600)[:2] == ("0.21", "768.0")
    short, rate = capped_rate_indices(30 * 60, 30.0)  # a minute: 120 frames at 2 fps, every 15th source frame
    assert rate == 2.0 and short[:3] == [0, 15, 30] and len(short) == 120
    # O-I2: 768 frames of 1280x720 under the 16384-token budget
    assert smart_resize(720, 1280, 28, 15680, video_frame_max_pixels(16384 * 784, 768)) == (112, 224)
    assert qwen25_video_tokens(768, 112, 224) == 12288


def test_a_window_without_frames_is_refused():
    with pytest.raises(ValueError, match="holds no frames"):
        window_indices(50, 50, 30.0, 3000, target_fps=2.0)
    with pytest.raises(ValueError, match="holds no frames"):
        window_indices(200, 300, 30.0, 3000, target_fps=2.0)  # past the 100-s video's end
