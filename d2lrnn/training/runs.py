"""Run folders of ``d2lrnn train``: one folder per run, locked while the run writes to it.

:func:`open_run_folder` does every check before training starts: it creates the folder (a
fresh numbered one by default, so runs never replace each other), takes a lock on it (a
second run into the same folder is refused at once), removes temporary files that a killed
save left behind, refuses a folder that holds another run's checkpoint unless asked to
overwrite or resume it, and proves the folder is writable. :meth:`RunFolder.write` then
writes each epoch's files as one set (:func:`d2lrnn.training.atomic.write_files`).
"""

import contextlib
import os
import pathlib
import re
import tempfile

from ..errors import RunFolderError
from .atomic import remove_stale_temps, write_files

#: The files of a run, in the order a set is committed: the resume state comes last, so a kill
#: between two renames never leaves a resume state newer than the best model and metrics.
#: (``perplexity.png`` is a language model's plot, ``loss.png`` a translation model's.)
RUN_FILES = ("model.npz", "metrics.csv", "perplexity.png", "loss.png", "last.npz")
#: Files whose presence means the folder holds a run (what --overwrite is needed for).
CHECKPOINT_FILES = ("model.npz", "last.npz")
LOCK_NAME = ".lock"

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None


def _reason(err):
    return err.strerror or str(err)


def _lock(fd):
    """Take an exclusive lock on the open file ``fd`` without waiting; False if another process holds it."""
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        else:
            import msvcrt

            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
    except OSError:
        return False
    return True


def fresh_folder(parent, stem):
    """Create and return ``parent/<stem>-<N>`` with N one above the highest number already there.

    ``mkdir`` fails if the folder exists, so two runs starting at once get different numbers.
    """
    parent = pathlib.Path(parent)
    _mkdir(parent, parents=True, exist_ok=True)
    pattern = re.compile(re.escape(stem) + r"-(\d+)")
    taken = [int(m.group(1)) for p in parent.iterdir() if (m := pattern.fullmatch(p.name))]
    number = max(taken, default=0) + 1
    while True:
        folder = parent / f"{stem}-{number}"
        try:
            _mkdir(folder, parents=False, exist_ok=False)
            return folder
        except FileExistsError:
            number += 1


def _mkdir(folder, parents, exist_ok):
    """``folder.mkdir``; a one-line error unless the folder exists and ``exist_ok`` is false (then
    ``FileExistsError``, which :func:`fresh_folder` answers by trying the next number)."""
    in_the_way = RunFolderError(f"cannot create the output folder {folder}: a file of that name is in the "
                                "way: choose another --out")
    if folder.exists() and not folder.is_dir():
        raise in_the_way
    try:
        folder.mkdir(parents=parents, exist_ok=exist_ok)
    except FileExistsError:
        if exist_ok:
            raise in_the_way from None
        raise
    except OSError as err:
        raise RunFolderError(f"cannot create the output folder {folder}: {_reason(err)}: "
                             "choose another --out") from None


class RunFolder:
    """A locked output folder of one run (a context manager: leaving it releases the lock).

    ``path`` is the folder; ``created`` whether this run made it (an empty folder that this
    run made is removed again by :meth:`close`, e.g. when training failed before any epoch).
    """

    def __init__(self, path, created):
        self.path, self.created = pathlib.Path(path), created
        self._lock_file = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __truediv__(self, name):
        return self.path / name

    def _take_lock(self):
        try:
            lock = open(self.path / LOCK_NAME, "a+")  # noqa: SIM115 - held open until close()
        except OSError as err:
            raise RunFolderError(f"cannot write in the output folder {self.path} ({_reason(err)}): "
                                 "choose another --out") from None
        if not _lock(lock.fileno()):
            lock.seek(0)
            holder = lock.read().strip()
            lock.close()
            who = f" (pid {holder})" if holder.isdigit() else ""
            raise RunFolderError(f"another d2lrnn run{who} is writing to {self.path}: wait for it to finish, "
                                 "or choose another --out")
        lock.seek(0)
        lock.truncate()
        lock.write(str(os.getpid()))
        lock.flush()
        self._lock_file = lock

    def _check_writable(self):
        """Create and remove a file, and make sure no folder stands where a run file goes."""
        try:
            with tempfile.NamedTemporaryFile(dir=self.path, prefix=".write-check.", suffix=".tmp") as f:
                f.write(b"ok")
                f.flush()
        except OSError as err:
            raise RunFolderError(f"cannot write in the output folder {self.path} ({_reason(err)}): "
                                 "choose another --out") from None
        for name in RUN_FILES:
            if (self.path / name).is_dir():
                raise RunFolderError(f"{self.path / name} is a folder, in the way of the run's {name}: "
                                     "move it, or choose another --out")

    def holds_run(self):
        """The checkpoint files of a run already in the folder."""
        return [name for name in CHECKPOINT_FILES if (self.path / name).exists()]

    def write(self, files):
        """Write ``{name: (write, mode)}`` as one set (in :data:`RUN_FILES` order); one line if it fails.

        On failure no file of the set has changed, so the folder keeps the previous epoch's set.
        """
        order = sorted(files, key=lambda name: RUN_FILES.index(name) if name in RUN_FILES else -1)
        entries = [(self.path / name, write, mode, None if "b" in mode else "utf-8")
                   for name in order for write, mode in [files[name]]]
        try:
            return write_files(entries)
        except OSError as err:
            target = pathlib.Path(err.filename).name if err.filename else "a file"
            raise RunFolderError(f"cannot write {target} in {self.path}: {_reason(err)}: free some space or "
                                 "fix the folder, or choose another --out; the files written before are "
                                 "kept") from None

    def close(self):
        """Release the lock; remove the folder if this run made it and left nothing in it."""
        if self._lock_file is None:
            return
        self._lock_file.close()
        self._lock_file = None
        if self.created and {p.name for p in self.path.iterdir()} <= {LOCK_NAME}:
            with contextlib.suppress(OSError):
                (self.path / LOCK_NAME).unlink()
                self.path.rmdir()


def open_run_folder(out=None, default_parent="runs", default_stem="run", overwrite=False, resume=False):
    """Create (or reuse) and lock the output folder of a run, and check it before any training.

    ``out`` None makes a fresh ``default_parent/default_stem-N``. An ``out`` that holds a run's
    checkpoint is refused unless ``overwrite`` (a new run replaces its files, epoch by epoch)
    or ``resume`` (the run there continues). Returns a :class:`RunFolder`.
    """
    if out is None:
        folder = RunFolder(fresh_folder(default_parent, default_stem), created=True)
    else:
        path = pathlib.Path(out)
        existed = path.is_dir()
        _mkdir(path, parents=True, exist_ok=True)
        folder = RunFolder(path, created=not existed)
    try:
        folder._take_lock()
        remove_stale_temps(folder.path, RUN_FILES)
        held = folder.holds_run()
        if held and not (overwrite or resume):
            raise RunFolderError(f"{folder.path} holds another run's checkpoint ({', '.join(held)}): pass "
                                 f"--overwrite to replace it, --resume {folder.path} to continue it, or "
                                 "choose another --out")
        folder._check_writable()
    except BaseException:
        folder.close()
        raise
    return folder
