"""Writing files so that they are never seen half-written, one at a time or as a set.

Each file goes to a hidden temporary file in its target's folder (``.<name>.<random>.tmp``),
which is flushed, synced and then renamed over the target. A crash or kill leaves either the
old file or the new one, plus at worst a stale temporary file, which
:func:`remove_stale_temps` clears (``d2lrnn train`` does so when it takes a folder).

:func:`write_files` writes several files as one set: all of them are staged first, and only
if every one was written are they renamed into place, in the order given, with Ctrl-C held
back until the renames are done. A failure while staging (disk full, no permission, a folder
in the way) leaves every old file as it was.
"""

import contextlib
import errno
import os
import pathlib
import signal
import tempfile
import threading

TEMP_SUFFIX = ".tmp"


def temp_prefix(name):
    """The start of the name of a temporary file written for the file ``name``."""
    return f".{name}."


def _default_file_mode():
    """The permissions ``open`` would give a new file (temporary files get 0o600)."""
    umask = os.umask(0o022)
    os.umask(umask)
    return 0o666 & ~umask


def _fsync_dir(folder):
    """Make a rename durable (POSIX); harmless where a folder cannot be opened."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _with_path(err, path):
    """``err`` as an ``OSError`` whose ``filename`` is ``path`` (so a message can name the file)."""
    if isinstance(err, OSError) and err.filename == str(path):
        return err
    code = err.errno if isinstance(err, OSError) else None
    return OSError(code, (err.strerror if isinstance(err, OSError) else None) or str(err), str(path))


def _stage(path, write, mode, encoding):
    """Write ``path``'s new content to a synced temporary file beside it; return the temporary path."""
    newline = "" if "b" not in mode else None
    tmp = tempfile.NamedTemporaryFile(mode, encoding=encoding, newline=newline, delete=False,
                                      dir=path.parent, prefix=temp_prefix(path.name), suffix=TEMP_SUFFIX)
    try:
        with tmp:
            write(tmp)
            tmp.flush()
            os.fsync(tmp.fileno())
            if hasattr(os, "fchmod"):
                os.fchmod(tmp.fileno(), _default_file_mode())
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp.name)
        raise
    return tmp.name


@contextlib.contextmanager
def interrupts_deferred():
    """Hold Ctrl-C (SIGINT) until the block has run, then deliver it: a set of renames is not cut in two.

    Python runs signal handlers in the main thread, whichever thread the signal reached, so
    swapping the handler there defers it; elsewhere (another thread) the block runs as it is.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught = []
    try:
        previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    except ValueError:  # signals cannot be handled here (e.g. a sub-interpreter)
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if caught and callable(previous):
            previous(signal.SIGINT, None)


def write_files(files):
    """Write a set of files so that each is complete and the set changes only if all were written.

    ``files`` is a list of ``(path, write, mode, encoding)``; ``write(file)`` writes the content
    to an open file. Raises ``OSError`` (with ``filename`` the target) if a file cannot be written;
    then no target has changed and no temporary file is left. Returns the target paths.
    """
    files = [(pathlib.Path(path), write, mode, encoding) for path, write, mode, encoding in files]
    staged = []
    try:
        for path, write, mode, encoding in files:
            if path.is_dir():
                raise IsADirectoryError(errno.EISDIR, "a folder is in the way", str(path))
            try:
                staged.append((_stage(path, write, mode, encoding), path))
            except OSError as err:
                raise _with_path(err, path) from None
        with interrupts_deferred():
            for tmp, path in staged:
                os.replace(tmp, path)
    except BaseException:
        for tmp, _ in staged:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        raise
    for folder in dict.fromkeys(path.parent for path, *_ in files):
        _fsync_dir(folder)
    return [path for path, *_ in files]


def atomic_write(path, write, mode="wb", encoding=None):
    """Write ``path`` through ``write(file)`` so that it is never seen half-written.

    If anything fails the temporary file is removed and an existing ``path`` is left as it
    was. Returns ``path`` as a :class:`pathlib.Path`.
    """
    return write_files([(path, write, mode, encoding)])[0]


def stale_temps(folder, names):
    """Temporary files that a killed write of one of ``names`` left in ``folder``."""
    folder = pathlib.Path(folder)
    temps = []
    for name in names:
        temps += [p for p in folder.glob(f"{temp_prefix(name)}*{TEMP_SUFFIX}") if p.is_file()]
    return sorted(temps)


def remove_stale_temps(folder, names):
    """Remove the temporary files that a killed write of one of ``names`` left in ``folder``.

    Only call this while no other process writes there (``d2lrnn train`` holds the folder's
    lock). Returns the paths removed.
    """
    removed = []
    for path in stale_temps(folder, names):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            removed.append(path)
    return removed
