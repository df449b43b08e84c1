"""Atomic writes of one file and of a set: all or nothing, no temporary file left, Ctrl-C held back."""

import errno
import os
import signal

import pytest

from d2lrnn.training import atomic


def _text(content):
    return lambda f: f.write(content)


def _files(folder, contents):
    return [(folder / name, _text(text), "w", "utf-8") for name, text in contents.items()]


def _read_all(folder):
    return {p.name: p.read_text() for p in sorted(folder.iterdir())}


def test_a_set_is_written_whole(tmp_path):
    atomic.write_files(_files(tmp_path, {"a.txt": "1", "b.txt": "2"}))
    assert _read_all(tmp_path) == {"a.txt": "1", "b.txt": "2"}


def test_a_failure_in_any_file_leaves_every_old_file_and_no_temporary_file(tmp_path):
    atomic.write_files(_files(tmp_path, {"a.txt": "old a", "b.txt": "old b", "c.txt": "old c"}))

    def disk_full(f):
        f.write("half")
        raise OSError(errno.ENOSPC, "No space left on device")

    files = _files(tmp_path, {"a.txt": "new a"}) + [(tmp_path / "b.txt", disk_full, "w", "utf-8")]
    files += _files(tmp_path, {"c.txt": "new c"})
    with pytest.raises(OSError) as err:
        atomic.write_files(files)
    assert err.value.errno == errno.ENOSPC and err.value.filename == str(tmp_path / "b.txt")
    assert _read_all(tmp_path) == {"a.txt": "old a", "b.txt": "old b", "c.txt": "old c"}


def test_a_folder_in_the_way_is_found_before_anything_is_replaced(tmp_path):
    atomic.write_files(_files(tmp_path, {"a.txt": "old a"}))
    (tmp_path / "b.txt").mkdir()
    with pytest.raises(IsADirectoryError) as err:
        atomic.write_files(_files(tmp_path, {"a.txt": "new a", "b.txt": "new b"}))
    assert err.value.filename == str(tmp_path / "b.txt")
    assert (tmp_path / "a.txt").read_text() == "old a"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.txt"]


@pytest.fixture
def ctrl_c_raises():
    """Ctrl-C raises KeyboardInterrupt, as in a terminal: a test run started in the background (``pytest &``
    in a script) inherits SIGINT ignored, and the signal would do nothing."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def test_ctrl_c_during_the_renames_comes_after_the_whole_set(tmp_path, monkeypatch, ctrl_c_raises):
    real_replace = os.replace
    renamed = []

    def replace_then_interrupt(src, dst):
        real_replace(src, dst)
        renamed.append(os.path.basename(dst))
        if len(renamed) == 1:
            signal.raise_signal(signal.SIGINT)  # Ctrl-C between the first and the second rename

    monkeypatch.setattr(os, "replace", replace_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        atomic.write_files(_files(tmp_path, {"a.txt": "1", "b.txt": "2", "c.txt": "3"}))
    assert renamed == ["a.txt", "b.txt", "c.txt"]
    assert _read_all(tmp_path) == {"a.txt": "1", "b.txt": "2", "c.txt": "3"}
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_stale_temporary_files_are_found_and_removed_by_name(tmp_path):
    (tmp_path / ".model.npz.abc123.tmp").write_bytes(b"PK torn")
    (tmp_path / ".metrics.csv.x.tmp").write_text("epoch")
    (tmp_path / ".notes.txt.x.tmp").write_text("someone else's")
    (tmp_path / "model.npz").write_bytes(b"kept")
    removed = atomic.remove_stale_temps(tmp_path, ["model.npz", "metrics.csv"])
    assert [p.name for p in removed] == [".metrics.csv.x.tmp", ".model.npz.abc123.tmp"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".notes.txt.x.tmp", "model.npz"]
