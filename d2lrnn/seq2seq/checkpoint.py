"""Checkpoints of translation models: an encoder-decoder with both vocabularies, in d2lrnn's ``.npz`` file.

The container is d2lrnn's (:mod:`d2lrnn.training.checkpoint`): the parameters as float32 arrays
under their names (``encoder.embedding``, ``encoder.W_xz``, ..., ``decoder.W_hq``, ``decoder.b_q``),
the optimizer's running averages as ``optimizer.0``, ``optimizer.1``, ... (a run's ``last.npz``),
and one JSON string of metadata with kind ``seq2seq``: the model's settings
(:meth:`~d2lrnn.seq2seq.model.EncoderDecoder.config`), ``num_steps`` (the sentence length the model
was trained on, which translation pads and cuts to), the source and target vocabularies,
hyperparameters, training history and the state to resume a run from. No framework objects and
no pickles: a model trained on one backend loads on any other.

Loading checks every field (types and sizes of the settings, parameters of the shapes the settings
give, float32, all finite, vocabularies of the model's sizes holding ``<pad>``, ``<bos>`` and
``<eos>``) and says in one line what is wrong; a language model's checkpoint is refused with the
command that reads it (``d2lrnn generate``).
"""

from .. import checks, ops
from ..data.translation import RESERVED
from ..errors import ArgumentError, CheckpointError
from ..models.stack import RecurrentStack, check_dropout
from ..training import checkpoint as container
from .model import RNN_KINDS, EncoderDecoder, attention_shapes, make_seq2seq

__all__ = ["seq2seq_checkpoint_writer", "save_seq2seq_checkpoint", "load_seq2seq_checkpoint",
           "seq2seq_checkpoint_info", "parameter_shapes"]

#: The command that writes translation checkpoints (for the messages).
MADE_BY = "d2lrnn translate-train"
#: What ``info`` holds (see :func:`load_seq2seq_checkpoint`).
INFO_KEYS = ("kind", "rnn", "cell", "embed_size", "num_hiddens", "num_layers", "dropout", "reset_after",
             "embed_dropout", "output_dropout", "attention", "tie_embeddings", "bidirectional", "num_steps",
             "backend", "format_version", "d2lrnn_version", "hparams", "history", "resume")

#: Model settings added within format 2: a checkpoint saved before them used these.
ADDED_MODEL_SETTINGS = {"embed_dropout": 0.0, "output_dropout": 0.0, "attention": False,
                        "tie_embeddings": False, "bidirectional": False}

#: What each metadata field must be: (types, what to call it in an error).
_META_TYPES = {
    "rnn": (str, "a model name"), "cell": (str, "a cell name"), "src_vocab_size": container.WHOLE,
    "tgt_vocab_size": container.WHOLE, "embed_size": container.WHOLE, "num_hiddens": container.WHOLE,
    "num_layers": container.WHOLE, "dropout": container.NUMBER, "reset_after": container.FLAG,
    "embed_dropout": container.NUMBER, "output_dropout": container.NUMBER, "attention": container.FLAG,
    "tie_embeddings": container.FLAG, "bidirectional": container.FLAG, "num_steps": container.WHOLE,
    "src_vocab": (dict, "a mapping"), "tgt_vocab": (dict, "a mapping"),
    **container.RUN_FIELDS,
}
_SIZES = {"src_vocab_size": checks.MAX_VOCAB, "tgt_vocab_size": checks.MAX_VOCAB,
          "embed_size": checks.MAX_HIDDEN, "num_hiddens": checks.MAX_HIDDEN, "num_layers": checks.MAX_LAYERS,
          "num_steps": checks.MAX_NUM_STEPS}


def _missing_reserved(vocab):
    """The reserved tokens (``<pad>``, ``<bos>``, ``<eos>``) that ``vocab`` lacks: translation needs them."""
    return [token for token in RESERVED if token not in vocab]


def seq2seq_checkpoint_writer(net, src_vocab, tgt_vocab, num_steps, hparams=None, history=None, resume=None,
                              optimizer_state=None):
    """A function ``write(file)`` that writes the checkpoint of the encoder-decoder ``net`` as it is now.

    ``net`` must be built by :func:`~d2lrnn.seq2seq.model.make_seq2seq` (or its two parts); the
    vocabularies are the ones it was trained with and ``num_steps`` the sentence length. The
    parameters are copied at once, so training may go on before the file is written. ``resume``
    (plain data) and ``optimizer_state`` (:meth:`d2lrnn.training.step.Updater.state_dict`) are what a run's
    ``last.npz`` keeps to continue; read them back with ``info["resume"]`` and
    :func:`d2lrnn.training.checkpoint.load_optimizer_state`.
    """
    config = net.config() if isinstance(net, EncoderDecoder) else None
    if config is None:
        raise CheckpointError(f"{type(net).__name__} cannot be saved as a translation model: build it with "
                              "d2l.make_seq2seq (Seq2SeqEncoder and Seq2SeqDecoder) to save it")

    for name, vocab, size in (("source", src_vocab, config["src_vocab_size"]),
                              ("target", tgt_vocab, config["tgt_vocab_size"])):
        problem = f"has {len(vocab)} tokens but the model {size}" if len(vocab) != size else \
            f"lacks {', '.join(missing)}" if (missing := _missing_reserved(vocab)) else None
        if problem:
            raise CheckpointError(f"the {name} vocabulary {problem}: save the vocabularies the model was "
                                  "trained with")
    num_steps = checks.positive_int("num_steps", num_steps, " (the sentence length the model was trained on)")
    meta = {**container.base_metadata(), **config, "num_steps": num_steps,
            "param_names": list(net.param_names),
            "src_vocab": src_vocab.to_dict(), "tgt_vocab": tgt_vocab.to_dict(),
            "hparams": dict(hparams or {}), "history": dict(history or {})}
    if resume is not None:
        meta["resume"] = dict(resume)
    return container.packed_writer(net.param_names, net.params, meta, optimizer_state)


def save_seq2seq_checkpoint(path, net, src_vocab, tgt_vocab, num_steps, hparams=None, history=None):
    """Save the encoder-decoder ``net``, its vocabularies, ``num_steps``, ``hparams`` and ``history`` to the
    ``.npz`` file ``path``, replaced atomically; returns its path."""
    path = container.as_path(path)
    write = seq2seq_checkpoint_writer(net, src_vocab, tgt_vocab, num_steps, hparams, history)
    return container.write_checkpoint(path, write)


def _check_kind(path, meta):
    kind = meta.get("kind")
    if kind == container.SEQ2SEQ_KIND:
        meta.update({k: v for k, v in ADDED_MODEL_SETTINGS.items() if k not in meta})
        return
    if kind in ("scratch", "concise", "rnn_scratch", "rnn_concise"):
        raise CheckpointError(f"checkpoint {path} holds a language model, not a translation model: "
                              f"continue text with `d2lrnn generate --checkpoint {path}`, or train a "
                              f"translation model with `{MADE_BY}`")
    raise CheckpointError(f"checkpoint {path} holds a {kind!r} model, not a translation model: pass a "
                          f"model.npz written by `{MADE_BY}`")


def parameter_shapes(config):
    """``{name: shape}`` of the parameters of the encoder-decoder that ``config`` describes (the form of
    :meth:`~d2lrnn.seq2seq.model.EncoderDecoder.config`), without building it: the encoder's embedding
    and recurrent layers, then the decoder's (reading the embedding and the context) and its dense
    layer (with ``attention``, the attention's weights before it; with ``tie_embeddings``, no ``W_hq``; with
    ``bidirectional``, the encoder's layers both ways, ``num_hiddens // 2`` each).
    Settings no model has raise :class:`d2lrnn.ArgumentError`."""
    E, h, L = config["embed_size"], config["num_hiddens"], config["num_layers"]
    both_ways = config.get("bidirectional", False)
    if both_ways and h % 2:
        raise ArgumentError(f"a bidirectional encoder splits num_hiddens in two, and {h} is odd")
    enc = RecurrentStack(config["cell"], E, h // 2 if both_ways else h, L, both_ways, config["dropout"],
                         config["reset_after"])
    dec = RecurrentStack(config["cell"], E + h, h, L, False, config["dropout"], config["reset_after"])
    V_src, V_tgt = config["src_vocab_size"], config["tgt_vocab_size"]
    shapes = {"encoder.embedding": (V_src, E)}
    shapes.update({f"encoder.{n}": s for n, s in zip(enc.names, enc.shapes())})
    shapes["decoder.embedding"] = (V_tgt, E)
    shapes.update({f"decoder.{n}": s for n, s in zip(dec.names, dec.shapes())})
    if config.get("attention", False):
        shapes.update({f"decoder.{n}": s for n, s in attention_shapes(h).items()})
    if not config.get("tie_embeddings", False):
        shapes["decoder.W_hq"] = (h, V_tgt)
    shapes["decoder.b_q"] = (V_tgt,)
    return shapes


def _expected_shapes(path, meta):
    """:func:`parameter_shapes` of the model a checkpoint's metadata describes."""
    if meta["rnn"] not in RNN_KINDS:
        raise CheckpointError(f"checkpoint {path} holds a {meta['rnn']!r} translation model, which this "
                              f"d2lrnn cannot build (it knows {' and '.join(map(repr, RNN_KINDS))}): "
                              "upgrade d2lrnn")
    for key in ("embed_dropout", "output_dropout"):  # rates no model has: refused without building one
        check_dropout(meta[key], key)
    return parameter_shapes(meta)


#: What a translation model's checkpoint holds.
CONTENTS = container.Contents(
    made_by=MADE_BY, check_kind=_check_kind, field_types=_META_TYPES, sizes=_SIZES,
    shapes=_expected_shapes,
    describe=lambda meta: (f"a {meta['num_layers']}-layer {meta['cell']} encoder-decoder",
                           f"vocabularies {meta['src_vocab_size']} and {meta['tgt_vocab_size']}, embedding "
                           f"{meta['embed_size']} and {meta['num_hiddens']} hidden units"),
    info_keys=INFO_KEYS)


def _validated(path, follow_symlinks):
    """The metadata, arrays and vocabularies of a translation checkpoint, every field checked."""
    path, meta, arrays = container.read_validated(path, CONTENTS, follow_symlinks)
    vocabs = []
    for name, key in (("source", "src"), ("target", "tgt")):
        vocab = container.read_vocab(path, meta[f"{key}_vocab"], meta[f"{key}_vocab_size"],
                                     f"{name} vocabulary")
        if missing := _missing_reserved(vocab):
            raise CheckpointError(f"checkpoint {path} is corrupt: its {name} vocabulary lacks "
                                  f"{', '.join(missing)}: save it again")
        vocabs.append(vocab)
    return path, meta, arrays, *vocabs


def seq2seq_checkpoint_info(path, follow_symlinks=True):
    """The ``info`` dict of a translation checkpoint (see :func:`load_seq2seq_checkpoint`), checked,
    without building the model."""
    return container.info_of(_validated(path, follow_symlinks)[1], CONTENTS)


def load_seq2seq_checkpoint(path, device=None, follow_symlinks=True):
    """Load a translation checkpoint on the active backend; return ``(net, src_vocab, tgt_vocab, info)``.

    ``net`` is a new encoder-decoder of the saved settings holding the saved parameters; ``info``
    has the model's settings (``rnn``, ``cell``, ``embed_size``, ``num_hiddens``, ``num_layers``,
    ``dropout``, ``reset_after``, ``embed_dropout``, ``output_dropout``, ``attention``, ``tie_embeddings``,
    ``bidirectional``),
    ``num_steps``, ``backend`` (where it was saved), ``format_version``, ``d2lrnn_version``, ``hparams``,
    ``history`` and ``resume`` (None but in a run's ``last.npz``). Anything that is not such a checkpoint is
    one :class:`CheckpointError` line; ``follow_symlinks=False`` refuses a symbolic link (what the command
    line reads in a run folder).
    """
    path, meta, arrays, src_vocab, tgt_vocab = _validated(path, follow_symlinks)
    net = container.build_model(path, lambda: make_seq2seq(
        meta["src_vocab_size"], meta["tgt_vocab_size"], meta["embed_size"], meta["num_hiddens"],
        meta["num_layers"], meta["dropout"], meta["rnn"], meta["cell"], meta["reset_after"], device,
        meta["embed_dropout"], meta["output_dropout"], meta["attention"], meta["tie_embeddings"],
        meta["bidirectional"]))
    if list(net.param_names) != list(arrays):
        raise CheckpointError(f"checkpoint {path} names its parameters differently from this d2lrnn's "
                              "encoder-decoder: save it again with this version")
    net.params = [ops.from_numpy(a, device=device) for a in arrays.values()]
    return net, src_vocab, tgt_vocab, container.info_of(meta, CONTENTS)
