"""BLEU: how many of a translation's n-grams the reference also has, and whether it is long enough.

For a prediction of ``len_pred`` tokens and a label (reference) of ``len_label``::

    BLEU = exp(min(0, 1 - len_label / len_pred)) * prod_{n=1..k} p_n ** w_n

where p_n is the clipped n-gram precision: the prediction's n-grams that also occur in the label,
each counted at most as often as it occurs there, divided by the prediction's number of n-grams.
The first factor, the brevity penalty, punishes short predictions, which precision alone would
favour. The weights are the book's, w_n = 1 / 2^n (longer matches count for more, as p_n ** w_n
grows towards 1 when w_n shrinks), or ``'uniform'``, w_n = 1 / k: the geometric mean of the
precisions, standard BLEU (what ``sacrebleu`` computes with tokenization and smoothing off).

A precision with no match (or a prediction with fewer than n tokens, which has no n-grams) makes
BLEU 0 unless ``smooth`` is given: then a zero count of matches is replaced by ``smooth`` (the
'floor' smoothing of sacrebleu, e.g. 0.1). An empty prediction scores 0.

:func:`corpus_bleu` sums the matches, the n-gram counts and the lengths over a set of sentences
before applying the formula once, as corpus BLEU does.
"""

import math

from .. import checks
from ..data.ngram import ngram_counts
from ..errors import ArgumentError

WEIGHTS = ("book", "uniform")


def _tokens(seq, name):
    if isinstance(seq, str):
        return seq.split()
    if isinstance(seq, (list, tuple)) and all(isinstance(t, str) for t in seq):
        return list(seq)
    raise ArgumentError(f"{name} must be a sentence (a string of space-separated tokens) or a list of "
                        f"tokens, got {type(seq).__name__}")


def clipped_matches(pred_tokens, label_tokens, n):
    """(matches, n-grams in the prediction): a predicted n-gram counts at most as often as in the label."""
    pred, label = ngram_counts(pred_tokens, n), ngram_counts(label_tokens, n)
    matches = sum(min(count, label[gram]) for gram, count in pred.items())
    return matches, max(len(pred_tokens) - n + 1, 0)


def _check(k, weights, smooth):
    k = checks.positive_int("k", k, " (the longest n-gram, e.g. 2 or 4)")
    if weights not in WEIGHTS:
        raise ArgumentError(f"weights is {weights!r}: choose 'book' (1/2^n) or 'uniform' (1/k, standard "
                            "BLEU)")
    if smooth is not None:
        smooth = checks.positive_number("smooth", smooth, " (the count that replaces zero matches, e.g. 0.1)")
    return k, weights, smooth


def _score(matches, totals, len_pred, len_label, k, weights, smooth):
    """The formula above from per-order ``matches`` and ``totals`` and the two lengths."""
    if len_pred == 0:
        return 0.0
    log_score = min(0.0, 1.0 - len_label / len_pred)  # log of the brevity penalty
    for n in range(1, k + 1):
        m, total = matches[n - 1], totals[n - 1]
        if m == 0 and smooth is not None and total > 0:
            m = smooth
        if m == 0:
            return 0.0
        w = 0.5 ** n if weights == "book" else 1.0 / k
        log_score += w * math.log(m / total)
    return math.exp(log_score)


def bleu(pred_seq, label_seq, k, weights="book", smooth=None):
    """BLEU of one prediction against one label (strings of space-separated tokens, or token lists),
    with n-grams up to ``k``; see the module docstring for ``weights`` and ``smooth``."""
    k, weights, smooth = _check(k, weights, smooth)
    pred, label = _tokens(pred_seq, "pred_seq"), _tokens(label_seq, "label_seq")
    counts = [clipped_matches(pred, label, n) for n in range(1, k + 1)]
    return _score([m for m, _ in counts], [t for _, t in counts], len(pred), len(label), k, weights, smooth)


def corpus_bleu(pred_seqs, label_seqs, k=4, weights="uniform", smooth=None):
    """BLEU of a set of predictions against their labels (one label each): matches, n-gram counts and
    lengths summed over the sentences, then the formula once."""
    k, weights, smooth = _check(k, weights, smooth)
    pred_seqs, label_seqs = list(pred_seqs), list(label_seqs)
    if len(pred_seqs) != len(label_seqs):
        raise ArgumentError(f"{len(pred_seqs)} predictions but {len(label_seqs)} labels: give one label per "
                            "prediction")
    matches, totals, len_pred, len_label = [0] * k, [0] * k, 0, 0
    for pred_seq, label_seq in zip(pred_seqs, label_seqs):
        pred, label = _tokens(pred_seq, "a prediction"), _tokens(label_seq, "a label")
        len_pred, len_label = len_pred + len(pred), len_label + len(label)
        for n in range(1, k + 1):
            m, t = clipped_matches(pred, label, n)
            matches[n - 1] += m
            totals[n - 1] += t
    return _score(matches, totals, len_pred, len_label, k, weights, smooth)
