"""Run folders: fresh names, one run per folder (a lock), no silent overwrite, checks before training,
stale temporary files of killed saves removed, and kill -9 during saves never losing the checkpoint."""

import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

import d2lrnn as d2l
from d2lrnn.training import runs
from d2lrnn.training.atomic import stale_temps

ROOT = pathlib.Path(d2l.__file__).resolve().parents[1]
pytestmark = pytest.mark.once  # files and locks: no array reaches a backend (the kill -9 saver runs on numpy)


def test_default_folders_get_a_fresh_number_per_run(tmp_path):
    first = runs.fresh_folder(tmp_path / "runs", "tm-numpy-scratch")
    second = runs.fresh_folder(tmp_path / "runs", "tm-numpy-scratch")
    (tmp_path / "runs" / "tm-numpy-scratch-7").mkdir()
    (tmp_path / "runs" / "tm-numpy-scratch-old").mkdir()
    after_seven = runs.fresh_folder(tmp_path / "runs", "tm-numpy-scratch")
    assert [p.name for p in (first, second, after_seven)] == [
        "tm-numpy-scratch-1", "tm-numpy-scratch-2", "tm-numpy-scratch-8"]


def test_a_second_run_into_a_locked_folder_is_refused_at_once(tmp_path, monkeypatch):
    flocks = []
    real_flock = runs.fcntl.flock
    monkeypatch.setattr(runs.fcntl, "flock", lambda fd, op: flocks.append(op) or real_flock(fd, op))
    with runs.open_run_folder(tmp_path / "run") as held:
        assert (held / runs.LOCK_NAME).read_text() == str(os.getpid())
        busy = f"another d2lrnn run \\(pid {os.getpid()}\\) is writing to .*run: wait for it to finish"
        with pytest.raises(d2l.RunFolderError, match=busy):
            runs.open_run_folder(tmp_path / "run")
    # at once: every lock is asked for without waiting (LOCK_NB), so a busy folder is refused, not awaited
    assert flocks and all(op & runs.fcntl.LOCK_NB for op in flocks)
    with runs.open_run_folder(tmp_path / "run"):  # released when the first run ends
        pass


def _a_checkpoint(path):
    vocab = d2l.Vocab(list("ab"))
    return d2l.save_checkpoint(path, d2l.RNNModelScratch(len(vocab), 2), vocab)


def test_a_folder_holding_a_run_needs_overwrite_or_resume(tmp_path):
    saved = _a_checkpoint(tmp_path / "model.npz").read_bytes()
    with pytest.raises(d2l.RunFolderError, match="holds another run's checkpoint \\(model.npz\\): pass "
                                                 "--overwrite to replace it, --resume .* to continue it"):
        runs.open_run_folder(tmp_path)
    for kwargs in ({"overwrite": True}, {"resume": True}):
        with runs.open_run_folder(tmp_path, **kwargs):
            pass
    assert (tmp_path / "model.npz").read_bytes() == saved  # replaced only by a finished epoch


def test_an_unwritable_folder_is_found_before_training(tmp_path, monkeypatch):
    # Root ignores permission bits, so the refusal the OS would give is injected where the folder
    # is first written: the lock file.
    def refused(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(runs, "_open_lock_file", refused)
    with pytest.raises(d2l.RunFolderError, match="cannot write in the output folder .*sub \\(Permission "
                                                 "denied\\): choose another --out"):
        runs.open_run_folder(tmp_path / "sub")


def test_a_folder_in_the_way_of_a_run_file_is_found_before_training(tmp_path):
    (tmp_path / "metrics.csv").mkdir()
    with pytest.raises(d2l.RunFolderError, match="metrics.csv is a folder, in the way of the run's metrics"):
        runs.open_run_folder(tmp_path)


def test_a_file_where_the_folder_should_be_is_one_line(tmp_path):
    (tmp_path / "taken").write_text("x")
    with pytest.raises(d2l.RunFolderError, match="cannot create the output folder .*taken: a file of that"):
        runs.open_run_folder(tmp_path / "taken")


def test_a_folder_this_run_made_and_left_empty_is_removed(tmp_path):
    with runs.open_run_folder(tmp_path / "new"):
        pass
    assert not (tmp_path / "new").exists()
    (tmp_path / "old").mkdir()
    with runs.open_run_folder(tmp_path / "old"):
        pass
    assert (tmp_path / "old").is_dir()


def test_taking_a_folder_removes_the_temporary_files_of_killed_saves(tmp_path):
    (tmp_path / ".model.npz.k1l2.tmp").write_bytes(b"PK half")
    (tmp_path / ".last.npz.x.tmp").write_bytes(b"PK half")
    with runs.open_run_folder(tmp_path):
        assert stale_temps(tmp_path, runs.RUN_FILES) == []


def test_a_failed_write_keeps_the_previous_set_and_is_one_line(tmp_path):
    def disk_full(f):
        raise OSError(28, "No space left on device")

    with runs.open_run_folder(tmp_path) as folder:
        folder.write({"model.npz": (lambda f: f.write(b"epoch 1"), "wb"),
                      "metrics.csv": (lambda f: f.write("epoch\n1\n"), "w")})
        message = "cannot write metrics.csv in .*: No space left on device: .*the files written before"
        with pytest.raises(d2l.RunFolderError, match=message):
            folder.write({"model.npz": (lambda f: f.write(b"epoch 2"), "wb"),
                          "metrics.csv": (disk_full, "w")})
    assert (tmp_path / "model.npz").read_bytes() == b"epoch 1"
    assert (tmp_path / "metrics.csv").read_text() == "epoch\n1\n"
    assert stale_temps(tmp_path, runs.RUN_FILES) == []


SAVER = textwrap.dedent("""
    import os
    import sys

    import d2lrnn as d2l

    # Each step of a save that a kill could land after announces itself and waits for a word from the
    # test: the test kills the saver exactly there (no sleeps, so the same on an idle or a busy machine).
    def pause(step, fn):
        def paused(*args, **kwargs):
            print(step, flush=True)
            sys.stdin.readline()
            return fn(*args, **kwargs)
        return paused

    # A save announces three points: its temporary file is written (then synced), renamed over the
    # checkpoint, and the folder synced after the rename.
    os.fsync = pause("fsync", os.fsync)
    os.replace = pause("replace", os.replace)
    d2l.manual_seed(0)
    vocab = d2l.Vocab(list("abcdefghijklmnopqrstuvwxyz "))
    net = d2l.RNNModelScratch(len(vocab), 256)
    save = d2l.checkpoint_info(sys.argv[1])["hparams"]["save"]  # where the killed saver got to
    while True:  # save after save until killed
        save += 1
        d2l.save_checkpoint(sys.argv[1], net, vocab, {"save": save})
""")

#: Where each saver is killed: (its n-th save, the point in it: 1 written, 2 synced, 3 renamed).
KILL_POINTS = [(1, 1), (1, 2), (1, 3), (2, 1), (3, 2), (2, 3)]
POINTS_PER_SAVE = 3


@pytest.mark.skipif(not hasattr(os, "fork"), reason="SIGKILL and os.fsync semantics of POSIX")
def test_kill_9_during_saves_never_loses_the_checkpoint_and_the_next_run_clears_the_debris(tmp_path):
    from tests.cli.test_lm import TINY

    path = tmp_path / "model.npz"
    vocab = d2l.Vocab(list("abcdefghijklmnopqrstuvwxyz "))
    d2l.save_checkpoint(path, d2l.RNNModelScratch(len(vocab), 256), vocab, {"save": 1})
    # The saver runs on numpy whatever this env's backend: what is tested is the file writing, which is
    # the same on every backend, and numpy starts in a fraction of the time of the frameworks.
    env = dict(os.environ, D2LRNN_BACKEND="numpy", PYTHONPATH=str(ROOT))
    saves, debris = [1], []
    for save, point in KILL_POINTS:
        proc = subprocess.Popen([sys.executable, "-c", SAVER, str(path)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, env=env)
        for passed in range((save - 1) * POINTS_PER_SAVE + point):  # let it go on up to the kill point
            if passed:
                proc.stdin.write(b"go\n")
                proc.stdin.flush()
            assert proc.stdout.readline() in (b"fsync\n", b"replace\n")
        proc.kill()
        proc.wait()
        proc.stdin.close()
        proc.stdout.close()
        _, _, info = d2l.load_checkpoint(path)  # whole: the old file or the new one, never a torn one
        saves.append(info["hparams"]["save"])
        debris.append(len(stale_temps(tmp_path, ["model.npz"])))
    # Killed before its rename a save keeps the previous checkpoint and leaves its temporary file; killed
    # after it, the new checkpoint is in place.
    assert saves == [1, 1, 1, 2, 3, 5, 7]
    assert debris == [1, 2, 2, 3, 4, 4]
    from d2lrnn import cli

    assert cli.main(["train", *TINY, "--epochs", "1", "--out", str(tmp_path), "--overwrite"]) == 0
    assert stale_temps(tmp_path, runs.RUN_FILES) == []


# -- a folder nobody vouches for (issue 32) ------------------------------------------------------------

def test_a_symbolic_link_planted_as_the_lock_is_refused_and_its_target_untouched(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("someone's file")
    run = tmp_path / "run"
    run.mkdir()
    (run / runs.LOCK_NAME).symlink_to(victim)
    with pytest.raises(d2l.RunFolderError, match=r"\.lock is a symbolic link, not d2lrnn's lock file"):
        runs.open_run_folder(run)
    assert victim.read_text() == "someone's file"


@pytest.mark.parametrize("plant, message", [
    (lambda lock, victim: os.link(victim, lock), "is a hard link to another file, not d2lrnn's lock file"),
    (lambda lock, victim: lock.write_text("my notes"), "is not d2lrnn's lock file \\(it holds other text\\)"),
    (lambda lock, victim: os.mkfifo(lock), "is not a regular file, not d2lrnn's lock file"),
])
def test_a_lock_file_that_is_not_d2lrnns_is_refused_without_writing_to_it(plant, message, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("someone's file")
    run = tmp_path / "run"
    run.mkdir()
    plant(run / runs.LOCK_NAME, victim)
    with pytest.raises(d2l.RunFolderError, match=message):
        runs.open_run_folder(run)
    assert victim.read_text() == "someone's file"


def test_a_full_disk_when_the_lock_is_written_is_one_line(tmp_path, monkeypatch):
    def disk_full(lock):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(runs, "_write_pid", disk_full)
    with pytest.raises(d2l.RunFolderError, match="cannot write in the output folder .*run \\(No space left "
                                                 "on device\\): free some space, or choose another --out"):
        runs.open_run_folder(tmp_path / "run")


def test_a_name_too_long_is_one_line(tmp_path):
    with pytest.raises(d2l.RunFolderError, match="output folder .*: File name too long: choose another"):
        runs.open_run_folder(tmp_path / ("x" * 300))


@pytest.mark.parametrize("name, content", [
    ("metrics.csv", "step,loss\n1,2.5\n"), ("perplexity.png", b"\x89PNG\r\n\x1a\n someone's plot"),
    ("model.npz", b"PK\x03\x04 someone's archive"), ("loss.png", b"not even a PNG")])
def test_a_file_d2lrnn_did_not_write_is_never_replaced(name, content, tmp_path):
    path = tmp_path / name
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    for kwargs in ({}, {"overwrite": True}, {"resume": True}):
        with pytest.raises(d2l.RunFolderError, match=f"holds {name}, which d2lrnn did not write .* move it "
                                                     "away, or choose another --out"):
            runs.open_run_folder(tmp_path, **kwargs)
    assert path.read_bytes() == (content.encode() if isinstance(content, str) else content)


def test_a_link_where_a_run_file_goes_is_not_d2lrnns(tmp_path):
    target = _a_checkpoint(tmp_path / "elsewhere.npz")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "model.npz").symlink_to(target)
    assert not runs.written_by_d2lrnn(tmp_path / "run" / "model.npz") and runs.written_by_d2lrnn(target)
    with pytest.raises(d2l.RunFolderError, match="holds model.npz, which d2lrnn did not write"):
        runs.open_run_folder(tmp_path / "run", overwrite=True)


def test_files_a_run_wrote_carry_its_marks_and_need_overwrite(tmp_path):
    (tmp_path / "metrics.csv").write_text("epoch,train_ppl,val_ppl,tokens_per_sec,seconds\n1,9,9,9,9\n")
    assert runs.written_by_d2lrnn(tmp_path / "metrics.csv")
    with pytest.raises(d2l.RunFolderError, match="holds metrics.csv of another run: pass --overwrite to "
                                                 "replace them"):
        runs.open_run_folder(tmp_path)
    with runs.open_run_folder(tmp_path, overwrite=True):
        pass
