"""Checks of a checkpoint's metadata that do not depend on its kind: texts, nesting and keys
(:func:`check_plain`, on every checkpoint's metadata as soon as it is parsed) and vocabularies
(:func:`read_vocab`). Each failure is one :class:`~d2lrnn.errors.CheckpointError` line."""

from ..data import Vocab
from ..errors import CheckpointError, D2LRNNError

#: The longest text in the metadata (a token, a setting, a path).
MAX_TEXT = 4096
#: How deep the metadata may nest (a vocabulary's counts and a generator's state are 4 levels).
MAX_DEPTH = 8


def check_plain(path, value, where="metadata", depth=0):
    """Every string in ``value`` (the metadata) at most :data:`MAX_TEXT` characters, every key a string,
    nested at most :data:`MAX_DEPTH` levels: what any checkpoint's metadata is, whoever wrote it."""
    corrupt = f"checkpoint {path} is corrupt: {{}}: save it again"
    if depth > MAX_DEPTH:
        raise CheckpointError(corrupt.format(f"its {where} is nested more than {MAX_DEPTH} levels deep"))
    if isinstance(value, str):
        if len(value) > MAX_TEXT:
            raise CheckpointError(corrupt.format(f"a text in its {where} has {len(value):,} characters, more "
                                                 f"than {MAX_TEXT:,}"))
    elif isinstance(value, dict):
        for key, item in value.items():
            check_plain(path, key, where, depth + 1)
            check_plain(path, item, f"{key!r}" if depth == 0 else where, depth + 1)
    elif isinstance(value, list):
        for item in value:
            check_plain(path, item, where, depth + 1)


def _is_count(pair):
    """Whether ``pair`` is a vocabulary's ``[token, count]``."""
    return isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str) and \
        isinstance(pair[1], int) and not isinstance(pair[1], bool) and pair[1] >= 0


def read_vocab(path, saved, size, name="vocabulary"):
    """The :class:`Vocab` stored as ``saved`` (its ``to_dict()``), which must hold ``size`` tokens, each a
    string, with counts that are whole numbers."""
    bad = f"checkpoint {path} is corrupt (bad {name}: {{}}): save it again"
    tokens, freqs = saved.get("idx_to_token"), saved.get("token_freqs", [])
    if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
        raise CheckpointError(bad.format("its tokens are not a list of strings"))
    if not isinstance(freqs, list) or not all(_is_count(pair) for pair in freqs):
        raise CheckpointError(bad.format("its counts are not a list of [token, count] pairs"))
    try:
        vocab = Vocab.from_dict(saved)
    except D2LRNNError as err:
        raise CheckpointError(bad.format(err)) from None
    if len(vocab) != size:
        raise CheckpointError(f"checkpoint {path} is corrupt: its {name} has {len(vocab)} tokens but "
                              f"the model {size}: save it again")
    return vocab
