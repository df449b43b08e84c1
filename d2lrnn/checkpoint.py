"""Checkpoints: one backend-neutral ``.npz`` file per trained model, written atomically.

A checkpoint holds the five parameters in the from-scratch layout
``[W_xh, W_hh, b_h, W_hq, b_q]`` as float32 arrays and one JSON string of metadata
(format version, model kind and sizes, the vocabulary, hyperparameters, training history,
the backend it was saved on). No framework objects and no pickles, so a model trained on
one backend loads on any other.

Files are written to a temporary file in the target's folder, synced, then renamed over
the target (:func:`atomic_write`): a crash leaves either the old file or the new one.
"""

import contextlib
import json
import os
import pathlib
import tempfile

import numpy as np

from . import ops
from .backends import _common, backend_name
from .data import Vocab
from .errors import CheckpointError, D2LRNNError
from .models import make_model

#: Bumped when the layout changes so that an older reader refuses what it cannot read.
FORMAT_VERSION = 1
FORMAT_NAME = "d2lrnn-checkpoint"
PARAM_NAMES = ("W_xh", "W_hh", "b_h", "W_hq", "b_q")
_META_KEY = "meta"


def _fsync_dir(folder):
    """Make the rename itself durable (POSIX); harmless where a folder cannot be opened."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _default_file_mode():
    """The permissions ``open`` would give a new file (temporary files get 0o600)."""
    umask = os.umask(0o022)
    os.umask(umask)
    return 0o666 & ~umask


def atomic_write(path, write, mode="wb", encoding=None):
    """Write ``path`` through ``write(file)`` so that it is never seen half-written.

    The data goes to a temporary file in the same folder, which is flushed, synced and
    renamed over ``path``. If anything fails the temporary file is removed and an existing
    ``path`` is left as it was. Returns ``path`` as a :class:`pathlib.Path`.
    """
    path = pathlib.Path(path)
    folder = path.parent
    newline = "" if "b" not in mode else None
    tmp = tempfile.NamedTemporaryFile(mode, encoding=encoding, newline=newline, delete=False,
                                      dir=folder, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with tmp:
            write(tmp)
            tmp.flush()
            os.fsync(tmp.fileno())
            if hasattr(os, "fchmod"):
                os.fchmod(tmp.fileno(), _default_file_mode())
        os.replace(tmp.name, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp.name)
        raise
    _fsync_dir(folder)
    return path


def _write_npz(file, arrays):
    """The writer :func:`save_checkpoint` hands to :func:`atomic_write` (tests replace it)."""
    np.savez(file, **arrays)


def _metadata(net, vocab, hparams, history):
    from . import __version__

    return {"format": FORMAT_NAME, "format_version": FORMAT_VERSION, "kind": net.kind,
            "vocab_size": int(net.vocab_size), "num_hiddens": int(net.num_hiddens),
            "vocab": vocab.to_dict(), "hparams": dict(hparams or {}), "history": dict(history or {}),
            "backend": backend_name(), "d2lrnn_version": __version__}


def save_checkpoint(path, net, vocab, hparams=None, history=None):
    """Save ``net``'s parameters, ``vocab``, ``hparams`` and ``history`` to the ``.npz`` file ``path``.

    ``hparams`` and ``history`` are dicts of JSON-friendly values (other values are stored as
    their ``str``). The file is replaced atomically; returns its path.
    """
    if len(vocab) != net.vocab_size:
        raise CheckpointError(f"the vocabulary has {len(vocab)} tokens but the model expects "
                              f"{net.vocab_size}: save the vocabulary the model was trained with")
    arrays = {name: np.asarray(ops.to_numpy(p), dtype=np.float32)
              for name, p in zip(PARAM_NAMES, net.scratch_params(), strict=True)}
    meta = json.dumps(_metadata(net, vocab, hparams, history), ensure_ascii=False, default=str)
    arrays[_META_KEY] = np.array(meta)  # a unicode array: loads without pickle
    try:
        return atomic_write(path, lambda f: _write_npz(f, arrays))
    except OSError as err:
        raise CheckpointError(f"cannot write checkpoint {path}: {err.strerror or err}: "
                              "check that its folder exists and is writable") from None


def _read(path):
    """The metadata dict and the five arrays of the checkpoint file ``path``."""
    if path.is_dir():
        raise CheckpointError(f"checkpoint {path} is a folder: pass the file in it, "
                              f"e.g. {path / 'model.npz'}")
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} does not exist: check the path, "
                              "or train a model with `d2lrnn train`")
    torn = f"checkpoint {path} is truncated or corrupt ({{}}): save it again or use another copy"
    if path.stat().st_size == 0:  # NumPy versions disagree on the error an empty file raises
        raise CheckpointError(torn.format("empty file"))
    not_ours = f"{path} is not a d2lrnn checkpoint: pass a model.npz written by `d2lrnn train`"
    try:
        data = np.load(path, allow_pickle=False)
        if not isinstance(data, np.lib.npyio.NpzFile):  # a lone .npy array
            raise CheckpointError(not_ours)
        with data:
            if _META_KEY not in data.files:
                raise CheckpointError(not_ours)
            meta = json.loads(str(data[_META_KEY]))
            arrays = [data[name] for name in PARAM_NAMES]
    except D2LRNNError:
        raise
    except (KeyError, ValueError) as err:  # a missing array, or a file that is not an .npz at all
        if isinstance(err, json.JSONDecodeError):
            raise CheckpointError(f"checkpoint {path} is corrupt (its metadata is not JSON): "
                                  "save it again or use another copy") from None
        raise CheckpointError(not_ours) from None
    except Exception as err:  # zip, zlib and I/O errors of a torn or damaged file
        raise CheckpointError(torn.format(type(err).__name__)) from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT_NAME:
        raise CheckpointError(not_ours)
    return meta, arrays


def _check_version(path, meta):
    version = meta.get("format_version")
    if not isinstance(version, int) or version < 1:
        raise CheckpointError(f"checkpoint {path} has no valid format version: save it again")
    if version > FORMAT_VERSION:
        raise CheckpointError(f"checkpoint {path} has format version {version}, newer than this d2lrnn "
                              f"reads ({FORMAT_VERSION}): upgrade d2lrnn (pip install -U d2lrnn)")


def _check_shapes(path, meta, arrays):
    V, h = meta["vocab_size"], meta["num_hiddens"]
    expected = [(V, h), (h, h), (h,), (h, V), (V,)]
    for name, a, shape in zip(PARAM_NAMES, arrays, expected):
        if a.shape != shape:
            raise CheckpointError(f"checkpoint {path} is corrupt: {name} has shape {a.shape}, expected "
                                  f"{shape} for vocab {V} and {h} hidden units: save it again")


def load_checkpoint(path, device=None):
    """Load a checkpoint on the active backend; return ``(net, vocab, info)``.

    ``net`` is a new model of the saved kind holding the saved parameters, ``vocab`` the
    saved vocabulary, and ``info`` a dict with ``kind``, ``backend`` (where it was saved),
    ``format_version``, ``d2lrnn_version``, ``hparams`` and ``history``.
    """
    path = pathlib.Path(path)
    meta, arrays = _read(path)
    _check_version(path, meta)
    try:
        _check_shapes(path, meta, arrays)
        vocab = Vocab.from_dict(meta["vocab"])
        with _common.generator_state_kept():  # the initial draw is overwritten: leave the seed alone
            net = make_model(meta["kind"], meta["vocab_size"], meta["num_hiddens"], device)
    except (KeyError, TypeError) as err:
        raise CheckpointError(f"checkpoint {path} is corrupt (bad metadata: {err}): save it again") from None
    except D2LRNNError as err:
        if isinstance(err, CheckpointError):
            raise
        raise CheckpointError(f"checkpoint {path} is corrupt ({err})") from None
    if len(vocab) != net.vocab_size:
        raise CheckpointError(f"checkpoint {path} is corrupt: its vocabulary has {len(vocab)} tokens "
                              f"but the model {net.vocab_size}: save it again")
    net.load_scratch_params([ops.from_numpy(a, device=device) for a in arrays])
    info = {key: meta.get(key) for key in ("kind", "backend", "format_version", "d2lrnn_version",
                                           "hparams", "history")}
    return net, vocab, info
