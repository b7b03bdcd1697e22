import shutil

import polars as pl
import pytest

from senri.cli import main
from senri.media import MediaError
from senri.probe import fingerprint, probe


def test_cli_probe_and_table(tmp_path, small_demo):
    out = tmp_path / "probe" / "demo_02.parquet"
    assert main(["probe", str(small_demo["videos"]["demo_02"]), "--video-id", "demo_02", "--out", str(out)]) == 0
    row = pl.read_parquet(out).row(0, named=True)
    assert row["video_id"] == "demo_02" and row["rotation"] == 0 and row["size_bytes"] > 0
    assert len(row["fingerprint"]) == 32
    assert (tmp_path / "probe" / "demo_02.config.yaml").exists()
    table = tmp_path / "videos.parquet"
    assert main(["videos-table", str(out), "--out", str(table)]) == 0
    assert pl.read_parquet(table).height == 1


def test_fingerprint_follows_content(tmp_path, small_demo):
    copy = tmp_path / "copy.mp4"
    shutil.copy(small_demo["videos"]["demo_01"], copy)
    before = fingerprint(copy)
    assert before == fingerprint(small_demo["videos"]["demo_01"])
    with copy.open("r+b") as handle:
        handle.seek(-10, 2)
        handle.write(b"0123456789")
    assert fingerprint(copy) != before


def test_not_a_video_is_a_clear_error(tmp_path, capsys):
    fake = tmp_path / "notes.mp4"
    fake.write_text("this is not a video")
    with pytest.raises(MediaError, match="notes.mp4"):
        probe(fake, "notes")
    assert main(["probe", str(fake), "--out", str(tmp_path / "x.parquet")]) == 1
    assert "notes.mp4" in capsys.readouterr().err
    with pytest.raises(MediaError, match="no such video file"):
        probe(tmp_path / "absent.mp4", "absent")
