"""The checkpoint container: one backend-neutral ``.npz`` file per saved model, written atomically.

A checkpoint holds float32 NumPy arrays under parameter names, the optimizer's state (a run's
``last.npz``) as ``optimizer.0``, ``optimizer.1``, ..., and one JSON string of metadata: the format and
its version, the model's kind and settings (each task declares its own: :mod:`d2lrnn.lm.checkpoint`,
:mod:`d2lrnn.seq2seq.checkpoint`), vocabularies, hyperparameters, history. No framework objects and no
pickles, so a model trained on one backend loads on any other.

Files are written to a temporary file in the target's folder, synced, then renamed over the target
(:func:`~d2lrnn.training.atomic.atomic_write`): a crash leaves either the old file or the new one. The
readers here check what every checkpoint shares (the container, the version, field types, array dtypes,
shapes and finiteness, vocabularies) and say in one line what is wrong.
"""

import dataclasses
import json
import pathlib
from collections.abc import Callable

import numpy as np

from .. import ops
from .._version import __version__
from ..backends import backend_name, generator_state_kept
from ..data import Vocab
from ..errors import CheckpointError, D2LRNNError
from .atomic import atomic_write

#: Bumped when the layout changes so that an older reader refuses what it cannot read.
FORMAT_VERSION = 2
FORMAT_NAME = "d2lrnn-checkpoint"
#: The metadata ``kind`` of a translation model's checkpoint; a language model's is its model kind.
SEQ2SEQ_KIND = "seq2seq"
#: The parameters of a format-1 checkpoint (a one-layer RNN), before names were stored.
PARAM_NAMES = ("W_xh", "W_hh", "b_h", "W_hq", "b_q")
_META_KEY = "meta"
_OPTIMIZER_PREFIX = "optimizer."


#: What a metadata field may hold, for :class:`Contents`' ``field_types``: (types, what to call it).
WHOLE, NUMBER, FLAG = (int, "a whole number"), ((int, float), "a number"), (bool, "true or false")
#: The fields every run's checkpoint has: its settings, its history, and (in ``last.npz``) how to resume.
RUN_FIELDS = {"hparams": (dict, "a mapping of settings"), "history": (dict, "a mapping of lists"),
              "resume": ((dict, type(None)), "a mapping")}


@dataclasses.dataclass(frozen=True)
class Contents:
    """What a task's checkpoints hold, declared once by the task (:mod:`d2lrnn.lm.checkpoint`,
    :mod:`d2lrnn.seq2seq.checkpoint`); :func:`read_validated` checks a file against it.

    - ``made_by``: the command that writes such files (for the messages);
    - ``check_kind(path, meta)``: refuse another task's checkpoint (naming the command that reads it),
      and fill in the settings older files lack;
    - ``field_types``: ``{field: (types, what to call it)}`` of the metadata, ``sizes`` the fields that
      must be at least 1;
    - ``shapes(path, meta)``: ``{name: shape}`` of the parameters of the model the metadata describes,
      without building it (a :class:`D2LRNNError` for settings no model has);
    - ``describe(meta)``: (the model, the sizes its shapes come from), for the messages;
    - ``info_keys``: the metadata fields a loader returns as ``info``.
    """

    made_by: str
    check_kind: Callable
    field_types: dict
    sizes: tuple
    shapes: Callable
    describe: Callable
    info_keys: tuple


def read_validated(path, contents):
    """``(path, metadata, arrays)`` of the checkpoint file ``path``, every field checked against
    ``contents`` (a :class:`Contents`); one :class:`CheckpointError` line if anything is wrong."""
    path = as_path(path)
    meta, arrays = read_checkpoint(path, contents.made_by)
    check_version(path, meta)
    contents.check_kind(path, meta)
    check_fields(path, meta, contents.field_types, contents.sizes)
    try:
        expected = contents.shapes(path, meta)
    except CheckpointError:
        raise
    except D2LRNNError as err:
        raise CheckpointError(f"checkpoint {path} holds a model this d2lrnn cannot build ({err}): "
                              "upgrade d2lrnn, or save it again") from None
    check_arrays(path, arrays, expected, *contents.describe(meta))
    return path, meta, arrays


def info_of(meta, contents):
    """The ``info`` dict a loader returns: the metadata fields ``contents`` names."""
    return {key: meta.get(key) for key in contents.info_keys}


def build_model(path, make):
    """``make()``, the model a checkpoint describes, drawn without moving the shared generator (its starting
    weights are replaced by the file's); settings no model has are one :class:`CheckpointError` line."""
    try:
        with generator_state_kept():
            return make()
    except D2LRNNError as err:
        raise CheckpointError(f"checkpoint {path} is corrupt ({err})") from None


def _write_npz(file, arrays):
    """The writer :func:`packed_writer` hands to :func:`atomic_write` (tests replace it)."""
    np.savez(file, **arrays)


def base_metadata():
    """The metadata fields every checkpoint starts with: format, version, backend, d2lrnn's version."""
    return {"format": FORMAT_NAME, "format_version": FORMAT_VERSION, "backend": backend_name(),
            "d2lrnn_version": __version__}


def packed_writer(names, params, meta, optimizer_state=None):
    """``write(file)`` of a checkpoint: the tensors ``params`` as float32 NumPy arrays under ``names``,
    the optimizer's state (if any) as ``optimizer.0``, ``optimizer.1``, ..., and ``meta`` as JSON.
    Every value is copied now, so training may go on before the file is written."""
    arrays = {name: np.asarray(ops.to_numpy(p), dtype=np.float32)
              for name, p in zip(names, params, strict=True)}
    meta = dict(meta)
    if optimizer_state is not None:
        opt_arrays = [np.asarray(a, dtype=np.float32) for a in optimizer_state["arrays"]]
        meta["optimizer"] = {"name": optimizer_state["optimizer"], "t": int(optimizer_state["t"]),
                             "arrays": len(opt_arrays)}
        arrays.update({f"{_OPTIMIZER_PREFIX}{i}": a for i, a in enumerate(opt_arrays)})
    meta = json.dumps(meta, ensure_ascii=False, default=str)
    arrays[_META_KEY] = np.array(meta)  # a unicode array: loads without pickle
    return lambda file: _write_npz(file, arrays)


def write_checkpoint(path, write):
    """Write a checkpoint through ``write(file)`` atomically to ``path``; one line if it cannot be written."""
    try:
        return atomic_write(path, write)
    except OSError as err:
        raise CheckpointError(f"cannot write checkpoint {path}: {err.strerror or err}: "
                              "check that its folder exists and is writable") from None


def as_path(path):
    """``path`` as a :class:`pathlib.Path`, or one line if it is not a file name."""
    if not isinstance(path, (str, pathlib.PurePath)) or not str(path):
        raise CheckpointError(f"a checkpoint path must be a file name such as 'model.npz', got {path!r}")
    return pathlib.Path(path)


def read_checkpoint(path, made_by="d2lrnn train"):
    """The metadata dict and the parameter arrays of the checkpoint file ``path`` (not yet checked).

    ``made_by`` is the command that writes such files, for the messages.
    """
    if path.is_dir():
        raise CheckpointError(f"checkpoint {path} is a folder: pass the file in it, "
                              f"e.g. {path / 'model.npz'}")
    if not path.exists():
        raise CheckpointError(f"checkpoint {path} does not exist: check the path, "
                              f"or train a model with `{made_by}`")
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} is not a regular file (a device or pipe): "
                              f"pass a model.npz written by `{made_by}`")
    torn = f"checkpoint {path} is truncated or corrupt ({{}}): save it again or use another copy"
    if path.stat().st_size == 0:  # NumPy versions disagree on the error an empty file raises
        raise CheckpointError(torn.format("empty file"))
    not_ours = f"{path} is not a d2lrnn checkpoint: pass a model.npz written by `{made_by}`"
    try:
        data = np.load(path, allow_pickle=False)
        if not isinstance(data, np.lib.npyio.NpzFile):  # a lone .npy array
            raise CheckpointError(not_ours)
        with data:
            if _META_KEY not in data.files:
                raise CheckpointError(not_ours)
            meta = json.loads(str(data[_META_KEY]))
            names = meta.get("param_names", PARAM_NAMES) if isinstance(meta, dict) else PARAM_NAMES
            if not isinstance(names, list | tuple) or not all(isinstance(n, str) for n in names):
                raise CheckpointError(f"checkpoint {path} is corrupt: its parameter names are not a list of "
                                      "names: save it again")
            arrays = {name: data[name] for name in names}
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


def check_version(path, meta):
    """Refuse a checkpoint without a valid format version, or one newer than this d2lrnn reads."""
    version = meta.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise CheckpointError(f"checkpoint {path} has no valid format version: save it again")
    if version > FORMAT_VERSION:
        raise CheckpointError(f"checkpoint {path} has format version {version}, newer than this d2lrnn "
                              f"reads ({FORMAT_VERSION}): upgrade d2lrnn (pip install -U d2lrnn)")


def check_fields(path, meta, types, sizes=()):
    """Every field of ``meta`` of the type ``types`` gives (``{key: (types, what)}``; a bool is not a
    number), and the fields ``sizes`` at least 1."""
    for key, (kinds, what) in types.items():
        value = meta.get(key)
        if not isinstance(value, kinds) or (isinstance(value, bool) and kinds is not bool):
            raise CheckpointError(f"checkpoint {path} is corrupt: its {key!r} is {type(value).__name__}, "
                                  f"not {what}: save it again")
    for key in sizes:
        if meta[key] < 1:
            raise CheckpointError(f"checkpoint {path} is corrupt: {key} is {meta[key]}: save it again")


def check_arrays(path, arrays, expected, model, sizes):
    """The parameters ``expected`` (``{name: shape}``, in order), float32, every value finite.

    ``model`` names the model (``a 2-layer gru model``) and ``sizes`` the sizes the shapes come
    from (``vocab 28 and 4 hidden units``), for the messages.
    """
    if list(arrays) != list(expected):
        missing = [n for n in expected if n not in arrays]
        what = f"lacks {', '.join(missing)}" if missing else \
            f"holds {', '.join(n for n in arrays if n not in expected) or 'its parameters in another order'}"
        raise CheckpointError(f"checkpoint {path} is corrupt: it {what} for {model}: save it again")
    for name, a in arrays.items():
        if a.dtype != np.float32:
            raise CheckpointError(f"checkpoint {path} is corrupt: {name} holds {a.dtype} values, not "
                                  "float32: save it again with d2lrnn")
        if a.shape != expected[name]:
            raise CheckpointError(f"checkpoint {path} is corrupt: {name} has shape {a.shape}, expected "
                                  f"{expected[name]} for {sizes}: save it again")
        bad = a.size - int(np.isfinite(a).sum())
        if bad:
            raise CheckpointError(f"checkpoint {path} holds {bad} NaN or infinite values in {name}: it is "
                                  "from a diverged run or damaged; use the run's best checkpoint (model.npz)")


def read_vocab(path, saved, size, name="vocabulary"):
    """The :class:`Vocab` stored as ``saved`` (its ``to_dict()``), which must hold ``size`` tokens."""
    try:
        vocab = Vocab.from_dict(saved)
    except (KeyError, TypeError, D2LRNNError) as err:
        raise CheckpointError(f"checkpoint {path} is corrupt (bad {name}: {err}): save it again") from None
    if len(vocab) != size:
        raise CheckpointError(f"checkpoint {path} is corrupt: its {name} has {len(vocab)} tokens but "
                              f"the model {size}: save it again")
    return vocab


def checkpoint_kind(path):
    """``'seq2seq'`` for a translation model's checkpoint, ``'lm'`` for a language model's (read, not
    checked: for choosing the loader and the message)."""
    meta, _ = read_checkpoint(as_path(path))
    return "seq2seq" if meta.get("kind") == SEQ2SEQ_KIND else "lm"


def load_optimizer_state(path):
    """The optimizer state a run's ``last.npz`` holds (:meth:`d2lrnn.training.step.Updater.state_dict`'s
    form), or None if it holds none (SGD runs, and runs saved before optimizers had state)."""
    path = as_path(path)
    meta, _ = read_checkpoint(path)
    saved = meta.get("optimizer")
    if saved is None:
        return None
    damaged = f"checkpoint {path} holds a damaged optimizer state ({{}}): start a new run"
    try:
        name, t, count = saved["name"], saved["t"], saved["arrays"]
        if not (isinstance(name, str) and isinstance(t, int) and isinstance(count, int) and t >= 0):
            raise ValueError("bad fields")
        with np.load(path, allow_pickle=False) as data:
            arrays = [data[f"{_OPTIMIZER_PREFIX}{i}"] for i in range(count)]
    except (KeyError, TypeError, ValueError) as err:
        raise CheckpointError(damaged.format(err)) from None
    if any(a.dtype != np.float32 or not np.isfinite(a).all() for a in arrays):
        raise CheckpointError(damaged.format("values not finite float32"))
    return {"optimizer": name, "t": t, "arrays": arrays}
