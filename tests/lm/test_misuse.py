"""The language-model API given what it cannot use (issue 32, case 13): token indices outside the
vocabulary (a negative one wrapped around; one past it was a raw IndexError on numpy and all zeros on
MXNet), text of a larger vocabulary than the model's, and tensors of another framework, each one
ArgumentError line that names the argument, on every backend."""

import numpy as np
import pytest

import d2lrnn as d2l
from d2lrnn.backends import _inputs


def _foreign(backend):
    """An object that looks, by its type, like a tensor of a framework other than the active one's."""
    other = "jax" if backend != "jax" else "torch"
    return type("Tensor", (), {"__module__": f"{other}.fake"})(), other


@pytest.fixture
def net():
    return d2l.make_model("scratch", 5, 4)


@pytest.mark.parametrize("X, message", [
    ([[0, -1]], "X holds token index -1: indices run from 0 to 4 .*would wrap around"),
    ([[0, 5]], "X holds token index 5, outside the vocabulary \\(0 to 4\\)"),
    (np.array([[0.5, 1.0]]), "X must hold whole numbers"),
])
def test_indices_outside_the_vocabulary_are_refused(net, X, message):
    state = net.begin_state(batch_size=1)
    for given in (X, d2l.tensor(np.asarray(X)) if np.asarray(X).dtype.kind == "i" else X):
        with pytest.raises(d2l.ArgumentError, match=message):
            net(given, state)
    Y, _ = net(d2l.tensor(np.array([[0, 4]])), state)  # the last index is fine
    assert tuple(d2l.to_numpy(Y).shape) == (2, 5)


def test_a_tensor_of_another_framework_is_named(net, backend):
    tensor, other = _foreign(backend)
    with pytest.raises(d2l.ArgumentError, match=f"X is a {other} tensor, but the active backend is "
                                                f"{backend}: convert it to NumPy first"):
        net(tensor, net.begin_state(batch_size=1))


def test_a_model_smaller_than_the_data_is_refused_before_training(net):
    train_iter, _, vocab = d2l.load_data_lm("timemachine", 4, 8, False, max_tokens=400, val_fraction=0,
                                            seed=0)
    assert len(vocab) == 28
    with pytest.raises(d2l.ArgumentError, match="train_iter's text holds token index 2[0-7], outside the "
                                                "model's 5 tokens"):
        d2l.train_ch8(net, train_iter, vocab, 1.0, 1, progress=False, plot=False, verbose=False)


def test_frameworks_are_told_apart_by_the_type_of_a_tensor(backend):
    assert _inputs.framework_of(np.zeros(2)) == "numpy" and _inputs.framework_of([1, 2]) is None
    assert _inputs.framework_of(d2l.zeros((2,))) == backend
    assert _inputs.framework_of(_foreign(backend)[0]) == _foreign(backend)[1]
