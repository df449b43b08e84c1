"""Checkpoints of language models, in d2lrnn's ``.npz`` container (:mod:`d2lrnn.training.checkpoint`).

A language model's checkpoint holds its parameters in the book's layout, each under its name (``W_xh``,
..., ``l1.W_xh``, ..., ``W_hq``, ``b_q``), and metadata: the model's settings (kind, cell, sizes,
layers, directions, dropout), the vocabulary, hyperparameters, training history and the state to resume
a run from. Format 1 files (the one-layer RNN, before cells and layers) still load. Loading checks every
field (float32 arrays, all finite, shapes that match the sizes and the vocabulary, settings that are
mappings) and says in one line what is wrong; a translation model's checkpoint is refused with the
command that reads it.
"""

import hashlib

from .. import checks, ops
from ..errors import CheckpointError
from ..models import RecurrentStack
from ..training import checkpoint as container
from .model import make_model

__all__ = ["save_checkpoint", "load_checkpoint", "checkpoint_info", "checkpoint_writer"]

#: The model settings a checkpoint records (``net.config()``), with their format-1 defaults.
MODEL_DEFAULTS = {"cell": "rnn", "num_layers": 1, "bidirectional": False, "dropout": 0.0,
                  "reset_after": False}
#: Model settings added within format 2: a checkpoint saved before them used these.
ADDED_MODEL_SETTINGS = {"input_dropout": 0.0, "output_dropout": 0.0, "locked_dropout": False,
                        "weight_drop": 0.0}
INFO_KEYS = ("kind", "cell", "num_layers", "bidirectional", "dropout", "input_dropout", "output_dropout",
             "locked_dropout", "weight_drop", "reset_after", "backend",
             "format_version", "d2lrnn_version", "hparams", "history", "resume")


def _metadata(net, vocab, hparams, history, resume):
    meta = {**container.base_metadata(), **net.config(), "param_names": list(net.param_names),
            "vocab": vocab.to_dict(), "hparams": dict(hparams or {}), "history": dict(history or {})}
    if resume is not None:
        meta["resume"] = dict(resume)
    return meta


def checkpoint_writer(net, vocab, hparams=None, history=None, resume=None, optimizer_state=None):
    """A function ``write(file)`` that writes the checkpoint of ``net`` as it is now into an open file.

    The parameters are copied to NumPy at once, so the model may go on training before the
    file is written (:func:`d2lrnn.training.atomic.write_files` writes several files as one set).
    ``resume`` is extra state for continuing a run (plain data), returned by
    :func:`load_checkpoint` as ``info["resume"]``; ``optimizer_state`` what
    :meth:`d2lrnn.training.step.Updater.state_dict` returns (Adam's running averages), read back by
    :func:`d2lrnn.training.checkpoint.load_optimizer_state`.
    """
    if len(vocab) != net.vocab_size:
        raise CheckpointError(f"the vocabulary has {len(vocab)} tokens but the model expects "
                              f"{net.vocab_size}: save the vocabulary the model was trained with")
    if net.kind == "custom":
        raise CheckpointError("a model built from your own get_params/forward functions cannot be saved: "
                              "build it with d2l.make_model (or d2l's get_*_params and cells) to save it")
    meta = _metadata(net, vocab, hparams, history, resume)
    return container.packed_writer(net.param_names, net.scratch_params(), meta, optimizer_state)


def save_checkpoint(path, net, vocab, hparams=None, history=None):
    """Save ``net``'s parameters, ``vocab``, ``hparams`` and ``history`` to the ``.npz`` file ``path``.

    ``hparams`` and ``history`` are dicts of JSON-friendly values (other values are stored as
    their ``str``). The file is replaced atomically; returns its path.
    """
    path = container.as_path(path)
    return container.write_checkpoint(path, checkpoint_writer(net, vocab, hparams, history))


#: What each metadata field must be: (types, what to call it in an error).
_META_TYPES = {
    "kind": (str, "a model name"), "cell": (str, "a cell name"), "vocab_size": container.WHOLE,
    "num_hiddens": container.WHOLE, "num_layers": container.WHOLE, "bidirectional": container.FLAG,
    "dropout": container.NUMBER, "reset_after": container.FLAG, "input_dropout": container.NUMBER,
    "output_dropout": container.NUMBER, "locked_dropout": container.FLAG, "weight_drop": container.NUMBER,
    "vocab": (dict, "a mapping"), **container.RUN_FIELDS,
}


def _check_kind(path, meta):
    if meta.get("kind") == container.SEQ2SEQ_KIND:
        raise CheckpointError(f"checkpoint {path} holds a translation model (seq2seq), not a language model: "
                              f"translate with `d2lrnn translate SENTENCE --checkpoint {path}`")
    if meta.get("format_version") == 1:  # before cells and layers: a one-layer RNN
        meta.update({k: v for k, v in MODEL_DEFAULTS.items() if k not in meta})
    meta.update({k: v for k, v in ADDED_MODEL_SETTINGS.items() if k not in meta})


def _expected_shapes(path, meta):
    """``{name: shape}`` of the model the metadata describes, without building it."""
    kind = {"rnn_scratch": "scratch", "rnn_concise": "concise"}.get(meta["kind"], meta["kind"])
    if kind not in ("scratch", "concise"):
        raise CheckpointError(f"checkpoint {path} holds a {meta['kind']!r} model, which this d2lrnn cannot "
                              "build (it knows 'scratch' and 'concise'): upgrade d2lrnn")
    layer = RecurrentStack(meta["cell"], meta["vocab_size"], meta["num_hiddens"], meta["num_layers"],
                           meta["bidirectional"], meta["dropout"], meta["reset_after"])
    names = layer.names + ("W_hq", "b_q")
    shapes = layer.shapes() + [(layer.num_outputs, meta["vocab_size"]), (meta["vocab_size"],)]
    return dict(zip(names, shapes))


#: What a language model's checkpoint holds.
CONTENTS = container.Contents(
    made_by="d2lrnn train", check_kind=_check_kind, field_types=_META_TYPES,
    sizes={"vocab_size": checks.MAX_VOCAB, "num_hiddens": checks.MAX_HIDDEN, "num_layers": checks.MAX_LAYERS},
    shapes=_expected_shapes,
    describe=lambda meta: (f"a {meta['num_layers']}-layer {meta['cell']} model",
                           f"vocab {meta['vocab_size']} and {meta['num_hiddens']} hidden units"),
    info_keys=INFO_KEYS)


def _validated(path, follow_symlinks):
    """The metadata, arrays and vocabulary of a checkpoint, every field checked."""
    path, meta, arrays = container.read_validated(path, CONTENTS, follow_symlinks)
    return path, meta, arrays, container.read_vocab(path, meta["vocab"], meta["vocab_size"])


def checkpoint_info(path, follow_symlinks=True):
    """The ``info`` dict of a checkpoint (see :func:`load_checkpoint`), checked, without building a model."""
    return container.info_of(_validated(path, follow_symlinks)[1], CONTENTS)


def load_checkpoint(path, device=None, follow_symlinks=True):
    """Load a checkpoint on the active backend; return ``(net, vocab, info)``.

    ``net`` is a new model of the saved kind holding the saved parameters, ``vocab`` the
    saved vocabulary, and ``info`` a dict with ``kind``, ``backend`` (where it was saved),
    ``format_version``, ``d2lrnn_version``, ``hparams``, ``history`` and ``resume`` (the state
    a run folder's ``last.npz`` keeps for ``d2lrnn train --resume``, else None). Every array
    must be float32, finite and of the shape the metadata gives; anything else is a
    :class:`CheckpointError`. A translation model's checkpoint is refused: load it with
    :func:`d2lrnn.seq2seq.checkpoint.load_seq2seq_checkpoint`. ``follow_symlinks=False`` refuses a
    symbolic link (what the command line reads in a run folder).
    """
    path, meta, arrays, vocab = _validated(path, follow_symlinks)
    net = container.build_model(path, lambda: make_model(
        meta["kind"], meta["vocab_size"], meta["num_hiddens"], device, meta["cell"], meta["num_layers"],
        meta["bidirectional"], meta["dropout"], meta["reset_after"], meta["input_dropout"],
        meta["output_dropout"], locked_dropout=meta["locked_dropout"], weight_drop=meta["weight_drop"]))
    net.load_scratch_params([ops.from_numpy(a, device=device) for a in arrays.values()])
    return net, vocab, container.info_of(meta, CONTENTS)


def corpus_digest(train_iter, val_iter, chunk=1 << 20):
    """A fingerprint of the token stream: a resumed run must read the same text.

    The SHA-1 of the indices as stored (one byte per character), after their type's name, hashed a
    chunk at a time. (Runs saved before the stream was stored compactly hold the SHA-1 of the indices
    as int64; they are also from before the validation cut of ``load_data_lm``, and are not resumed.)
    """
    digest = hashlib.sha1()
    digest.update(f"{train_iter.corpus.dtype.str}:".encode())
    for tokens in (train_iter.corpus, val_iter.corpus):
        for start in range(0, len(tokens), chunk):
            digest.update(tokens[start:start + chunk].tobytes())
    return digest.hexdigest()
