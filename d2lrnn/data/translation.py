"""The translation data pipeline: English-French sentence pairs as padded index arrays and minibatches.

The pairs (``fra-eng/fra.txt``, named as in the book's archive: one ``English<TAB>French`` pair a line,
provenance in ``README.md``) ship with the package. The steps are the book's:

1. :func:`preprocess_nmt`: lower case, non-breaking spaces as spaces, a space before ``, . ! ?``
   so that punctuation becomes a word of its own;
2. :func:`tokenize_nmt`: word tokens, split at spaces, a source list and a target list;
3. a :class:`~d2lrnn.data.vocab.Vocab` per language, words seen fewer than ``min_freq`` times read
   as ``<unk>``, with the reserved tokens ``<pad>``, ``<bos>`` and ``<eos>``;
4. :func:`build_array_nmt`: every sentence as indices plus ``<eos>``, cut or padded with ``<pad>``
   to ``num_steps`` (:func:`truncate_pad`), and its valid length (the tokens before the padding).

Index work is NumPy; the minibatches ``(X, X_valid_len, Y, Y_valid_len)`` are shuffled by a NumPy
generator and only then become tensors of the active backend (int64, int32 on TensorFlow as in the
book), so every backend sees the same batches for a seed.
"""

import os
import pathlib

import numpy as np

from .. import checks, ops
from ..backends import generator
from ..errors import DataError
from .corpus import read_utf8
from .iterators import token_tensor
from .vocab import Vocab

#: The bundled pairs file.
PAIRS_FILE = pathlib.Path(__file__).with_name("fra-eng") / "fra.txt"
#: Names a pairs file to read instead of the bundled one (the full ``fra.txt`` of the book's archive).
PAIRS_ENV = "D2LRNN_FRA_TXT"
#: Reserved tokens of both vocabularies, after ``<unk>`` (index 0): ``<pad>`` is 1, ``<bos>`` 2, ``<eos>`` 3.
RESERVED = ("<pad>", "<bos>", "<eos>")
PUNCTUATION = set(",.!?")


def pairs_path(path=None):
    """The pairs file to read: ``path``, else the file ``$D2LRNN_FRA_TXT`` names, else the bundled one."""
    return pathlib.Path(path or os.environ.get(PAIRS_ENV) or PAIRS_FILE)


def read_data_nmt(path=None):
    """The text of the pairs file (see :func:`pairs_path`: the bundled English-French pairs unless
    ``path`` or ``$D2LRNN_FRA_TXT`` names another, such as the full ``fra.txt`` of the book's archive),
    its lines ended by LF, whether the file ends them with LF, CRLF or CR."""
    return read_utf8(pairs_path(path), "pairs file").replace("\r\n", "\n").replace("\r", "\n")


def preprocess_nmt(text):
    """Lower case, U+202F and U+00A0 (non-breaking spaces) as spaces, a space before , . ! ? where none is."""
    text = text.replace("\u202f", " ").replace("\xa0", " ").lower()
    # The book's loop over characters (" " + c where i > 0, c is punctuation and text[i - 1] is not a
    # space), as string replacements, about four times faster: a space before every mark, then none added
    # where one was already there. A mark never follows the space added before another mark.
    first = text[:1]
    for mark in PUNCTUATION:
        text = text.replace(mark, " " + mark).replace("  " + mark, " " + mark)
    return text[1:] if first in PUNCTUATION else text


def tokenize_nmt(text, num_examples=None):
    """``(source, target)``: the word tokens of the first ``num_examples`` pairs (all if None).

    Blank lines are skipped; a line that is not two tab-separated sentences is a one-line
    :class:`DataError` naming it.
    """
    if num_examples is not None:
        num_examples = checks.positive_int("num_examples", num_examples, " (sentence pairs, e.g. 600)")
    source, target = [], []
    for number, line in enumerate(text.split("\n"), 1):
        if num_examples is not None and len(source) >= num_examples:
            break
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) != 2 or not parts[0].strip() or not parts[1].strip():
            raise DataError(f"line {number} of the pairs is not 'source<TAB>target': {line[:60]!r}: give one "
                            "pair a line, the two sentences separated by one tab")
        source.append(parts[0].split())
        target.append(parts[1].split())
    if not source:
        raise DataError("the pairs file holds no sentence pairs: give lines of 'source<TAB>target'")
    return source, target


def truncate_pad(line, num_steps, padding_token):
    """``line`` cut to ``num_steps`` tokens, or padded to them with ``padding_token``."""
    if len(line) > num_steps:
        return line[:num_steps]
    return line + [padding_token] * (num_steps - len(line))


def build_array_nmt_numpy(lines, vocab, num_steps):
    """NumPy ``(array, valid_len)``: each line's indices and ``<eos>``, cut or padded to ``num_steps``."""
    num_steps = checks.positive_int("num_steps", num_steps, " (time steps per sentence, e.g. 10)")
    pad, eos = vocab["<pad>"], vocab["<eos>"]
    rows = [truncate_pad(vocab[list(line)] + [eos], num_steps, pad) for line in lines]
    array = np.array(rows, dtype=np.int64).reshape(len(rows), num_steps)
    valid_len = np.minimum(np.array([len(line) + 1 for line in lines], dtype=np.int64), num_steps)
    return array, valid_len


def build_array_nmt(lines, vocab, num_steps):
    """The book's ``build_array_nmt``: ``(array, valid_len)`` as tensors of the active backend.

    The valid length counts the sentence's tokens and its ``<eos>`` (at most ``num_steps``); it is
    computed from the lengths, not by counting non-``<pad>`` indices, so it is right even for a
    vocabulary where a word reads as index 1.
    """
    array, valid_len = build_array_nmt_numpy(lines, vocab, num_steps)
    return ops.from_numpy(array), ops.from_numpy(valid_len)


class PairBatches:
    """Minibatches ``(X, X_valid_len, Y, Y_valid_len)`` of padded index arrays.

    Each epoch (each ``iter()``) draws a new order of the pairs from NumPy's generator (the
    shared one, or its own when ``seed`` is given) unless ``shuffle`` is False; the last
    minibatch may be smaller. ``len()`` is the number of minibatches.
    """

    def __init__(self, arrays, batch_size, shuffle=True, seed=None):
        self.arrays = tuple(np.asarray(a) for a in arrays)
        self.batch_size = checks.positive_int("batch_size", batch_size, " (sentence pairs per minibatch)")
        self.shuffle = shuffle
        self._rng = None if seed is None else np.random.default_rng(checks.seed(seed))
        self.num_pairs = len(self.arrays[0])

    def __len__(self):
        return -(-self.num_pairs // self.batch_size)

    def __call__(self):
        """An epoch's minibatches, as ``iter()`` gives them: Paddle's ``DataLoader`` is called for them, and
        the book's Paddle cells write ``for X, y in train_iter()``."""
        return iter(self)

    def rng_state(self):
        """The state of the iterator's own generator (None if it uses the shared one), as plain data."""
        return None if self._rng is None else self._rng.bit_generator.state

    def set_rng_state(self, state):
        """Restore a state from :meth:`rng_state`, so the next epochs are served as they would have been."""
        if self._rng is not None and state is not None:
            self._rng.bit_generator.state = state

    @property
    def num_tokens(self):
        """Target tokens the pairs hold (each sentence's valid length: its words and ``<eos>``)."""
        return int(self.arrays[3].sum()) if len(self.arrays) == 4 else None

    def __iter__(self):
        rng = self._rng if self._rng is not None else generator()
        order = rng.permutation(self.num_pairs) if self.shuffle else np.arange(self.num_pairs)
        for start in range(0, self.num_pairs, self.batch_size):
            rows = order[start:start + self.batch_size]
            yield tuple(token_tensor(a[rows]) if a.dtype.kind in "iu" else ops.from_numpy(a[rows])
                        for a in self.arrays)


def load_array(data_arrays, batch_size, is_train=True):
    """The book's ``load_array``: minibatches of NumPy arrays (or tensors), shuffled when ``is_train``."""
    arrays = [a if isinstance(a, np.ndarray) else ops.to_numpy(a) for a in data_arrays]
    return PairBatches(arrays, batch_size, shuffle=is_train)


def _vocabs(source, target, min_freq):
    return (Vocab(source, min_freq=min_freq, reserved_tokens=list(RESERVED)),
            Vocab(target, min_freq=min_freq, reserved_tokens=list(RESERVED)))


def _pair_arrays(source, target, src_vocab, tgt_vocab, num_steps):
    """``(X, X_valid_len, Y, Y_valid_len)`` NumPy arrays of the pairs."""
    return (*build_array_nmt_numpy(source, src_vocab, num_steps),
            *build_array_nmt_numpy(target, tgt_vocab, num_steps))


def load_data_nmt(batch_size, num_steps, num_examples=600, min_freq=2, path=None):
    """The book's ``load_data_nmt``: ``(data_iter, src_vocab, tgt_vocab)`` for the first
    ``num_examples`` pairs (words seen fewer than ``min_freq`` times read as ``<unk>``).

    The bundled file holds 18,066 pairs, far fewer than the book's ``fra.txt``, so the book's numbers
    differ: over all pairs the source vocabulary has 2,307 words here and 10,012 in the book, and the
    first 600 pairs are not quite the book's. Who has the full file reads it with ``path=`` or by naming it
    in ``$D2LRNN_FRA_TXT`` (nothing is downloaded).
    """
    source, target = tokenize_nmt(preprocess_nmt(read_data_nmt(path)), num_examples)
    src_vocab, tgt_vocab = _vocabs(source, target, min_freq)
    arrays = _pair_arrays(source, target, src_vocab, tgt_vocab, num_steps)
    return PairBatches(arrays, batch_size), src_vocab, tgt_vocab


def load_data_nmt_split(batch_size, num_steps, num_examples=None, val_fraction=0.1, min_freq=2, seed=0,
                        path=None):
    """``(train_iter, val_iter, src_vocab, tgt_vocab)``: the pairs (all of them by default) split at
    random, ``val_fraction`` held out, the split drawn from ``np.random.default_rng(seed)``.

    The vocabularies are built from the training pairs only (a held-out word the training text
    lacks reads as ``<unk>``). ``val_iter`` keeps the file's order; it also holds the token
    lists, as ``val_iter.source`` and ``val_iter.target``, for BLEU against the untruncated
    sentences.
    """
    fraction = checks.number("val_fraction", val_fraction, hint=" (the held-out share, e.g. 0.1)")
    if not 0 < fraction < 1:
        raise DataError(f"val_fraction is {val_fraction!r}: use a fraction in (0, 1), e.g. 0.1")
    source, target = tokenize_nmt(preprocess_nmt(read_data_nmt(path)), num_examples)
    num_val = int(round(len(source) * fraction))
    if num_val < 1 or num_val >= len(source):
        raise DataError(f"{len(source)} pairs cannot be split with val_fraction {fraction:g}: use more pairs "
                        "or another fraction")
    held = set(np.random.default_rng(checks.seed(seed)).permutation(len(source))[:num_val].tolist())
    train = [i for i in range(len(source)) if i not in held]
    val = sorted(held)
    train_src, train_tgt = [source[i] for i in train], [target[i] for i in train]
    val_src, val_tgt = [source[i] for i in val], [target[i] for i in val]
    src_vocab, tgt_vocab = _vocabs(train_src, train_tgt, min_freq)
    train_iter = PairBatches(_pair_arrays(train_src, train_tgt, src_vocab, tgt_vocab, num_steps), batch_size,
                             seed=seed)
    val_iter = PairBatches(_pair_arrays(val_src, val_tgt, src_vocab, tgt_vocab, num_steps), batch_size,
                           shuffle=False)
    val_iter.source, val_iter.target = val_src, val_tgt
    return train_iter, val_iter, src_vocab, tgt_vocab
