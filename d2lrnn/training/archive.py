"""Reading an ``.npz`` archive that nobody vouches for: every size is checked from the headers before a
byte of data is read.

``np.load`` reads whatever an archive's entries hold, as large as they say, before anything can be
checked: a small file can make it decompress gigabytes. Here an archive is read as a zip file whose
entries must be stored uncompressed (what ``np.savez``, d2lrnn's writer, makes; a compressed entry is
not d2lrnn's and could hide a memory bomb), each entry's ``.npy`` header is read on its own (at most
:data:`HEADER_LIMIT` bytes) and parsed as the literal it must be, and an entry's size in the zip
directory must be exactly its header and the array the header describes. The caller checks the dtype
and shape of each header against the model it expects, and only then reads the data
(:meth:`Archive.array`), a chunk at a time into the array itself.

Files are opened without blocking (a FIFO is refused, not waited on) and, for the files of a run folder,
without following a symbolic link (``O_NOFOLLOW``): d2lrnn reads a run's own files, not what a link in
the folder points to.
"""

import ast
import contextlib
import errno
import math
import os
import re
import stat
import struct
import zipfile

import numpy as np

NPY_MAGIC = b"\x93NUMPY"
ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")
#: The largest ``.npy`` header read (NumPy's own limit since 1.24): d2lrnn's are about 128 bytes.
HEADER_LIMIT = 10_000
#: The most entries an archive may have: a model's parameters, twice that of optimizer state, metadata.
MAX_ENTRIES = 10_000
#: Bytes read at a time into an array.
CHUNK = 1 << 20
_DESCR = re.compile(r"[<>|=]?[a-zA-Z]\d{0,12}")


class Refused(Exception):
    """The archive cannot be read: ``reason`` says why, ``kind`` is ``'not ours'`` (not an archive at all),
    ``'torn'`` (a damaged archive), ``'compressed'`` or ``'link'``."""

    def __init__(self, kind, reason):
        super().__init__(reason)
        self.kind, self.reason = kind, reason


def _open_flags(follow_symlinks):
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    if not follow_symlinks:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    return flags


def open_regular(path, follow_symlinks=True):
    """``path`` opened for reading in binary, if it is a regular file (not a device, FIFO or folder; not a
    symbolic link unless ``follow_symlinks``); :class:`Refused` otherwise, ``OSError`` if it cannot be
    opened."""
    try:
        fd = os.open(path, _open_flags(follow_symlinks))
    except OSError as err:
        if err.errno == errno.ELOOP and not follow_symlinks:
            raise Refused("link", "a symbolic link") from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise Refused("not regular", "not a regular file")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


class Header:
    """What an entry's ``.npy`` header says: ``dtype``, ``shape``, ``fortran`` order, where the data
    starts (``offset``) and how many bytes it takes (``nbytes``)."""

    def __init__(self, dtype, shape, fortran, offset):
        self.dtype, self.shape, self.fortran, self.offset = dtype, shape, fortran, offset
        self.nbytes = math.prod(shape) * dtype.itemsize


def _parse_header(text):
    """The ``(dtype, shape, fortran)`` of an ``.npy`` header's text, or :class:`Refused`."""
    try:
        fields = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        raise Refused("torn", "an unreadable array header") from None
    if not isinstance(fields, dict) or set(fields) != {"descr", "fortran_order", "shape"}:
        raise Refused("torn", "an array header without descr, fortran_order and shape")
    descr, fortran, shape = fields["descr"], fields["fortran_order"], fields["shape"]
    if not isinstance(descr, str) or not _DESCR.fullmatch(descr):
        raise Refused("torn", f"an array of a type d2lrnn does not read ({str(descr)[:40]!r})")
    if not isinstance(fortran, bool) or not isinstance(shape, tuple) or len(shape) > 32 or not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape):
        raise Refused("torn", "an array header with a bad shape")
    try:
        dtype = np.dtype(descr)
    except (TypeError, ValueError):
        raise Refused("torn", f"an array of an unknown type ({descr!r})") from None
    if dtype.hasobject:
        raise Refused("torn", "an array of Python objects (a pickle)")
    return dtype, shape, fortran


class Archive:
    """An ``.npz`` archive opened from a file object; :meth:`header` and :meth:`array` read its entries
    (named without ``.npy``)."""

    def __init__(self, file):
        self._file = file
        start = file.read(4)
        file.seek(0)
        if not start:
            raise Refused("torn", "empty file")
        if start not in ZIP_MAGIC:
            raise Refused("not ours", "not a zip archive")
        try:
            self._zip = zipfile.ZipFile(file)
            infos = self._zip.infolist()
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError, struct.error,
                NotImplementedError, UnicodeDecodeError) as err:
            raise Refused("torn", type(err).__name__) from None
        if len(infos) > MAX_ENTRIES:
            raise Refused("torn", f"{len(infos)} entries")
        self._entries = {info.filename[:-4]: info for info in infos if info.filename.endswith(".npy")}

    def close(self):
        with contextlib.suppress(Exception):
            self._zip.close()

    @property
    def names(self):
        """The arrays the archive holds."""
        return list(self._entries)

    def _info(self, name):
        info = self._entries.get(name)
        if info is None:
            raise KeyError(name)
        if info.compress_type != zipfile.ZIP_STORED:
            raise Refused("compressed", f"{name} is compressed")
        if info.flag_bits & 0x1:
            raise Refused("torn", f"{name} is encrypted")
        return info

    def _member(self, info):
        try:
            return self._zip.open(info)
        except (zipfile.BadZipFile, OSError, ValueError, EOFError, struct.error, NotImplementedError,
                RuntimeError) as err:
            raise Refused("torn", type(err).__name__) from None

    def _read_exactly(self, member, size):
        try:
            data = member.read(size)
        except (zipfile.BadZipFile, OSError, ValueError, EOFError, struct.error) as err:
            raise Refused("torn", type(err).__name__) from None
        if len(data) != size:
            raise Refused("torn", "an entry cut short")
        return data

    def header(self, name):
        """The :class:`Header` of the array ``name`` (``KeyError`` if there is none), read from at most
        :data:`HEADER_LIMIT` bytes, and checked against the entry's size in the zip directory."""
        info = self._info(name)
        with self._member(info) as member:
            magic = self._read_exactly(member, 8)
            if magic[:6] != NPY_MAGIC or magic[6] not in (1, 2, 3) or magic[7] != 0:
                raise Refused("torn", f"{name} is not an array")
            size_format = "<H" if magic[6] == 1 else "<I"
            length = struct.unpack(size_format, self._read_exactly(member, struct.calcsize(size_format)))[0]
            if length > HEADER_LIMIT:
                raise Refused("torn", f"the header of {name} has {length} bytes")
            raw = self._read_exactly(member, length)
        try:
            text = raw.decode("utf-8" if magic[6] == 3 else "latin1")
        except UnicodeDecodeError:
            raise Refused("torn", f"the header of {name} is not text") from None
        dtype, shape, fortran = _parse_header(text)
        header = Header(dtype, shape, fortran, 8 + struct.calcsize(size_format) + length)
        if info.file_size != header.offset + header.nbytes or info.compress_size != info.file_size:
            raise Refused("torn", f"{name} holds {info.file_size} bytes, not the "
                                  f"{header.offset + header.nbytes} its header gives")
        return header

    def array(self, name, header=None):
        """The array ``name``, read into a new array a chunk at a time after its header (``header``, if
        already read and checked by the caller) and its size in the zip directory agree."""
        header = header or self.header(name)
        out = np.empty(header.shape[::-1] if header.fortran else header.shape, header.dtype)
        view = memoryview(out.reshape(-1).view(np.uint8)) if header.nbytes else None
        with self._member(self._info(name)) as member:
            self._read_exactly(member, header.offset)
            for start in range(0, header.nbytes, CHUNK):
                chunk = self._read_exactly(member, min(CHUNK, header.nbytes - start))
                view[start:start + len(chunk)] = chunk
        return out.T if header.fortran else out


@contextlib.contextmanager
def opened(path, follow_symlinks=True):
    """The :class:`Archive` at ``path`` (see :func:`open_regular`), closed when the block ends."""
    with open_regular(path, follow_symlinks) as file:
        archive = Archive(file)
        try:
            yield archive
        finally:
            archive.close()
