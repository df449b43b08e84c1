"""BLEU: hand-computed cases, the book's weights and standard BLEU, and sacrebleu's numbers."""

import math

import numpy as np
import pytest

import d2lrnn as d2l


def test_a_perfect_match_is_one_with_either_weighting():
    for weights in ("book", "uniform"):
        assert d2l.bleu("he's calm .", "he's calm .", k=2, weights=weights) == 1.0
        assert d2l.corpus_bleu(["go .", "i lost ."], ["go .", "i lost ."], k=2, weights=weights) == 1.0


def test_the_books_weights_by_hand():
    # pred "a b c d" against "a b c e": unigrams 3 of 4, bigrams 2 of 3 (ab, bc), same length.
    expected = (3 / 4) ** (1 / 2) * (2 / 3) ** (1 / 4)
    assert d2l.bleu("a b c d", "a b c e", k=2) == pytest.approx(expected, rel=1e-12)
    # uniform weights: the geometric mean of the precisions
    assert d2l.bleu("a b c d", "a b c e", k=2, weights="uniform") == pytest.approx(math.sqrt(3 / 4 * 2 / 3))


def test_clipping_and_the_brevity_penalty_by_hand():
    # "the the the" against "the cat": 'the' counts once (clipped), bigram 'the the' never matches.
    assert d2l.bleu("the the the", "the cat", k=1) == pytest.approx((1 / 3) ** 0.5)
    # a short prediction: "a b" against "a b c d" has every n-gram right but is penalised by exp(1 - 4/2)
    assert d2l.bleu("a b", "a b c d", k=2) == pytest.approx(math.exp(-1.0))


def test_a_prediction_shorter_than_k_no_match_and_an_empty_prediction_score_zero():
    assert d2l.bleu("a", "a b", k=2) == 0.0  # no bigram to match
    assert d2l.bleu("x y z", "a b c", k=2) == 0.0
    assert d2l.bleu("", "a b c", k=2) == 0.0
    assert d2l.corpus_bleu([""], ["a b"], k=1) == 0.0


def test_floor_smoothing_replaces_a_zero_count_of_matches():
    # "a x" against "a b": 1 of 2 unigrams, 0 of 1 bigrams -> 0.1 of 1 with smooth=0.1
    assert d2l.bleu("a x", "a b", k=2, weights="uniform", smooth=0.1) == pytest.approx(math.sqrt(0.5 * 0.1))
    assert d2l.bleu("a", "a b", k=2, smooth=0.1) == 0.0  # no bigram at all: nothing to smooth


def test_corpus_bleu_pools_counts_before_the_formula():
    preds, labels = ["a b c", "x y"], ["a b c", "x z w"]
    # unigrams (3 + 1) of 5, bigrams (2 + 0) of 3; lengths 5 against 6
    expected = math.exp(1 - 6 / 5) * math.sqrt(4 / 5 * 2 / 3)
    assert d2l.corpus_bleu(preds, labels, k=2) == pytest.approx(expected)


def _random_pairs(rng, count):
    words = [f"w{i}" for i in range(8)]
    pairs = []
    for _ in range(count):
        pred = list(rng.choice(words, rng.integers(1, 12)))
        label = list(rng.choice(words, rng.integers(1, 12)))
        if rng.random() < 0.5:  # share a stretch, so that higher-order n-grams match too
            start = int(rng.integers(0, len(label)))
            pred = pred[:2] + label[start:start + 6] + pred[2:]
        pairs.append((" ".join(pred), " ".join(label)))
    return pairs


def test_uniform_weights_agree_with_sacrebleu_sentence_and_corpus():
    from sacrebleu.metrics import BLEU

    rng = np.random.default_rng(0)
    pairs = _random_pairs(rng, 300)
    for k in (1, 2, 4):
        metric = BLEU(tokenize="none", smooth_method="none", max_ngram_order=k, effective_order=False)
        nonzero = 0
        for pred, label in pairs:
            expected = metric.sentence_score(pred, [label]).score / 100
            got = d2l.bleu(pred, label, k, weights="uniform")
            assert got == pytest.approx(expected, abs=1e-9), (pred, label)
            nonzero += expected > 0
        assert nonzero > 30  # the comparison is not all zeros
        preds, labels = zip(*pairs)
        expected = metric.corpus_score(list(preds), [list(labels)]).score / 100
        assert 0 < expected < 1
        assert d2l.corpus_bleu(preds, labels, k) == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize("call, message", [
    (lambda: d2l.bleu("a", "a", k=0), "k must be"),
    (lambda: d2l.bleu("a", "a", k=2, weights="geometric"), "weights is 'geometric': choose 'book'"),
    (lambda: d2l.bleu(3, "a", k=1), "pred_seq must be a sentence"),
    (lambda: d2l.bleu("a", "a", k=1, smooth=0), "smooth must be"),
    (lambda: d2l.corpus_bleu(["a"], ["a", "b"]), "1 predictions but 2 labels"),
])
def test_bad_arguments_are_one_line_errors(call, message):
    with pytest.raises(d2l.ArgumentError) as err:
        call()
    assert message in str(err.value) and "\n" not in str(err.value)
