"""Rows kept on disk a part at a time (``nsysscope.analysis.stored``): what is read back is
what was written, a column at a time, and the folder goes with the object."""

from __future__ import annotations

import gc

import numpy as np
import pandas as pd
import pytest

from nsysscope.analysis.stored import FrameRows, SpilledRows, concat


def parts():
    """Two parts of a real-looking table: numbers, text as categoricals (each part its own
    categories), nullable integers, numbers held as objects (NVTX step numbers)."""
    return [
        {"launch": np.arange(3), "gpu_idle_ns": np.array([1.0, np.nan, 3.0]),
         "klass": pd.Categorical(["healthy", "gpu_to_cpu", "healthy"]),
         "src_line": pd.array([None, 12, None], dtype="Int64"),
         "step": np.array([7, None, 9], dtype=object)},
        {"launch": np.arange(2), "gpu_idle_ns": np.array([5.0, 6.0]),
         "klass": pd.Categorical(["last", "healthy"]),
         "src_line": pd.array([3, None], dtype="Int64"),
         "step": np.array([10, 11], dtype=object)},
    ]


def test_spilled_rows_read_back_what_was_written():
    rows = SpilledRows()
    for p in parts():
        rows.append(p)
    assert len(rows) == 5 and rows.columns == ["launch", "gpu_idle_ns", "klass", "src_line",
                                               "step"]
    df = rows.frame(["klass", "gpu_idle_ns"])
    assert list(df.columns) == ["klass", "gpu_idle_ns"]
    assert df["klass"].astype(str).tolist() == ["healthy", "gpu_to_cpu", "healthy", "last",
                                                "healthy"]
    np.testing.assert_array_equal(df["gpu_idle_ns"], [1.0, np.nan, 3.0, 5.0, 6.0])
    whole = rows.frame()
    assert whole["src_line"].dtype == "Int64"
    assert whole["src_line"].tolist() == [pd.NA, 12, pd.NA, 3, pd.NA]
    assert whole["step"].tolist() == [7, None, 9, 10, 11]
    assert rows.frame() is whole  # the whole table is read once


def test_updates_replace_and_add_whole_columns_across_parts():
    rows = SpilledRows()
    for p in parts():
        rows.append(p)
    rows.update_parts([{"launch": np.arange(3), "steady": pd.Series([True, False, True])},
                       {"launch": np.arange(3, 5), "steady": pd.Series([True, False])}])
    assert rows.columns[-1] == "steady"
    df = rows.frame(["launch", "steady"])
    assert df["launch"].tolist() == [0, 1, 2, 3, 4]
    assert df["steady"].tolist() == [True, False, True, True, False]
    with pytest.raises(ValueError, match="values for 1 of the 2 parts"):
        rows.update_parts([{"burst": np.zeros(3)}])  # a part left without a column
    with pytest.raises(KeyError, match="nope"):
        rows.frame(["nope"])


def test_a_column_replaced_by_another_kind_is_read_as_the_new_one():
    """Numbers are kept as ``.npy``, the rest pickled: a column written again as the other
    kind is read back from its new file, never from the one it replaced."""
    rows = SpilledRows()
    rows.append({"x": np.arange(3)})
    rows.update_parts([{"x": pd.array([1, None, 3], dtype="Int64")}])
    assert rows.frame(["x"])["x"].tolist() == [1, pd.NA, 3]
    rows.update_parts([{"x": np.arange(3) * 2}])
    assert rows.frame(["x"])["x"].tolist() == [0, 2, 4]


def test_parts_of_different_kinds_are_joined():
    """A window whose text is all missing holds it as objects, the others as categoricals;
    nullable integers and numbers join as pandas does."""
    def values(v):
        assert isinstance(v, pd.Categorical)
        return pd.Series(v).astype(object).where(pd.notna(v), None).tolist()

    assert values(concat([pd.Categorical(["a", "b"]), np.array([None], dtype=object),
                          pd.Categorical(["c"])])) == ["a", "b", None, "c"]
    assert values(concat([np.array([None], dtype=object), pd.Categorical(["a"])])) == \
        [None, "a"]
    numbers = concat([pd.array([1, None], dtype="Int64"), np.array([3.0])])
    assert pd.Series(numbers).tolist()[0] == 1 and pd.Series(numbers).tolist()[2] == 3


def test_closed_rows_are_gone_at_once():
    rows = SpilledRows()
    rows.append(parts()[0])
    folder = rows._folder
    rows.close()
    assert not folder.exists()


def test_the_folder_goes_with_the_rows():
    rows = SpilledRows()
    rows.append(parts()[0])
    folder = rows._folder
    assert folder.is_dir()
    del rows
    gc.collect()
    assert not folder.exists()


def test_frame_rows_leave_the_callers_frame_alone():
    df = pd.DataFrame({"launch": np.arange(3)})
    rows = FrameRows(df)
    rows.update_parts([{"launch": np.arange(3) + 10,
                        "steady": pd.Series([True, True, False], index=[5, 6, 7])}])
    assert df.columns.tolist() == ["launch"] and df["launch"].tolist() == [0, 1, 2]
    assert rows.frame(["launch"])["launch"].tolist() == [10, 11, 12]
    assert rows.frame(["steady"])["steady"].tolist() == [True, True, False]  # by position


def test_parts_are_read_and_updated_one_at_a_time():
    rows = SpilledRows()
    for p in parts():
        rows.append(p)
    chunks = list(rows.chunks(["launch", "klass"]))
    assert [c.index.tolist() for c in chunks] == [[0, 1, 2], [3, 4]]
    assert chunks[1]["klass"].astype(str).tolist() == ["last", "healthy"]
    rows.update_parts({"burst": c.index.to_numpy() * 10} for c in rows.chunks(["launch"]))
    assert rows.frame(["burst"])["burst"].tolist() == [0, 10, 20, 30, 40]
    with pytest.raises(ValueError, match="part 0's 3 rows"):
        rows.update_parts([{"burst": np.zeros(2)}])


def test_a_full_disk_names_the_folder_and_what_to_do(monkeypatch, tmp_path):
    """The rows' writes fail on a full disk with an error that names the temporary folder
    and TMPDIR (the CLI says an OSError's file and reason in one line, exit 2); numpy's own
    names no file."""
    import errno
    import tempfile

    from nsysscope.cli.app import _os_message

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(np, "save", full)
    rows = SpilledRows()
    with pytest.raises(OSError) as info:
        rows.append(parts()[0])
    assert info.value.errno == errno.ENOSPC
    message = _os_message(info.value)
    assert message.startswith(f"{tmp_path}: cannot write a long trace's per-launch rows "
                              "there (No space left on device;")
    assert "TMPDIR" in message and "\n" not in message
