"""Run folders of ``d2lrnn train``: one folder per run, locked while the run writes to it.

:func:`open_run_folder` does every check before training starts: it creates the folder (a
fresh numbered one by default, so runs never replace each other), takes a lock on it (a
second run into the same folder is refused at once), removes temporary files that a killed
save left behind, refuses a folder that holds another run's files unless asked to
overwrite or resume it, and proves the folder is writable. :meth:`RunFolder.write` then
writes each epoch's files as one set (:func:`d2lrnn.training.atomic.write_files`).

A folder may be someone else's (a shared disk, a folder copied from elsewhere), so nothing in it is
trusted: the lock file is opened without following a symbolic link and must be a regular file of
d2lrnn's own (empty, or the number of the process that held it), and a run replaces only files that d2lrnn
wrote, as their marks show (:func:`written_by_d2lrnn`): a checkpoint's format, the metrics' columns,
the plot's ``Software`` field. Files are replaced by renaming a new file over them, which never writes
through a symbolic link.
"""

import contextlib
import errno
import os
import pathlib
import re
import stat
import tempfile

from ..errors import RunFolderError
from . import archive
from .atomic import remove_stale_temps, write_files

#: The files of a run, in the order a set is committed: the resume state comes last, so a kill
#: between two renames never leaves a resume state newer than the best model and metrics.
#: (``perplexity.png`` is a language model's plot, ``loss.png`` a translation model's.)
RUN_FILES = ("model.npz", "metrics.csv", "perplexity.png", "loss.png", "last.npz")
#: Files whose presence means the folder holds a run (what --overwrite is needed for).
CHECKPOINT_FILES = ("model.npz", "last.npz")
LOCK_NAME = ".lock"
#: The last columns of every command's ``metrics.csv`` header (its first column is ``epoch``): its mark.
METRICS_MARK = ",tokens_per_sec,seconds"
#: The ``Software`` text of the plots d2lrnn draws begins with this: their mark.
PLOT_MARK = "d2lrnn"

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None


def _reason(err):
    return err.strerror or str(err)


def _is_dir(path):
    """Whether ``path`` is a folder; a one-line error if the system cannot say (a name too long)."""
    try:
        return path.is_dir()
    except OSError as err:
        raise RunFolderError(f"cannot use the output folder {path}: {_reason(err)}: choose another --out") \
            from None


def _read_head(path, size=1 << 16):
    """The first ``size`` bytes of the regular file ``path``, not through a symbolic link; None if it is
    not such a file or cannot be read."""
    try:
        with archive.open_regular(path, follow_symlinks=False) as f:
            return f.read(size)
    except (archive.Refused, OSError):
        return None


def _png_texts(data):
    """The ``tEXt`` fields before the image data of the PNG bytes ``data``: ``{keyword: text}``."""
    texts, at = {}, 8
    while at + 8 <= len(data):
        length, kind = int.from_bytes(data[at:at + 4], "big"), data[at + 4:at + 8]
        if kind == b"IDAT":
            break
        if kind == b"tEXt":
            keyword, _, text = data[at + 8:at + 8 + length].partition(b"\0")
            texts[keyword.decode("latin1")] = text.decode("latin1")
        at += 12 + length
    return texts


def written_by_d2lrnn(path):
    """Whether the file ``path`` carries d2lrnn's mark, by its kind: a checkpoint of d2lrnn's format,
    metrics whose header ends in d2lrnn's columns, a PNG whose ``Software`` is d2lrnn. A symbolic link, a
    device or anything else is not d2lrnn's."""
    head = _read_head(path)
    if head is None:
        return False
    if path.suffix == ".npz":
        try:
            with archive.opened(path, follow_symlinks=False) as opened:
                header = opened.header("meta")
                if header.dtype.kind != "U" or header.shape != () or header.nbytes > 1 << 26:
                    return False
                return '"format": "d2lrnn-checkpoint"' in str(opened.array("meta", header)[()])
        except (archive.Refused, KeyError, OSError):
            return False
    if path.suffix == ".csv":
        first = head.split(b"\n", 1)[0].rstrip(b"\r")
        return first.startswith(b"epoch,") and first.endswith(METRICS_MARK.encode())
    if path.suffix == ".png":
        return head.startswith(b"\x89PNG\r\n\x1a\n") and \
            _png_texts(head).get("Software", "").startswith(PLOT_MARK)
    return False


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


def _open_lock_file(path):
    """The lock file opened for reading and writing, created if missing, never through a symbolic link
    and never waiting (a FIFO in its place is refused, not waited on)."""
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | \
        getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags, 0o644)
    if hasattr(os, "set_blocking"):
        os.set_blocking(fd, True)
    return fd


def _write_pid(lock):
    """Write this process's number into the (locked) lock file, for the message a second run gets."""
    lock.seek(0)
    lock.truncate()
    lock.write(str(os.getpid()))
    lock.flush()


def fresh_folder(parent, stem):
    """Create and return ``parent/<stem>-<N>`` with N one above the highest number already there.

    ``mkdir`` fails if the folder exists, so two runs starting at once get different numbers.
    """
    parent = pathlib.Path(parent)
    _mkdir(parent, parents=True, exist_ok=True)
    pattern = re.compile(re.escape(stem) + r"-(\d+)")
    try:
        taken = [int(m.group(1)) for p in parent.iterdir() if (m := pattern.fullmatch(p.name))]
    except OSError as err:
        raise RunFolderError(f"cannot read the folder {parent}: {_reason(err)}: choose another --out") \
            from None
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
    try:
        if folder.exists() and not folder.is_dir():
            raise in_the_way
    except OSError as err:
        if err is in_the_way:
            raise
        raise RunFolderError(f"cannot create the output folder {folder}: {_reason(err)}: choose another "
                             "--out") from None
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
        """Lock the folder through its ``.lock`` file, opened without following a link, and write this
        process's number in it; refuse a lock file that is not d2lrnn's."""
        path = self.path / LOCK_NAME
        try:
            fd = _open_lock_file(path)
        except OSError as err:
            if err.errno == errno.ELOOP:
                raise RunFolderError(f"{path} is a symbolic link, not d2lrnn's lock file: remove it (d2lrnn "
                                     "writes no file through a link), or choose another --out") from None
            raise RunFolderError(f"cannot write in the output folder {self.path} ({_reason(err)}): "
                                 "choose another --out") from None
        try:
            self._check_lock_file(fd, path)
        except BaseException:
            os.close(fd)
            raise
        lock = os.fdopen(fd, "r+", encoding="ascii", errors="replace")
        try:
            held = lock.read(21).strip()
            if held and not held.isdigit():
                raise RunFolderError(f"{path} is not d2lrnn's lock file (it holds other text): remove it, or "
                                     "choose another --out")
            if not _lock(fd):
                who = f" (pid {held})" if held.isdigit() else ""
                raise RunFolderError(f"another d2lrnn run{who} is writing to {self.path}: wait for it to "
                                     "finish, or choose another --out")
            _write_pid(lock)
        except OSError as err:
            lock.close()
            if isinstance(err, RunFolderError):
                raise
            raise RunFolderError(f"cannot write in the output folder {self.path} ({_reason(err)}): free some "
                                 "space, or choose another --out") from None
        self._lock_file = lock

    @staticmethod
    def _check_lock_file(fd, path):
        """A lock file is d2lrnn's if it is a regular file with no other name (a hard link would let the
        pid be written into another file)."""
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            what = "not a regular file" if not stat.S_ISREG(info.st_mode) else "a hard link to another file"
            raise RunFolderError(f"{path} is {what}, not d2lrnn's lock file: remove it, or choose another "
                                 "--out")

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
        return [name for name in CHECKPOINT_FILES if _present(self.path / name)]

    def run_files(self):
        """The files of :data:`RUN_FILES` in the folder (links and other kinds of file included; a folder in
        the way is :meth:`_check_writable`'s to name)."""
        return [name for name in RUN_FILES
                if _present(self.path / name) and not _is_real_dir(self.path / name)]

    def foreign_files(self):
        """The run files in the folder that do not carry d2lrnn's mark (:func:`written_by_d2lrnn`)."""
        return [name for name in self.run_files() if not written_by_d2lrnn(self.path / name)]

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


def _is_real_dir(path):
    """Whether ``path`` is a folder itself (not a link to one)."""
    return stat.S_ISDIR(os.lstat(path).st_mode)


def _present(path):
    """Whether anything (a file, a folder, a link, even a broken one) has the name ``path``."""
    return os.path.lexists(path)


def open_run_folder(out=None, default_parent="runs", default_stem="run", overwrite=False, resume=False):
    """Create (or reuse) and lock the output folder of a run, and check it before any training.

    ``out`` None makes a fresh ``default_parent/default_stem-N``. An ``out`` that holds a run's
    checkpoint is refused unless ``overwrite`` (a new run replaces its files, when its first epoch
    ends) or ``resume`` (the run there continues); one that holds any other file a run writes is
    refused unless it is d2lrnn's and one of them is given, and a file that is not d2lrnn's is never
    replaced. Returns a :class:`RunFolder`.
    """
    if out is None:
        folder = RunFolder(fresh_folder(default_parent, default_stem), created=True)
    else:
        path = pathlib.Path(out)
        existed = _is_dir(path)
        _mkdir(path, parents=True, exist_ok=True)
        folder = RunFolder(path, created=not existed)
    try:
        folder._take_lock()
        remove_stale_temps(folder.path, RUN_FILES)
        _check_held(folder, overwrite, resume)
        folder._check_writable()
    except BaseException:
        folder.close()
        raise
    return folder


def _check_held(folder, overwrite, resume):
    """Refuse a folder whose run files a new run would replace without being told to, or that are not
    d2lrnn's at all."""
    held, present, foreign = folder.holds_run(), folder.run_files(), folder.foreign_files()
    if held and not (overwrite or resume) and not set(held) & set(foreign):
        raise RunFolderError(f"{folder.path} holds another run's checkpoint ({', '.join(held)}): pass "
                             f"--overwrite to replace it, --resume {folder.path} to continue it, or "
                             "choose another --out")
    if foreign:
        names = ", ".join(foreign)
        raise RunFolderError(f"{folder.path} holds {names}, which d2lrnn did not write (or a link, or not a "
                             "plain file), where a run writes its files: move it away, or choose another "
                             "--out (d2lrnn replaces only the files it wrote)")
    if present and not (overwrite or resume):
        raise RunFolderError(f"{folder.path} holds {', '.join(present)} of another run: pass --overwrite to "
                             "replace them, or choose another --out")
