import polars as pl
import pytest

from senri.records import Prediction, TableError, VideoInfo, read_table, schema_of, to_frame, write_table


def _video(**changes):
    base = dict(video_id="v", path="v.mp4", duration_s=1.0, avg_fps=30.0, r_fps=30.0, n_frames=30, width=2,
                height=2, rotation=0, codec="h264", keyframe_interval_s=None, is_vfr=False, has_audio=False,
                size_bytes=1, fingerprint="f")
    base.update(changes)
    return VideoInfo(**base)


def test_roundtrip_and_atomic_write(tmp_path):
    path = write_table(to_frame([_video()], VideoInfo), tmp_path / "v.parquet", VideoInfo)
    assert read_table(path, VideoInfo).row(0, named=True)["video_id"] == "v"
    assert [p.name for p in tmp_path.iterdir()] == ["v.parquet"]  # no temp file left behind
    assert pl.read_parquet(path).schema == schema_of(VideoInfo)


def test_empty_frame_is_typed():
    assert to_frame([], Prediction).schema == schema_of(Prediction)


def test_bad_tables_are_rejected_with_the_file_and_column(tmp_path):
    df = to_frame([_video()], VideoInfo)
    with pytest.raises(TableError, match="x.parquet.*missing column 'fingerprint'"):
        write_table(df.drop("fingerprint"), tmp_path / "x.parquet", VideoInfo)
    with pytest.raises(TableError, match="column 'n_frames' has type String"):
        write_table(df.with_columns(pl.col("n_frames").cast(pl.String)), tmp_path / "x.parquet", VideoInfo)
    with pytest.raises(TableError, match="column 'codec' has 1 null"):
        write_table(df.with_columns(pl.lit(None, pl.String).alias("codec")), tmp_path / "x.parquet", VideoInfo)
    assert not (tmp_path / "x.parquet").exists()
