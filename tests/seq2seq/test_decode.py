"""Greedy and beam search: a hand-made probability table, exhaustive search, k = 1 is greedy, batches,
errors."""

import gc
import itertools
import math
import weakref

import numpy as np
import pytest

import d2lrnn as d2l
from d2lrnn import backend_name, ops
from d2lrnn.errors import ArgumentError
from d2lrnn.seq2seq import beam_search, decode, greedy_search, make_seq2seq, predict_seq2seq, translate
from d2lrnn.seq2seq.decode import source_arrays, translate_arrays

A, B, EOS, BOS = 0, 1, 2, 3
VOCAB = 4


class TableNet:
    """A stand-in decoder whose next-token probabilities are a table of the prefix (one table per source
    sentence: the source's first index scales nothing but picks the table). The state is the prefix,
    coded as a number, so beam search's reordering of rows is exercised."""

    def __init__(self, tables):
        self.tables, self.params = tables, []

    def encode(self, params, X, X_valid_len=None):
        X = ops.to_numpy(X)
        return (ops.from_numpy(np.zeros((len(X), 1), np.float32)),
                ops.from_numpy(X[:, :1].astype(np.float32)))  # (prefix code, which table)

    def decode(self, params, dec_X, state):
        codes, which = ops.to_numpy(state[0])[:, 0], ops.to_numpy(state[1])[:, 0]
        tokens = ops.to_numpy(dec_X)[:, 0]
        logits = []
        for code, table, token in zip(codes, which, tokens):
            code = 0 if token == BOS else code * 10 + token + 1
            probs = self.tables[int(table)].get(int(code), [0.3, 0.3, 0.3, 0.1])
            with np.errstate(divide="ignore"):  # P(<bos>) = 0: a logit of -inf
                logits.append(np.log(np.array(probs, np.float64)))
        new_codes = [0 if t == BOS else c * 10 + t + 1 for c, t in zip(codes, tokens)]
        Y = np.array(logits, np.float32)[:, None, :]
        return ops.from_numpy(Y), (ops.from_numpy(np.array(new_codes, np.float32)[:, None]), state[1])


# After the prefix coded c, the probabilities of A, B, <eos>, <bos>. Greedy takes A (0.5) and then <eos>
# (0.4): P = 0.2. B (0.4) then <eos> (0.9) has P = 0.36: beam search with two beams finds it.
TABLE = {0: [0.5, 0.4, 0.1, 0.0], 1: [0.3, 0.3, 0.4, 0.0], 2: [0.05, 0.05, 0.9, 0.0]}


def _search(net, sources, beam=1, alpha=0.75, max_len=3):
    X = np.array(sources, np.int64).reshape(-1, 1)
    if beam == 1:
        return greedy_search(net, X, np.ones(len(X)), BOS, EOS, max_len)
    return beam_search(net, X, np.ones(len(X)), BOS, EOS, max_len, beam, alpha)


def test_greedy_takes_the_locally_best_token_and_beam_search_the_better_sentence():
    net = TableNet([TABLE])
    assert _search(net, [0], beam=1) == [[A]]
    assert _search(net, [0], beam=2) == [[B]]


def _exhaustive(table, alpha, max_len):
    """The sentence with the best log P / L^alpha over every sentence of at most max_len tokens."""
    best = None
    for n in range(max_len + 1):
        for tokens in itertools.product([A, B], repeat=n):
            log_p, code = 0.0, 0
            for t in tokens:
                log_p += math.log(table.get(code, [0.3, 0.3, 0.3, 0.1])[t])
                code = code * 10 + t + 1
            ended = n < max_len
            if ended:  # an <eos> ends it; at max_len the sentence is cut there, without one
                log_p += math.log(table.get(code, [0.3, 0.3, 0.3, 0.1])[EOS])
            score = log_p / max(n + ended, 1) ** alpha
            if best is None or score > best[0] + 1e-12:
                best = (score, list(tokens))
    return best[1]


@pytest.mark.parametrize("alpha", [0.0, 0.75, 1.0, 2.0])
def test_a_beam_wider_than_every_candidate_is_exhaustive_search(alpha):
    """With more beams than sentences, nothing is pruned: beam search returns the best-scoring sentence of
    all, log P / L^alpha with L counting the <eos>. A longer table makes the lengths matter."""
    rng = np.random.default_rng(0)
    table = {}
    for code in [0, 1, 2, 11, 12, 21, 22, 111, 112, 121, 122, 211, 212, 221, 222]:
        p = rng.dirichlet([1, 1, 1])
        table[code] = [p[0], p[1], p[2], 0.0]
    net = TableNet([table])
    assert _search(net, [0], beam=64, alpha=alpha, max_len=3) == [_exhaustive(table, alpha, 3)]


def test_the_length_normalisation_can_prefer_the_longer_sentence():
    """[A] <eos> has log P = log(.6 * .9) = -0.616 over L = 2; [B, B] <eos> has log(.4 * .9 * .95) = -1.073
    over L = 3. Without normalisation (alpha 0) the short one wins; with alpha 2, -0.154 < -0.119."""
    table = {0: [0.6, 0.4, 0.0001, 0.0], 1: [0.05, 0.05, 0.9, 0.0], 2: [0.05, 0.9, 0.05, 0.0],
             22: [0.04, 0.01, 0.95, 0.0]}
    net = TableNet([table])
    assert _search(net, [0], beam=4, alpha=0.0) == [[A]]
    assert _search(net, [0], beam=4, alpha=0.75) == [[A]]  # -0.366 > -0.470
    assert _search(net, [0], beam=4, alpha=2.0) == [[B, B]]


def test_batched_sentences_decode_as_they_do_alone():
    rng = np.random.default_rng(1)
    tables = []
    for _ in range(3):
        table = {}
        for code in [0, 1, 2, 11, 12, 21, 22]:
            p = rng.dirichlet([1, 1, 1])
            table[code] = [p[0], p[1], p[2], 0.0]
        tables.append(table)
    net = TableNet(tables)
    for beam in (1, 2, 3):
        together = _search(net, [0, 1, 2, 1], beam=beam)
        alone = [_search(net, [s], beam=beam)[0] for s in [0, 1, 2, 1]]
        assert together == alone


def test_max_len_cuts_a_sentence_that_does_not_end():
    table = {0: [0.9, 0.05, 0.05, 0.0], 1: [0.9, 0.05, 0.05, 0.0], 11: [0.9, 0.05, 0.05, 0.0]}
    net = TableNet([table])
    assert _search(net, [0], beam=1, max_len=2) == [[A, A]]
    assert _search(net, [0], beam=3, max_len=2) == [[A, A]]


@pytest.fixture(scope="module")
def trained():
    """A model trained briefly on the book's 600 pairs, and its data (shared by the tests below)."""
    d2l.manual_seed(0)
    train_iter, src_vocab, tgt_vocab = d2l.load_data_nmt(64, 10)
    net = make_seq2seq(len(src_vocab), len(tgt_vocab), 32, 32, 2, 0.1)
    # 8 epochs at 0.04 train it as far as 40 at the book's 0.005 (27 different greedy translations of the
    # first 300 sources on numpy, where the test asks for more than 15), in a fifth of the steps
    d2l.train_seq2seq(net, train_iter, 0.04, 8, tgt_vocab, progress=False, verbose=False, plot=False)
    return net, train_iter, src_vocab, tgt_vocab


def test_one_beam_is_exactly_greedy_search_on_a_trained_model(trained):
    net, train_iter, _, tgt_vocab = trained
    X, X_valid_len = train_iter.arrays[0][:300], train_iter.arrays[1][:300]
    greedy = translate_arrays(net, X, X_valid_len, tgt_vocab, 10, beam_size=1)
    one_beam = [tgt_vocab.to_tokens(s) for s in beam_search(net, X, X_valid_len, tgt_vocab["<bos>"],
                                                             tgt_vocab["<eos>"], 10, beam_size=1)]
    assert one_beam == greedy
    assert len({" ".join(g) for g in greedy}) > 15, greedy  # the model says many different things
    four = translate_arrays(net, X[:40], X_valid_len[:40], tgt_vocab, 10, beam_size=4)
    alone = [translate_arrays(net, X[i:i + 1], X_valid_len[i:i + 1], tgt_vocab, 10, beam_size=4)[0]
             for i in range(0, 40, 7)]
    assert alone == four[::7]


def test_translate_reads_unknown_words_as_unk_and_ends_without_eos(trained):
    net, _, src_vocab, tgt_vocab = trained
    X, valid_len = source_arrays(["Go.", "zzyzx qwerty ."], src_vocab, 10)
    assert X[0, :3].tolist() == [src_vocab["go"], src_vocab["."], src_vocab["<eos>"]]
    assert X[1, :2].tolist() == [src_vocab.unk, src_vocab.unk] and valid_len.tolist() == [3, 4]
    out = translate(net, ["go .", "zzyzx qwerty ."], src_vocab, tgt_vocab, 10, beam_size=2)
    assert len(out) == 2 and all("<eos>" not in s and "<bos>" not in s for s in out)
    assert predict_seq2seq(net, "go .", src_vocab, tgt_vocab, 10) == (translate(net, ["go ."], src_vocab,
                                                                                tgt_vocab, 10)[0], [])


def test_bad_input_is_one_line(trained):
    net, _, src_vocab, tgt_vocab = trained
    for sentence in ["", "   "]:
        with pytest.raises(ArgumentError, match="the sentence to translate is empty"):
            translate(net, [sentence], src_vocab, tgt_vocab, 10)
    for beam in [0, -1, 1.5, True]:
        with pytest.raises(ArgumentError, match="beam size"):
            translate(net, ["go ."], src_vocab, tgt_vocab, 10, beam_size=beam)
    with pytest.raises(ArgumentError, match="list of sentences"):
        translate(net, "go .", src_vocab, tgt_vocab, 10)
    with pytest.raises(ArgumentError, match="the source vocabulary has"):
        translate(net, ["go ."], tgt_vocab, tgt_vocab, 10)


def test_a_models_search_steps_are_compiled_once_and_go_with_it():
    """Greedy and beam search run the model's encoder and decoder step compiled for a few calls: on JAX one
    program per input shape, kept for the model's next searches and dropped with the model (elsewhere the
    model's own functions, as eager calls)."""
    d2l.manual_seed(0)
    net, steps = make_seq2seq(9, 7, 8, 8, 1, 0.0), decode._SEARCH_STEPS
    X, valid_len = np.array([[4, 5, 1, 1], [6, 1, 1, 1]]), np.array([2, 1])
    first = greedy_search(net, X, valid_len, 5, 6, 4)
    made = steps[net]
    assert greedy_search(net, X, valid_len, 5, 6, 4) == first and steps[net] is made
    assert beam_search(net, X, valid_len, 5, 6, 4, beam_size=1) == first  # the same compiled encoder
    if backend_name() == "jax":
        assert made.encode.compilations() == 1  # one source shape
        assert made.decode.compilations() == 2  # greedy's step and beam's (it takes the parents' states)
    else:
        assert not hasattr(made.decode, "compilations")
    model = weakref.ref(net)
    del net, made
    gc.collect()
    assert model() is None  # the compiled steps kept no reference to it: its entry is gone with it
