"""Checkpoints: one backend-neutral ``.npz`` file per trained model, written atomically.

A checkpoint holds the model's parameters in the book's layout as float32 arrays, each under its
name (``W_xh``, ..., ``l1.W_xh``, ..., ``W_hq``, ``b_q``), and one JSON string of metadata
(format version, the model's settings: kind, cell, sizes, layers, directions; the vocabulary,
hyperparameters, training history, the backend it was saved on). Format 1 files (the one-layer
RNN, before cells and layers) still load. No framework objects and no pickles, so a model trained on
one backend loads on any other.

Files are written to a temporary file in the target's folder, synced, then renamed over
the target (:func:`atomic_write`): a crash leaves either the old file or the new one.
Loading checks every field (float32 arrays, all finite, shapes that match the sizes and the
vocabulary, settings that are mappings) and says in one line what is wrong.

Translation models (:mod:`d2lrnn.seq2seq.checkpoint`) are saved in the same container, with kind
``seq2seq``, through the pieces here that are not about language models: :func:`packed_writer`,
:func:`write_checkpoint`, :func:`read_checkpoint`, :func:`check_version`, :func:`check_fields`,
:func:`check_arrays`, :func:`read_vocab` and :func:`load_optimizer_state`.
"""

import json
import pathlib

import numpy as np

from . import ops
from .atomic import atomic_write
from .backends import backend_name, generator_state_kept
from .data import Vocab
from .errors import CheckpointError, D2LRNNError
from .models import RecurrentStack, make_model

__all__ = ["save_checkpoint", "load_checkpoint", "checkpoint_info", "checkpoint_writer",
           "load_optimizer_state", "checkpoint_kind", "atomic_write"]

#: Bumped when the layout changes so that an older reader refuses what it cannot read.
FORMAT_VERSION = 2
FORMAT_NAME = "d2lrnn-checkpoint"
#: The metadata ``kind`` of a translation model's checkpoint (:mod:`d2lrnn.seq2seq.checkpoint`), which
#: shares this container: the language-model loader refuses it, naming ``d2lrnn translate``.
SEQ2SEQ_KIND = "seq2seq"
#: The parameters of a format-1 checkpoint (a one-layer RNN).
PARAM_NAMES = ("W_xh", "W_hh", "b_h", "W_hq", "b_q")
#: The model settings a checkpoint records (``net.config()``), with their format-1 defaults.
MODEL_DEFAULTS = {"cell": "rnn", "num_layers": 1, "bidirectional": False, "dropout": 0.0,
                  "reset_after": False}
#: Model settings added within format 2: a checkpoint saved before them used these.
ADDED_MODEL_SETTINGS = {"input_dropout": 0.0, "output_dropout": 0.0}
_META_KEY = "meta"
_OPTIMIZER_PREFIX = "optimizer."
INFO_KEYS = ("kind", "cell", "num_layers", "bidirectional", "dropout", "input_dropout", "output_dropout",
             "reset_after", "backend",
             "format_version", "d2lrnn_version", "hparams", "history", "resume")


def _write_npz(file, arrays):
    """The writer :func:`save_checkpoint` hands to :func:`atomic_write` (tests replace it)."""
    np.savez(file, **arrays)


def _metadata(net, vocab, hparams, history, resume):
    from . import __version__

    meta = {"format": FORMAT_NAME, "format_version": FORMAT_VERSION, **net.config(),
            "param_names": list(net.param_names), "vocab": vocab.to_dict(), "hparams": dict(hparams or {}),
            "history": dict(history or {}),
            "backend": backend_name(), "d2lrnn_version": __version__}
    if resume is not None:
        meta["resume"] = dict(resume)
    return meta


def checkpoint_writer(net, vocab, hparams=None, history=None, resume=None, optimizer_state=None):
    """A function ``write(file)`` that writes the checkpoint of ``net`` as it is now into an open file.

    The parameters are copied to NumPy at once, so the model may go on training before the
    file is written (:func:`d2lrnn.atomic.write_files` writes several files as one set).
    ``resume`` is extra state for continuing a run (plain data), returned by
    :func:`load_checkpoint` as ``info["resume"]``; ``optimizer_state`` what
    :meth:`d2lrnn.train.Updater.state_dict` returns (Adam's running averages), read back by
    :func:`load_optimizer_state`.
    """
    if len(vocab) != net.vocab_size:
        raise CheckpointError(f"the vocabulary has {len(vocab)} tokens but the model expects "
                              f"{net.vocab_size}: save the vocabulary the model was trained with")
    if net.kind == "custom":
        raise CheckpointError("a model built from your own get_params/forward functions cannot be saved: "
                              "build it with d2l.make_model (or d2l's get_*_params and cells) to save it")
    meta = _metadata(net, vocab, hparams, history, resume)
    return packed_writer(net.param_names, net.scratch_params(), meta, optimizer_state)


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


def save_checkpoint(path, net, vocab, hparams=None, history=None):
    """Save ``net``'s parameters, ``vocab``, ``hparams`` and ``history`` to the ``.npz`` file ``path``.

    ``hparams`` and ``history`` are dicts of JSON-friendly values (other values are stored as
    their ``str``). The file is replaced atomically; returns its path.
    """
    path = as_path(path)
    return write_checkpoint(path, checkpoint_writer(net, vocab, hparams, history))


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


#: What each metadata field must be: (types, what to call it in an error).
_META_TYPES = {
    "kind": (str, "a model name"),
    "cell": (str, "a cell name"),
    "vocab_size": (int, "a whole number"),
    "num_hiddens": (int, "a whole number"),
    "num_layers": (int, "a whole number"),
    "bidirectional": (bool, "true or false"),
    "dropout": ((int, float), "a number"),
    "reset_after": (bool, "true or false"),
    "input_dropout": ((int, float), "a number"),
    "output_dropout": ((int, float), "a number"),
    "vocab": (dict, "a mapping"),
    "hparams": (dict, "a mapping of settings"),
    "history": (dict, "a mapping of lists"),
    "resume": ((dict, type(None)), "a mapping"),
}


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


def _check_meta(path, meta):
    if meta.get("kind") == SEQ2SEQ_KIND:
        raise CheckpointError(f"checkpoint {path} holds a translation model (seq2seq), not a language model: "
                              f"translate with `d2lrnn translate SENTENCE --checkpoint {path}`")
    if meta.get("format_version") == 1:  # before cells and layers: a one-layer RNN
        meta.update({k: v for k, v in MODEL_DEFAULTS.items() if k not in meta})
    meta.update({k: v for k, v in ADDED_MODEL_SETTINGS.items() if k not in meta})
    check_fields(path, meta, _META_TYPES, sizes=("vocab_size", "num_hiddens", "num_layers"))


def _expected_shapes(path, meta):
    """``{name: shape}`` of the model the metadata describes, without building it."""
    kind = {"rnn_scratch": "scratch", "rnn_concise": "concise"}.get(meta["kind"], meta["kind"])
    if kind not in ("scratch", "concise"):
        raise CheckpointError(f"checkpoint {path} holds a {meta['kind']!r} model, which this d2lrnn cannot "
                              "build (it knows 'scratch' and 'concise'): upgrade d2lrnn")
    try:
        layer = RecurrentStack(meta["cell"], meta["vocab_size"], meta["num_hiddens"], meta["num_layers"],
                               meta["bidirectional"], meta["dropout"], meta["reset_after"])
    except D2LRNNError as err:
        raise CheckpointError(f"checkpoint {path} holds a model this d2lrnn cannot build ({err}): "
                              "upgrade d2lrnn, or save it again") from None
    names = layer.names + ("W_hq", "b_q")
    shapes = layer.shapes() + [(layer.num_outputs, meta["vocab_size"]), (meta["vocab_size"],)]
    return dict(zip(names, shapes))


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


def _validated(path):
    """The metadata and arrays of a checkpoint, every field checked; one CheckpointError line if not."""
    path = as_path(path)
    meta, arrays = read_checkpoint(path)
    check_version(path, meta)
    _check_meta(path, meta)
    check_arrays(path, arrays, _expected_shapes(path, meta),
                 f"a {meta['num_layers']}-layer {meta['cell']} model",
                 f"vocab {meta['vocab_size']} and {meta['num_hiddens']} hidden units")
    vocab = read_vocab(path, meta["vocab"], meta["vocab_size"])
    return path, meta, arrays, vocab


def checkpoint_info(path):
    """The ``info`` dict of a checkpoint (see :func:`load_checkpoint`), checked, without building a model."""
    _, meta, _, _ = _validated(path)
    return {key: meta.get(key) for key in INFO_KEYS}


def checkpoint_kind(path):
    """``'seq2seq'`` for a translation model's checkpoint, ``'lm'`` for a language model's (read, not
    checked: for choosing the loader and the message)."""
    meta, _ = read_checkpoint(as_path(path))
    return "seq2seq" if meta.get("kind") == SEQ2SEQ_KIND else "lm"


def load_optimizer_state(path):
    """The optimizer state a run's ``last.npz`` holds (:meth:`d2lrnn.train.Updater.state_dict`'s
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


def load_checkpoint(path, device=None):
    """Load a checkpoint on the active backend; return ``(net, vocab, info)``.

    ``net`` is a new model of the saved kind holding the saved parameters, ``vocab`` the
    saved vocabulary, and ``info`` a dict with ``kind``, ``backend`` (where it was saved),
    ``format_version``, ``d2lrnn_version``, ``hparams``, ``history`` and ``resume`` (the state
    a run folder's ``last.npz`` keeps for ``d2lrnn train --resume``, else None). Every array
    must be float32, finite and of the shape the metadata gives; anything else is a
    :class:`CheckpointError`. A translation model's checkpoint is refused: load it with
    :func:`d2lrnn.seq2seq.checkpoint.load_seq2seq_checkpoint`.
    """
    path, meta, arrays, vocab = _validated(path)
    try:
        with generator_state_kept():  # the initial draw is overwritten: leave the seed alone
            net = make_model(meta["kind"], meta["vocab_size"], meta["num_hiddens"], device, meta["cell"],
                             meta["num_layers"], meta["bidirectional"], meta["dropout"], meta["reset_after"],
                             meta["input_dropout"], meta["output_dropout"])
    except D2LRNNError as err:
        raise CheckpointError(f"checkpoint {path} is corrupt ({err})") from None
    net.load_scratch_params([ops.from_numpy(a, device=device) for a in arrays.values()])
    return net, vocab, {key: meta.get(key) for key in INFO_KEYS}
