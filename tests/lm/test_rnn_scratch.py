"""The from-scratch RNN: shapes from the book, a hand-computed case, textbook vs fast form, BPTT."""

import numpy as np
import pytest

import d2lrnn as d2l
from d2lrnn import ops
from d2lrnn.models.rnn import rnn, rnn_textbook
from tests.parity import assert_close, assert_parity


def test_book_shapes():
    # The book: X = arange(10).reshape((2, 5)); net(X, state) gives (10, 28) outputs, (2, 512) state.
    X = d2l.reshape(d2l.arange(10), (2, 5))
    net = d2l.RNNModelScratch(28, 512, d2l.try_gpu(), d2l.get_params, d2l.init_rnn_state, d2l.rnn)
    state = net.begin_state(X.shape[0], d2l.try_gpu())
    Y, new_state = net(X, state)
    assert d2l.shape(Y) == (10, 28)
    assert isinstance(new_state, tuple) and len(new_state) == 1
    assert d2l.shape(new_state[0]) == (2, 512)


def test_get_params_draws_the_same_numbers_on_every_backend():
    def draw():
        d2l.manual_seed(3)
        return d2l.get_params(5, 4, None)

    params, _ = assert_parity(draw, [])
    W_xh, W_hh, b_h, W_hq, b_q = params
    assert [p.shape for p in params] == [(5, 4), (4, 4), (4,), (4, 5), (5,)]
    assert not b_h.any() and not b_q.any()
    d2l.manual_seed(3)
    expected = np.random.default_rng(3).normal(0, 0.01, (5, 4)).astype(np.float32)
    np.testing.assert_array_equal(W_xh, expected)


def test_init_rnn_state_is_a_tuple_of_zeros():
    (H,) = d2l.init_rnn_state(3, 7, None)
    np.testing.assert_array_equal(ops.to_numpy(H), np.zeros((3, 7), np.float32))


def test_hand_computed_two_steps():
    # vocab 2, one hidden unit: W_xh = [[0.5], [-1]], W_hh = [[2]], b_h = [0.1], W_hq = [[1, -1]],
    # b_q = [0, 0.5]. Tokens 0 then 1 from H_0 = 0:
    #   H_1 = tanh(0.5 + 0 + 0.1) = tanh(0.6);  H_2 = tanh(-1 + 2 tanh(0.6) + 0.1)
    params = [ops.tensor([[0.5], [-1.0]]), ops.tensor([[2.0]]), ops.tensor([0.1]),
              ops.tensor([[1.0, -1.0]]), ops.tensor([0.0, 0.5])]
    net = d2l.RNNModelScratch(2, 1, None, lambda *a: params, d2l.init_rnn_state, d2l.rnn)
    Y, (H,) = net(ops.tensor([[0, 1]]), net.begin_state(1))
    H1 = np.tanh(0.6)
    H2 = np.tanh(-1 + 2 * H1 + 0.1)
    expected = np.array([[H1, 0.5 - H1], [H2, 0.5 - H2]], np.float32)
    # by hand in float64, compared with float32: rel 1e-6 is a few float32 ulps. 0.5 - H_1 and H_2's
    # pre-activation lose digits to cancellation, so a float32 tanh one ulp off at 0.6 (Paddle's:
    # 0.53704965 for 0.5370496) is 2e-6 of them; atol 3e-7 is 5 ulps of the ~0.5 terms they come from
    # (a wrong weight or step moves them by 1e-2 or more)
    np.testing.assert_allclose(ops.to_numpy(Y), expected, rtol=1e-6, atol=3e-7)
    np.testing.assert_allclose(ops.to_numpy(H), [[H2]], rtol=1e-6, atol=3e-7)


def _random_params(V, h, seed=0):
    r = np.random.default_rng(seed)
    return [r.standard_normal(s).astype(np.float32) * 0.5 for s in [(V, h), (h, h), (h,), (h, V), (V,)]]


def _loss_of(forward, inputs_fn):
    def run(W_xh, W_hh, b_h, W_hq, b_q, X, H0):
        Y, (H,) = forward(inputs_fn(X), (H0,), [W_xh, W_hh, b_h, W_hq, b_q])
        return Y, H
    return run


# T = 1 and 2 are the edge cases of the BPTT weight gradient (no stored state before the last; one)
@pytest.mark.parametrize("form, T", [("indices", 4), ("one_hot", 4), ("indices", 1), ("indices", 2)])
def test_fast_form_equals_textbook_form_with_gradients(form, T):
    V, h, B = 6, 5, 3
    r = np.random.default_rng(1)
    X = r.integers(0, V, (T, B)).astype(np.int64)
    H0 = r.standard_normal((B, h)).astype(np.float32)
    fast_inputs = (lambda X: X) if form == "indices" else (lambda X: ops.one_hot(X, V))
    textbook = _loss_of(rnn_textbook, lambda X: ops.one_hot(X, V))
    fast = _loss_of(rnn, fast_inputs)
    inputs = _random_params(V, h) + [X, H0]
    from tests.parity import run

    out_tb, g_tb = run(d2l.backend_name(), textbook, inputs, grad=True)
    out_fast, g_fast = run(d2l.backend_name(), fast, inputs, grad=True)
    # different summation order (one product for dW_hh instead of T), float32: 1e-5
    assert_close(out_fast, out_tb, rtol=1e-5, atol=1e-6)
    assert_close(g_fast, g_tb, rtol=1e-5, atol=1e-5)


def test_rnn_forward_and_bptt_match_numpy():
    V, h, T, B = 7, 6, 5, 4
    r = np.random.default_rng(2)
    inputs = _random_params(V, h) + [r.integers(0, V, (T, B)).astype(np.int64),
                                     r.standard_normal((B, h)).astype(np.float32)]
    # gradients summed over 5 steps x 4 rows may cancel to ~1e-2: absolute 1e-5 for those (the rest RTOL)
    assert_parity(_loss_of(rnn, lambda X: X), inputs, grad=True, atol=1e-5)


@pytest.mark.parametrize("vocab_size, num_hiddens, message", [
    (28, 0, "num_hiddens must be at least 1, got 0"),
    (0, 8, "vocab_size must be at least 1, got 0"),
    (28, 2.5, "num_hiddens must be a whole number, got 2.5"),
])
def test_sizes_that_make_no_model_are_refused(vocab_size, num_hiddens, message):
    with pytest.raises(d2l.ArgumentError, match=message):
        d2l.RNNModelScratch(vocab_size, num_hiddens)
    with pytest.raises(d2l.ArgumentError, match=message):
        d2l.make_model("concise", vocab_size, num_hiddens)


def _devices_seen(monkeypatch):
    """Record the ``device`` that each tensor-making shim call receives on the active backend."""
    module, seen = d2l.get_backend(), []
    for name in ("normal", "zeros", "tensor"):
        real = getattr(module, name)

        def spy(*args, _real=real, device=None, **kwargs):
            seen.append(device)
            return _real(*args, device=device, **kwargs)

        monkeypatch.setattr(module, name, spy)
    return seen


@pytest.mark.parametrize("kind", ["scratch", "concise"])
def test_the_device_reaches_every_tensor_a_model_makes(kind, monkeypatch):
    # The book passes its device (a GPU when there is one) to every function that makes tensors; a
    # tensor made elsewhere would make the first matmul fail (or copy on every step) on a GPU.
    device = ops.cpu()
    seen = _devices_seen(monkeypatch)
    net = d2l.make_model(kind, 6, 4, device)
    state = net.begin_state(3, device)
    params = d2l.get_params(6, 4, device)
    state2 = d2l.init_rnn_state(2, 4, device)
    d2l.predict_ch8("ab", 3, net, _Letters(), device)
    assert len(params) == 5 and ops.shape(state[0]) == (3, 4) and ops.shape(state2[0]) == (2, 4)
    assert len(seen) >= 5 + 1 + 5 + 1 + 3
    assert all(d == device for d in seen), seen


class _Letters:
    idx_to_token = ["<unk>", "a", "b", "c", "d", "e"]

    def __getitem__(self, token):
        return self.idx_to_token.index(token)

    def __len__(self):
        return 6

    def to_tokens(self, ids):
        return [self.idx_to_token[i] for i in ids]


def test_a_model_on_the_textbook_step_equals_the_fast_one():
    # RNNModelScratch feeds one-hot inputs to a forward function that does not take indices
    d2l.manual_seed(3)
    fast = d2l.RNNModelScratch(6, 4)
    textbook = d2l.RNNModelScratch(6, 4, None, lambda *a: fast.params, d2l.init_rnn_state, rnn_textbook)
    X = ops.from_numpy(np.random.default_rng(4).integers(0, 6, (3, 5)))
    (Y1, (H1,)), (Y2, (H2,)) = fast(X, fast.begin_state(3)), textbook(X, textbook.begin_state(3))
    assert ops.shape(Y2) == (5 * 3, 6)
    assert_close(ops.to_numpy(Y2), ops.to_numpy(Y1), rtol=1e-5, atol=1e-6)  # float32, other order
    assert_close(ops.to_numpy(H2), ops.to_numpy(H1), rtol=1e-5, atol=1e-6)
