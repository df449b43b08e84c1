"""The encoder-decoder API given what it cannot use (issue 32, case 13): a ``<bos>`` id outside the
target vocabulary (accepted on JAX and MXNet, a raw IndexError on numpy), negative or too long valid
lengths, indices outside either vocabulary, pairs of larger vocabularies than the model's, each one
ArgumentError line that names the argument, on every backend."""

import numpy as np
import pytest

import d2lrnn as d2l
from d2lrnn.seq2seq import beam_search, greedy_search, make_seq2seq

SRC, TGT, STEPS = 7, 6, 3


@pytest.fixture
def net():
    return make_seq2seq(SRC, TGT, 4, 4, 1, 0.0)


X = np.array([[1, 2, 3], [4, 5, 6]])
LENGTHS = np.array([3, 2])


@pytest.mark.parametrize("search", [greedy_search, lambda *a: beam_search(*a, beam_size=2)])
@pytest.mark.parametrize("args, message", [
    ((X, LENGTHS, 6, 3), "bos is 6, not a token index of the target vocabulary \\(0 to 5\\)"),
    ((X, LENGTHS, 2, -1), "eos is -1, not a token index of the target vocabulary"),
    ((X, np.array([3, -1]), 2, 3), "X_valid_len holds the length -1: a valid length runs from 0 to the "
                                   "sequences' 3 steps"),
    ((X, np.array([4, 1]), 2, 3), "X_valid_len holds the length 4"),
    ((X - 2, LENGTHS, 2, 3), "X holds token index -1: indices run from 0 to 6 \\(the source vocabulary\\)"),
    ((X + 1, LENGTHS, 2, 3), "X holds token index 7, outside the source vocabulary"),
])
def test_decoding_checks_its_ids_lengths_and_indices(net, search, args, message):
    with pytest.raises(d2l.ArgumentError, match=message):
        search(net, *args, 4)
    assert len(search(net, X, LENGTHS, 2, 3, 4)) == 2


def test_calls_of_the_model_and_the_losses_check_their_inputs(net):
    Y = d2l.tensor(np.array([[1, 2, 3], [4, 5, 0]]))
    with pytest.raises(d2l.ArgumentError, match="X holds token index 6, outside the target vocabulary"):
        net(d2l.tensor(X), d2l.tensor(X))
    with pytest.raises(d2l.ArgumentError, match="enc_valid_len holds the length -2"):
        net(d2l.tensor(X), Y, d2l.tensor(np.array([3, -2])))
    pred, _ = net(d2l.tensor(X), Y, d2l.tensor(LENGTHS))
    loss = d2l.MaskedSoftmaxCELoss()
    assert d2l.to_numpy(loss(pred, Y, d2l.tensor(LENGTHS))).shape == (2,)
    with pytest.raises(d2l.ArgumentError, match="valid_len holds the length -1"):
        loss(pred, Y, d2l.tensor(np.array([-1, 2])))
    with pytest.raises(d2l.ArgumentError, match="label holds token index 6, outside the logits' classes"):
        loss(pred, d2l.tensor(np.array([[1, 2, 6], [0, 0, 0]])), d2l.tensor(LENGTHS))
    with pytest.raises(d2l.ArgumentError, match="valid_len holds the length -1"):
        d2l.sequence_mask(d2l.ones((2, 3)), d2l.tensor(np.array([1, -1])))


def test_pairs_of_larger_vocabularies_than_the_model_are_refused_before_training(net):
    train_iter, src_vocab, tgt_vocab = d2l.load_data_nmt(2, STEPS, num_examples=20)
    assert len(src_vocab) > SRC
    with pytest.raises(d2l.ArgumentError, match="data_iter's source sentences holds token index \\d+, "
                                                "outside the source vocabulary \\(0 to 6\\)"):
        d2l.train_seq2seq(net, train_iter, 0.01, 1, tgt_vocab, verbose=False, progress=False, plot=False)
