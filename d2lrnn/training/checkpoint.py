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

import contextlib
import dataclasses
import json
import math
import pathlib
from collections.abc import Callable

import numpy as np

from .. import ops
from .._version import __version__
from ..backends import backend_name, generator_state_kept
from ..errors import CheckpointError, D2LRNNError
from . import archive, memory
from .atomic import atomic_write
from .fields import MAX_DEPTH, MAX_TEXT, check_plain, read_vocab  # noqa: F401 (the tasks and tests read them here)
from .optim import STATE_COPIES

#: Bumped when the layout changes so that an older reader refuses what it cannot read.
FORMAT_VERSION = 2
FORMAT_NAME = "d2lrnn-checkpoint"
#: The metadata ``kind`` of a translation model's checkpoint; a language model's is its model kind.
SEQ2SEQ_KIND = "seq2seq"
#: The parameters of a format-1 checkpoint (a one-layer RNN), before names were stored.
PARAM_NAMES = ("W_xh", "W_hh", "b_h", "W_hq", "b_q")
_META_KEY = "meta"
_OPTIMIZER_PREFIX = "optimizer."
#: The most characters of metadata read (the JSON string, 4 bytes each as stored): settings, vocabularies
#: of a few hundred thousand tokens, histories of thousands of epochs fit in a fraction of it.
MAX_META_CHARS = 4_000_000
#: The largest step count of an optimizer's state.
MAX_STEPS = 10**12


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


def read_validated(path, contents, follow_symlinks=True, optimizer=False):
    """``(path, metadata, arrays)`` of the checkpoint file ``path``, every field checked against
    ``contents`` (a :class:`Contents`); one :class:`CheckpointError` line if anything is wrong.

    The metadata is read first and checked, then the header of every array against the shape the
    settings give, and only then the arrays themselves: no array is read that the model the metadata
    describes does not have. ``follow_symlinks`` false refuses a symbolic link (a run folder's files);
    ``optimizer`` adds a fourth item, the optimizer state (see :func:`load_optimizer_state`).
    """
    path = as_path(path)
    with opened_archive(path, contents.made_by, follow_symlinks) as opened:
        meta = read_meta(path, opened, contents.made_by)
        names = param_names_of(path, meta)
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
        check_budget(path, expected)
        headers = {name: opened.header(name) for name in names}
        check_arrays(path, headers, expected, *contents.describe(meta))
        arrays = {name: opened.array(name, header) for name, header in headers.items()}
        check_finite(path, arrays)
        state = _optimizer_state(path, opened, meta, list(expected.values())) if optimizer else None
    return (path, meta, arrays, state) if optimizer else (path, meta, arrays)


def check_budget(path, expected):
    """Refuse a checkpoint whose model (``{name: shape}``) would not fit in this machine's memory."""
    need, have = 4 * sum(math.prod(shape) for shape in expected.values()), memory.physical_memory()
    if have is not None and need > have:
        raise CheckpointError(f"checkpoint {path} describes a model of {memory.size_text(need)}, more than "
                              f"this machine's {memory.size_text(have)} of memory: load it on a larger "
                              "machine, or check where it came from")


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
        if optimizer_state.get("averaged"):  # the averaged parameters follow the optimizer's arrays
            meta["optimizer"]["averaged"] = True
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


def unreadable(path, err):
    """The error for a checkpoint path the system cannot open (``err``, an ``OSError``)."""
    return CheckpointError(f"cannot read checkpoint {path}: {err.strerror or err}: check the path")


def _check_file(path, made_by):
    """Refuse, with the fix, a path that is not a file d2lrnn could read a checkpoint from."""
    try:
        if path.is_dir():
            raise CheckpointError(f"checkpoint {path} is a folder: pass the file in it, "
                                  f"e.g. {path / 'model.npz'}")
        if not path.exists() and not path.is_symlink():
            raise CheckpointError(f"checkpoint {path} does not exist: check the path, "
                                  f"or train a model with `{made_by}`")
    except OSError as err:  # a name too long, a folder that cannot be searched
        raise unreadable(path, err) from None


@contextlib.contextmanager
def opened_archive(path, made_by="d2lrnn train", follow_symlinks=True):
    """The :class:`~d2lrnn.training.archive.Archive` of the checkpoint file ``path``, for one block; one
    :class:`CheckpointError` line for every way the file is not one d2lrnn can read (missing, a folder,
    a device, a symbolic link in a run folder (``follow_symlinks`` false), not a zip archive, torn,
    compressed). ``made_by`` is the command that writes such files, for the messages."""
    _check_file(path, made_by)
    torn = f"checkpoint {path} is truncated or corrupt ({{}}): save it again or use another copy"
    not_ours = f"{path} is not a d2lrnn checkpoint: pass a model.npz written by `{made_by}`"
    messages = {
        "link": f"checkpoint {path} is a symbolic link: d2lrnn reads a run folder's own files, not what a "
                "link in it points to; remove the link",
        "not regular": f"checkpoint {path} is not a regular file (a device or pipe): pass a model.npz "
                       f"written by `{made_by}`",
        "compressed": f"checkpoint {path} holds compressed arrays, which d2lrnn never writes (and which "
                      "could hide a memory bomb): save it again with d2lrnn",
        "not ours": not_ours}
    try:
        with archive.opened(path, follow_symlinks) as opened:
            yield opened
    except archive.Refused as err:
        raise CheckpointError(messages.get(err.kind) or torn.format(err.reason)) from None
    except KeyError:  # an array the metadata names is not in the archive
        raise CheckpointError(not_ours) from None
    except OSError as err:
        raise unreadable(path, err) from None


def read_meta(path, opened, made_by="d2lrnn train"):
    """The metadata dict of a checkpoint (its ``format`` checked, nothing else), read only if its stored
    size is within :data:`MAX_META_CHARS` characters."""
    not_ours = f"{path} is not a d2lrnn checkpoint: pass a model.npz written by `{made_by}`"
    if _META_KEY not in opened.names:
        raise CheckpointError(not_ours)
    header = opened.header(_META_KEY)
    if header.dtype.kind != "U" or header.shape != ():
        raise CheckpointError(not_ours)
    chars = header.dtype.itemsize // 4
    if chars > MAX_META_CHARS:
        raise CheckpointError(f"checkpoint {path} is corrupt: its metadata holds {chars:,} characters, more "
                              f"than the {MAX_META_CHARS:,} d2lrnn reads: save it again")
    try:
        meta = json.loads(str(opened.array(_META_KEY, header)[()]))
    except (ValueError, RecursionError):  # not JSON, nested too deep, a number too long
        raise CheckpointError(f"checkpoint {path} is corrupt (its metadata is not JSON): "
                              "save it again or use another copy") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT_NAME:
        raise CheckpointError(not_ours)
    check_plain(path, meta)
    return meta


def param_names_of(path, meta):
    """The parameter names a checkpoint's metadata gives (format 1: :data:`PARAM_NAMES`), checked."""
    names = meta.get("param_names", PARAM_NAMES)
    if not isinstance(names, list | tuple) or not all(isinstance(n, str) for n in names) or \
            len(names) > archive.MAX_ENTRIES or _META_KEY in names:
        raise CheckpointError(f"checkpoint {path} is corrupt: its parameter names are not a list of "
                              "names: save it again")
    return list(names)


def read_checkpoint(path, made_by="d2lrnn train", follow_symlinks=True):
    """The metadata dict of the checkpoint file ``path`` (only the container and its format checked: for
    choosing a loader)."""
    with opened_archive(path, made_by, follow_symlinks) as opened:
        return read_meta(path, opened, made_by)


def check_version(path, meta):
    """Refuse a checkpoint without a valid format version, or one newer than this d2lrnn reads."""
    version = meta.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise CheckpointError(f"checkpoint {path} has no valid format version: save it again")
    if version > FORMAT_VERSION:
        raise CheckpointError(f"checkpoint {path} has format version {version}, newer than this d2lrnn "
                              f"reads ({FORMAT_VERSION}): upgrade d2lrnn (pip install -U d2lrnn)")


def check_fields(path, meta, types, sizes=None):
    """Every field of ``meta`` of the type ``types`` gives (``{key: (types, what)}``; a bool is not a
    number), and the fields ``sizes`` (``{key: limit}``) from 1 to their limit."""
    for key, (kinds, what) in types.items():
        value = meta.get(key)
        if not isinstance(value, kinds) or (isinstance(value, bool) and kinds is not bool):
            raise CheckpointError(f"checkpoint {path} is corrupt: its {key!r} is {type(value).__name__}, "
                                  f"not {what}: save it again")
    for key, limit in (sizes or {}).items():
        if meta[key] < 1:
            raise CheckpointError(f"checkpoint {path} is corrupt: {key} is {meta[key]}: save it again")
        if meta[key] > limit:
            raise CheckpointError(f"checkpoint {path} is corrupt: {key} is {meta[key]}, above d2lrnn's limit "
                                  f"of {limit:,}: save it again")


def check_arrays(path, headers, expected, model, sizes):
    """The parameters ``expected`` (``{name: shape}``, in order), as the archive's array ``headers`` give
    them, float32 and of those shapes.

    ``model`` names the model (``a 2-layer gru model``) and ``sizes`` the sizes the shapes come
    from (``vocab 28 and 4 hidden units``), for the messages.
    """
    if list(headers) != list(expected):
        missing = [n for n in expected if n not in headers]
        what = f"lacks {', '.join(missing)}" if missing else \
            f"holds {', '.join(n for n in headers if n not in expected) or 'its parameters in another order'}"
        raise CheckpointError(f"checkpoint {path} is corrupt: it {what} for {model}: save it again")
    for name, header in headers.items():
        if header.dtype != np.float32:
            raise CheckpointError(f"checkpoint {path} is corrupt: {name} holds {header.dtype} values, not "
                                  "float32: save it again with d2lrnn")
        if header.shape != tuple(expected[name]):
            raise CheckpointError(f"checkpoint {path} is corrupt: {name} has shape {header.shape}, expected "
                                  f"{tuple(expected[name])} for {sizes}: save it again")


def check_finite(path, arrays):
    """Every value of every array finite."""
    for name, a in arrays.items():
        bad = a.size - int(np.isfinite(a).sum())
        if bad:
            raise CheckpointError(f"checkpoint {path} holds {bad} NaN or infinite values in {name}: it is "
                                  "from a diverged run or damaged; use the run's best checkpoint (model.npz)")


def checkpoint_kind(path, follow_symlinks=True):
    """``'seq2seq'`` for a translation model's checkpoint, ``'lm'`` for a language model's (its metadata
    read, not checked: for choosing the loader and the message)."""
    meta = read_checkpoint(as_path(path), follow_symlinks=follow_symlinks)
    return "seq2seq" if meta.get("kind") == SEQ2SEQ_KIND else "lm"


def load_optimizer_state(path, follow_symlinks=True):
    """The optimizer state a run's ``last.npz`` holds (:meth:`d2lrnn.training.step.Updater.state_dict`'s
    form), or None if it holds none (SGD runs, and runs saved before optimizers had state).

    Its arrays must be those the optimizer keeps for the checkpoint's parameters (Adam: two of each
    shape), as their headers say, before they are read.
    """
    path = as_path(path)
    with opened_archive(path, follow_symlinks=follow_symlinks) as opened:
        meta = read_meta(path, opened)
        shapes = [opened.header(name).shape for name in param_names_of(path, meta)]
        return _optimizer_state(path, opened, meta, shapes)


def _optimizer_state(path, opened, meta, shapes):
    """The optimizer state of an opened checkpoint whose parameters have ``shapes``, checked from the
    headers of its arrays before they are read; None if it holds none."""
    saved = meta.get("optimizer")
    if saved is None:
        return None
    damaged = f"checkpoint {path} holds a damaged optimizer state ({{}}): start a new run"
    if not isinstance(saved, dict) or set(saved) - {"averaged"} != {"name", "t", "arrays"}:
        raise CheckpointError(damaged.format("not a mapping of name, t and arrays"))
    name, t, count = saved["name"], saved["t"], saved["arrays"]
    averaged = saved.get("averaged", False)
    if averaged is not True and averaged is not False:
        raise CheckpointError(damaged.format(f"averaged is {str(averaged)[:40]}, not true or false"))
    if name not in STATE_COPIES:
        raise CheckpointError(damaged.format(f"an optimizer d2lrnn does not have, {str(name)[:40]!r}"))
    if not isinstance(t, int) or isinstance(t, bool) or not 0 <= t <= MAX_STEPS:
        raise CheckpointError(damaged.format(f"step count {str(t)[:40]}"))
    copies = STATE_COPIES[name] + averaged
    expected = {f"{_OPTIMIZER_PREFIX}{i}": shape for i, shape in enumerate(shapes * copies)}
    if count != len(expected):
        raise CheckpointError(damaged.format(f"{str(count)[:40]} arrays where {name} keeps {len(expected)}"))
    headers = {}
    for key, shape in expected.items():
        try:
            headers[key] = opened.header(key)
        except KeyError:
            raise CheckpointError(damaged.format(f"{key} is missing")) from None
        if headers[key].dtype != np.float32 or headers[key].shape != tuple(shape):
            found = f"{headers[key].dtype} values of shape {headers[key].shape}"
            raise CheckpointError(damaged.format(f"{key} holds {found}, not float32 of shape {tuple(shape)}"))
    arrays = [opened.array(key, header) for key, header in headers.items()]
    if any(not np.isfinite(a).all() for a in arrays):
        raise CheckpointError(damaged.format("values not finite float32"))
    state = {"optimizer": name, "t": t, "arrays": arrays}
    if averaged:
        state["averaged"] = True
    return state
