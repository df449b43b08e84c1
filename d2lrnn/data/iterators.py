"""Minibatches of token subsequences for training a language model.

Each epoch is planned in NumPy: one random offset, then a ``(num_batches, batch_size)``
array of start positions; the batches are gathered from it and converted to int64
tensors of the active backend (int32 on TensorFlow: :func:`token_tensor`). Every backend
therefore sees the same batches for the same seed.

Two differences from the book, both so that an epoch always has the same length:

* the offset is drawn from ``[0, min(num_steps - 1, slack)]`` for both iterators, where
  ``slack = len(corpus) - 1 - batch_size * num_steps`` (the book's sequential iterator
  draws from ``[0, num_steps]``; an offset of ``num_steps`` only drops one whole step);
* an epoch has the number of minibatches of the largest possible offset, so a small
  offset may leave a few more tokens unread than in the book.
"""

import numpy as np

from .. import checks, ops
from ..backends import backend_name, generator
from ..errors import DataError
from .corpus import compact, load_corpus, train_val_split


def token_tensor(indices):
    """An integer NumPy array of token indices as a tensor of the active backend: int64, and int32 on
    TensorFlow, whose book cells make their batches with ``tf.constant`` (int32) and join them to other
    int32 tensors (the seq2seq decoder's ``<bos>`` column)."""
    if backend_name() == "tensorflow":
        return ops.tensor(indices, dtype=np.int32)
    return ops.from_numpy(indices)


def _check_positive(label, value, hint=""):
    """A count given by the user: a positive integer, else a one-line error (``hint``: where to set it)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise DataError(f"{label} is {value!r}: use a positive integer{hint}")


def _check_batching(num_tokens, batch_size, num_steps, name="corpus"):
    for label, value in (("batch_size", batch_size), ("num_steps", num_steps)):
        _check_positive(label, value, f" (--{label.replace('_', '-')})")
    need = batch_size * num_steps + 1
    if num_tokens < need:
        raise DataError(f"{name} has {num_tokens} tokens, fewer than batch_size * num_steps + 1 = {need}: "
                        "use a smaller --batch-size or --num-steps, or a longer text")


def _max_offset(num_tokens, batch_size, num_steps):
    return min(num_steps - 1, num_tokens - 1 - batch_size * num_steps)


def num_batches(num_tokens, batch_size, num_steps, use_random_iter, random_offset=True):
    """Minibatches in one epoch over ``num_tokens`` tokens (the count at the largest offset)."""
    usable = num_tokens - 1 - (_max_offset(num_tokens, batch_size, num_steps) if random_offset else 0)
    if use_random_iter:
        return (usable // num_steps) // batch_size
    return (usable // batch_size) // num_steps


def _random_starts(num_tokens, batch_size, num_steps, offset, nb, rng):
    """Start positions of the random iterator: shuffled subsequences cut every ``num_steps``."""
    num_subseqs = (num_tokens - 1 - offset) // num_steps
    order = rng.permutation(num_subseqs)[:nb * batch_size]
    return (offset + num_steps * order).reshape(nb, batch_size)


def _sequential_starts(num_tokens, batch_size, num_steps, offset, nb):
    """Start positions of the sequential iterator: row ``r`` of batch ``i`` starts at
    ``offset + r * row_len + i * num_steps``, so each row continues where it stopped."""
    row_len = (num_tokens - 1 - offset) // batch_size
    return offset + row_len * np.arange(batch_size) + num_steps * np.arange(nb)[:, None]


def _epoch(corpus, starts, num_steps, rest=0):
    """Yield the epoch's minibatches as backend tensors, each gathered from the corpus when its turn
    comes (an epoch's positions at once would take 8 bytes per corpus token); then, if ``rest``, one
    shorter minibatch of the ``rest`` tokens that follow the last one in each row."""
    steps = np.arange(num_steps)
    for row_starts in starts:
        index = row_starts[:, None] + steps
        yield _pair(corpus, index)
    if rest:
        yield _pair(corpus, (starts[-1] + num_steps)[:, None] + np.arange(rest))


def _pair(corpus, index):
    """The inputs at ``index`` and their targets, one token ahead, as backend tensors."""
    return token_tensor(corpus[index].astype(np.int64)), token_tensor(corpus[index + 1].astype(np.int64))


def _rest(num_tokens, batch_size, num_steps):
    """Tokens left in each row after the whole minibatches of a sequential epoch from token 0."""
    return (num_tokens - 1) // batch_size % num_steps


def _plan(corpus, batch_size, num_steps, use_random_iter, rng, random_offset=True, name="corpus",
          whole=False):
    corpus = compact(corpus)
    _check_batching(len(corpus), batch_size, num_steps, name)
    rng = generator() if rng is None else rng
    n = len(corpus)
    offset = int(rng.integers(0, _max_offset(n, batch_size, num_steps) + 1)) if random_offset else 0
    nb = num_batches(n, batch_size, num_steps, use_random_iter, random_offset)
    if use_random_iter:
        starts = _random_starts(n, batch_size, num_steps, offset, nb, rng)
    else:
        starts = _sequential_starts(n, batch_size, num_steps, offset, nb)
    return _epoch(corpus, starts, num_steps, _rest(n, batch_size, num_steps) if whole else 0)


def seq_data_iter_random(corpus, batch_size, num_steps, rng=None):
    """Minibatches of random subsequences: ``X`` is ``(batch_size, num_steps)`` and ``Y`` is ``X``
    shifted one token ahead.

    After a random offset the corpus is cut into subsequences of ``num_steps`` tokens, which
    are served in random order; neighbouring minibatches are not adjacent in the text.
    """
    return _plan(corpus, batch_size, num_steps, True, rng)


def seq_data_iter_sequential(corpus, batch_size, num_steps, rng=None):
    """Minibatches in reading order: after a random offset the corpus is reshaped into
    ``batch_size`` rows, and minibatch ``i + 1`` continues each row where minibatch ``i`` ended."""
    return _plan(corpus, batch_size, num_steps, False, rng)


class SeqDataLoader:
    """An iterable over minibatches of a corpus; each epoch draws a new random offset.

    ``seed`` gives the loader its own generator (reproducible epochs); without it the shared
    generator is used, which ``d2l.manual_seed`` resets.
    """

    def __init__(self, batch_size, num_steps, use_random_iter, max_tokens, corpus="timemachine",
                 token="char", seed=None, raw=False):
        indices, vocab = load_corpus(corpus, token, max_tokens, raw)
        self._setup(indices, vocab, batch_size, num_steps, use_random_iter, seed, True,
                    f"corpus {str(corpus)!r}")

    @classmethod
    def from_tokens(cls, tokens, vocab, batch_size, num_steps, use_random_iter, seed=None,
                    random_offset=True, name="token list", whole=False):
        """A loader over a given list (or array) of token indices, e.g. one split of a corpus.

        ``random_offset=False`` starts every epoch at token 0 (with the sequential iterator the
        batches are then the same every epoch, as evaluation wants). ``whole=True`` (with both of
        those) reads every row to its end: a last, shorter minibatch holds what is left of each
        row, so an evaluation scores the same tokens whatever ``num_steps`` is.
        """
        if whole and (use_random_iter or random_offset):
            raise DataError("whole=True reads the rows in order from token 0: pass use_random_iter=False and "
                            "random_offset=False")
        loader = cls.__new__(cls)
        loader._setup(tokens, vocab, batch_size, num_steps, use_random_iter, seed, random_offset, name, whole)
        return loader

    def _setup(self, tokens, vocab, batch_size, num_steps, use_random_iter, seed, random_offset, name,
               whole=False):
        self.corpus = compact(tokens)  # one byte per character: the epoch's batches are gathered from it
        _check_batching(len(self.corpus), batch_size, num_steps, name)
        self.vocab, self.batch_size, self.num_steps = vocab, int(batch_size), int(num_steps)
        self.use_random_iter, self.random_offset, self.name = bool(use_random_iter), random_offset, name
        self.whole = bool(whole)
        self._rng = None if seed is None else np.random.default_rng(checks.seed(seed))

    def rng_state(self):
        """The state of the loader's own generator (None if it uses the shared one), as plain data."""
        return None if self._rng is None else self._rng.bit_generator.state

    def set_rng_state(self, state):
        """Restore a state from :meth:`rng_state`, so the next epochs are served as they would have been."""
        if self._rng is not None and state is not None:
            self._rng.bit_generator.state = state

    @property
    def num_tokens(self):
        """How many tokens the loader reads from (not all are served in every epoch)."""
        return len(self.corpus)

    def __len__(self):
        whole = num_batches(self.num_tokens, self.batch_size, self.num_steps, self.use_random_iter,
                            self.random_offset)
        return whole + bool(self.whole and _rest(self.num_tokens, self.batch_size, self.num_steps))

    def __iter__(self):
        return _plan(self.corpus, self.batch_size, self.num_steps, self.use_random_iter, self._rng,
                     self.random_offset, self.name, self.whole)

    def __repr__(self):
        kind = "random" if self.use_random_iter else "sequential"
        return (f"SeqDataLoader({self.num_tokens} tokens, batch_size={self.batch_size}, "
                f"num_steps={self.num_steps}, {kind}, {len(self)} batches per epoch)")


def load_data_time_machine(batch_size, num_steps, use_random_iter=False, max_tokens=10000):
    """The book's loader: minibatches of the first ``max_tokens`` characters of *The Time Machine*."""
    data_iter = SeqDataLoader(batch_size, num_steps, use_random_iter, max_tokens)
    return data_iter, data_iter.vocab


#: Rows (parallel streams) the validation text is cut into. Each row is read from a fresh state, so the
#: first tokens of a row are predicted with less context than the rest: a count of its own, not the
#: training batch size, keeps a model's validation perplexity the same whatever batch size it trained
#: with. 16 is the cut bench/lm_eval.py scores every benchmarked model with.
VAL_STREAMS = 16


def load_data_lm(corpus="timemachine", batch_size=32, num_steps=35, use_random_iter=False, max_tokens=-1,
                 val_fraction=0.1, token="char", seed=None, raw=False, val_streams=VAL_STREAMS):
    """Training and validation minibatches of a corpus, and its vocabulary.

    The vocabulary covers the whole corpus; the last ``val_fraction`` of the tokens is held
    out. ``val_iter`` reads them in order from token 0, every epoch the same, in
    ``min(val_streams, (len(val) - 1) // num_steps)`` rows (fewer for a short split, so it
    still gives one batch) and to the end of each row, the last minibatch shorter than
    ``num_steps``: neither the training batch size nor ``num_steps`` changes which tokens it
    scores. It is None when ``val_fraction`` is 0. ``raw=True`` makes every character of the
    file a token, uncleaned (see :func:`d2lrnn.data.corpus.load_corpus`).
    """
    _check_positive("val_streams", val_streams)
    indices, vocab = load_corpus(corpus, token, max_tokens, raw)
    train, val = train_val_split(indices, val_fraction)
    name = f"corpus {str(corpus)!r}"
    train_iter = SeqDataLoader.from_tokens(train, vocab, batch_size, num_steps, use_random_iter, seed=seed,
                                           name=f"the training split of {name}")
    if val_fraction == 0:
        return train_iter, None, vocab
    need = num_steps + 1
    if len(val) < need:
        raise DataError(f"the validation split of {name} has {len(val)} tokens, fewer than num_steps + 1 = "
                        f"{need}: use a smaller --num-steps or a larger --val-fraction")
    val_iter = SeqDataLoader.from_tokens(val, vocab, min(val_streams, (len(val) - 1) // num_steps), num_steps,
                                         False, random_offset=False, name=f"the validation split of {name}",
                                         whole=True)
    return train_iter, val_iter, vocab
