"""N-gram statistics and a count-based n-gram language model with add-k smoothing.

The model is the baseline an RNN has to beat: on held-out text, its perplexity says how
well plain counting of the previous ``n - 1`` tokens predicts the next one.
"""

import collections
import math

import numpy as np

from ..errors import DataError

#: Smoothing constants tried by :func:`select_k`, largest first.
K_GRID = (1.0, 0.5, 0.2, 0.1, 0.05, 0.02, 0.01, 0.005, 0.002, 0.001)


def ngram_counts(tokens, n):
    """A ``Counter`` of the ``n``-tuples of consecutive tokens (``n=1`` gives 1-tuples).

    ``.most_common()`` lists them like the book's ``Vocab(bigram_tokens).token_freqs``.
    """
    _check_n(n)
    tokens = list(tokens)
    return collections.Counter(zip(*(tokens[i:] for i in range(n))))


def _check_n(n):
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise DataError(f"n-gram order n={n!r} is not a positive integer: use n >= 1 (1 = unigram)")


def _lookup(sorted_keys, keys):
    """Positions of ``keys`` in ``sorted_keys``, -1 where absent."""
    if not len(sorted_keys):
        return np.full(len(keys), -1, dtype=np.int64)
    pos = np.minimum(np.searchsorted(sorted_keys, keys), len(sorted_keys) - 1)
    return np.where(sorted_keys[pos] == keys, pos, -1)


class NGramLM:
    """Count-based language model of order ``n`` with add-k (Laplace for k=1) smoothing.

    ``P(w | ctx) = (c(ctx, w) + k) / (c(ctx) + k * V)`` where ``ctx`` is the previous ``n - 1``
    tokens, ``c(ctx)`` counts the occurrences of ``ctx`` that are followed by a token (so the
    probabilities over the ``V`` tokens sum to 1) and an unseen context gives ``1 / V``.
    The first ``n - 1`` tokens of a sequence have a shorter history; they are scored by the
    same formula with the context they have (order ``t + 1`` for the token at position
    ``t``), with the same ``k``, so every token of the sequence counts in the perplexity.

    N-grams are stored as int64 keys: an m-gram's key is ``id(first m-1 tokens) * V + last
    token``, where ``id`` is the prefix's position among the sorted distinct (m-1)-grams,
    so keys stay below ``num_tokens * V`` whatever ``n`` is.
    """

    def __init__(self, n, k=1.0):
        _check_n(n)
        if not k > 0:
            raise DataError(f"smoothing constant k={k} must be positive (k=0 gives unseen n-grams "
                            "probability 0 and infinite perplexity): use e.g. k=1 or k=0.1")
        self.n, self.k = int(n), float(k)
        self.vocab_size = None

    def _as_indices(self, tokens):
        t = np.asarray(tokens, dtype=np.int64).reshape(-1)
        if len(t) and (t.min() < 0 or t.max() >= self.vocab_size):
            bad = int(t.min() if t.min() < 0 else t.max())
            raise DataError(f"token index {bad} is outside the vocabulary of {self.vocab_size} "
                            "tokens: pass indices from the same Vocab as vocab_size")
        return t

    def fit(self, tokens, vocab_size):
        """Count every m-gram of ``tokens`` (indices in ``[0, vocab_size)``) for m = 1..n."""
        if vocab_size < 1:
            raise DataError(f"vocab_size is {vocab_size}: pass len(vocab)")
        self.vocab_size = V = int(vocab_size)
        t = self._as_indices(tokens)
        self.num_tokens = len(t)
        # keys[m]: sorted distinct m-gram keys; counts[m]: their counts; ctx[m]: how often
        # each m-gram is followed by another token (the denominator for order m + 1).
        self._keys = {1: np.arange(V, dtype=np.int64)}
        self._counts = {1: np.bincount(t, minlength=V)}
        self._ctx = {1: np.bincount(t[:-1], minlength=V)}
        ids = t
        for m in range(2, self.n + 1):
            keys = ids[:-1] * V + t[m - 1:]
            uniq, ids, counts = np.unique(keys, return_inverse=True, return_counts=True)
            ids = ids.reshape(-1)
            self._keys[m], self._counts[m] = uniq, counts
            self._ctx[m] = np.bincount(ids[:-1], minlength=len(uniq))
        return self

    def _check_fitted(self):
        if self.vocab_size is None:
            raise DataError("this NGramLM is not fitted: call .fit(tokens, vocab_size) first")

    def counts_for(self, tokens, order=None):
        """``(num, den)`` for every position ``t`` of ``tokens``: the count of the m-gram ending at
        ``t`` and the count of its context, so that ``P(w_t | history) = (num + k) / (den + k V)``.

        m is ``order`` (default ``n``, at most ``n``: a model of order n holds every lower order's
        counts), or ``t + 1`` where the history is shorter; for m = 1 the context count is the number
        of training tokens. These do not depend on ``k``, so many ``k`` are scored from one call.
        """
        self._check_fitted()
        order = self.n if order is None else int(order)
        if not 1 <= order <= self.n:
            raise DataError(f"order {order} is outside 1..{self.n}: a model of order {self.n} holds those")
        t = self._as_indices(tokens)
        V, T = self.vocab_size, len(t)
        num = self._counts[1][t].astype(np.float64)  # order 1 for all
        den = np.full(T, float(self.num_tokens))
        ids = t  # ids[i]: index of the (m-1)-gram starting at i among the fitted ones, or -1
        for m in range(2, min(order, T) + 1):
            ctx_ids = ids[:-1]
            seen = ctx_ids >= 0
            ctx_count = np.where(seen, self._ctx[m - 1][np.maximum(ctx_ids, 0)], 0)
            ids = np.full(len(ctx_ids), -1, dtype=np.int64)
            ids[seen] = _lookup(self._keys[m], ctx_ids[seen] * V + t[m - 1:][seen])
            count = np.where(ids >= 0, self._counts[m][np.maximum(ids, 0)], 0)
            # Position m-1 is the one token scored at order m; from position `order`-1 on, that order.
            stop = m if m < order else T
            num[m - 1:stop], den[m - 1:stop] = count[:stop - m + 1], ctx_count[:stop - m + 1]
        return num, den

    def token_log_probs(self, tokens):
        """``log P(w_t | w_{t-n+1}, ..., w_{t-1})`` for every position ``t`` of ``tokens`` (an array)."""
        num, den = self.counts_for(tokens)
        return np.log((num + self.k) / (den + self.k * self.vocab_size))

    def log_prob(self, context, token):
        """Natural log of ``P(token | context)``, using the last ``n - 1`` tokens of ``context``."""
        context = list(context)[-(self.n - 1):] if self.n > 1 else []
        return float(self.token_log_probs(context + [token])[-1])

    def sequence_log_prob(self, tokens):
        """Sum of the log probabilities of every token of ``tokens`` (see the class docstring)."""
        return float(self.token_log_probs(tokens).sum())

    def perplexity(self, tokens):
        """``exp(-mean log P(w_t | history))`` over every token of ``tokens``."""
        if len(tokens) == 0:
            raise DataError("cannot compute the perplexity of an empty token sequence: "
                            "give at least one token")
        return math.exp(-float(self.token_log_probs(tokens).mean()))


def _perplexities(num, den, vocab_size, ks):
    """Perplexity of add-k smoothing for each ``k`` of ``ks``, from :meth:`NGramLM.counts_for`."""
    return {k: math.exp(-float(np.log((num + k) / (den + k * vocab_size)).mean())) for k in ks}


def _split_for_k(train, holdout_fraction=0.1):
    cut = len(train) - max(1, int(round(len(train) * holdout_fraction)))
    if cut < 1:
        raise DataError(f"the training split has {len(train)} tokens, too few to choose k: "
                        "give a longer corpus or pass k explicitly")
    return train[:cut], train[cut:]


def select_k(train, vocab_size, n, grid=K_GRID, holdout_fraction=0.1):
    """The ``k`` of ``grid`` with the lowest perplexity on the last ``holdout_fraction`` of ``train``.

    The model is fitted on the rest of ``train``, so the validation split is never looked at.
    """
    fit_part, held = _split_for_k(train, holdout_fraction)
    scores = _perplexities(*NGramLM(n).fit(fit_part, vocab_size).counts_for(held), vocab_size, grid)
    return min(scores, key=scores.get)


def ngram_perplexities(train, val, vocab_size, ns=(1, 2, 3, 5), k=None):
    """``{n: perplexity on val}`` of add-k n-gram models fitted on ``train``.

    ``k`` is one number for every order, a dict ``{n: k}``, or None to pick each order's k
    with :func:`select_k` (on a slice of ``train``). The counts of every order come from one fit
    of the highest order (and one on the slice), and every ``k`` is scored from the same counts.
    """
    for n in ns:
        _check_n(n)
    if len(val) == 0:
        raise DataError("cannot compute the perplexity of an empty token sequence: give at least one token")
    top = max(ns)
    if k is None:
        fit_part, held = _split_for_k(train)
        for_k = NGramLM(top).fit(fit_part, vocab_size)
    model = NGramLM(top).fit(train, vocab_size)
    result = {}
    for n in ns:
        if k is None:
            scores = _perplexities(*for_k.counts_for(held, n), vocab_size, K_GRID)
            k_n = min(scores, key=scores.get)
        else:
            k_n = k[n] if isinstance(k, dict) else k
            if not k_n > 0:
                NGramLM(n, k_n)  # the one-line error for a bad k
        result[n] = _perplexities(*model.counts_for(val, n), vocab_size, (k_n,))[k_n]
    return result


#: The most training tokens :func:`baseline_sample` keeps for fitting, and validation tokens for scoring:
#: the baselines then take about a second and 40 MB at any corpus size (the Time Machine is below them,
#: tiny Shakespeare's 924,124 training characters are not).
BASELINE_FIT_TOKENS = 500_000
BASELINE_SCORE_TOKENS = 200_000


def baseline_sample(train, val, fit_tokens=None, score_tokens=None):
    """``(train, val, note)``: the first ``fit_tokens`` of ``train`` and ``score_tokens`` of ``val``
    (by default :data:`BASELINE_FIT_TOKENS` and :data:`BASELINE_SCORE_TOKENS`).

    N-gram baselines on a large corpus then cost the same time and memory as on a 1M-token one
    (the counts of a 5-gram fit take tens of bytes per token). ``note`` says what was kept, e.g.
    ``"fitted on the first 500,000 of 14,760,000 training tokens, ..."``, or is ``""`` when
    nothing was cut.
    """
    fit_tokens = BASELINE_FIT_TOKENS if fit_tokens is None else fit_tokens
    score_tokens = BASELINE_SCORE_TOKENS if score_tokens is None else score_tokens
    parts = []
    if len(train) > fit_tokens:
        parts.append(f"fitted on the first {fit_tokens:,} of {len(train):,} training tokens")
        train = train[:fit_tokens]
    if len(val) > score_tokens:
        parts.append(f"scored on the first {score_tokens:,} of {len(val):,} validation tokens")
        val = val[:score_tokens]
    return train, val, ", ".join(parts)


def baseline_perplexity(train, val, vocab_size, n=3, k=None):
    """Held-out perplexity of the add-k ``n``-gram model (trigram by default): the number to beat."""
    return ngram_perplexities(train, val, vocab_size, ns=(n,), k=k)[n]
