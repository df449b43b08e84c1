"""GRU and LSTM against plain float64 NumPy written from the equations, and every form against the others.

The references below are written from the equations in the module docstrings of
``d2lrnn/models/gru.py`` and ``lstm.py``, with their own loops, in float64; they share no code
with d2lrnn.
"""

import numpy as np
import pytest

import d2lrnn as d2l
from d2lrnn import ops
from d2lrnn.models import RecurrentStack, get_cell


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def gru_reference(X, H, p, reset_after=False):
    """Hidden states of one GRU layer; p maps the book's names to float64 arrays."""
    hiddens = []
    for x in X:
        Z = _sigmoid(x @ p["W_xz"] + H @ p["W_hz"] + p["b_z"])
        R = _sigmoid(x @ p["W_xr"] + H @ p["W_hr"] + p["b_r"])
        if reset_after:
            H_tilde = np.tanh(x @ p["W_xh"] + p["b_h"] + R * (H @ p["W_hh"] + p["b_hh"]))
        else:
            H_tilde = np.tanh(x @ p["W_xh"] + (R * H) @ p["W_hh"] + p["b_h"])
        H = Z * H + (1 - Z) * H_tilde
        hiddens.append(H)
    return np.stack(hiddens), (H,)


def lstm_reference(X, state, p):
    """Hidden states of one LSTM layer; p maps the book's names to float64 arrays."""
    H, C = state
    hiddens = []
    for x in X:
        gate = {g: x @ p[f"W_x{g}"] + H @ p[f"W_h{g}"] + p[f"b_{g}"] for g in "ifoc"}
        C = _sigmoid(gate["f"]) * C + _sigmoid(gate["i"]) * np.tanh(gate["c"])
        H = _sigmoid(gate["o"]) * np.tanh(C)
        hiddens.append(H)
    return np.stack(hiddens), (H, C)


def _draw(cell, num_inputs, h, seed):
    r = np.random.default_rng(seed)
    shapes = get_cell(*cell).shapes(num_inputs, h)
    return [(r.standard_normal(s) * 0.5).astype(np.float32) for s in shapes]


CELLS = [("gru", False), ("gru", True), ("lstm", False)]


@pytest.mark.parametrize("cell", CELLS, ids=["gru", "gru-reset-after", "lstm"])
def test_the_fast_scan_is_the_reference_recurrence(cell):
    name, reset_after = cell
    c = get_cell(name, reset_after)
    params = _draw(cell, 3, 4, 0)
    r = np.random.default_rng(1)
    X = r.standard_normal((6, 2, 3)).astype(np.float32)
    state = tuple(r.standard_normal((2, 4)).astype(np.float32) for _ in c.state_names)
    Hs, new_state = c.layer(ops.from_numpy(X), tuple(map(ops.from_numpy, state)),
                            list(map(ops.from_numpy, params)))
    p = {n: a.astype(np.float64) for n, a in zip(c.names, params)}
    if name == "gru":
        want_Hs, want_state = gru_reference(X.astype(np.float64), state[0].astype(np.float64), p, reset_after)
    else:
        state64 = tuple(s.astype(np.float64) for s in state)
        want_Hs, want_state = lstm_reference(X.astype(np.float64), state64, p)
    # float32 arithmetic over 6 steps of O(1) values with saturating gates: errors of a few 1e-7
    np.testing.assert_allclose(ops.to_numpy(Hs), want_Hs, rtol=1e-5, atol=1e-6)
    for got, want in zip(new_state, want_state, strict=True):
        np.testing.assert_allclose(ops.to_numpy(got), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("cell", CELLS, ids=["gru", "gru-reset-after", "lstm"])
def test_the_book_step_and_the_fast_form_agree_on_a_model(cell):
    name, reset_after = cell
    get_params = {"gru": d2l.get_gru_params, "lstm": d2l.get_lstm_params}[name]
    init_state = {"gru": d2l.init_gru_state, "lstm": d2l.init_lstm_state}[name]
    textbook, fast = {"gru": (d2l.gru_textbook, d2l.gru), "lstm": (d2l.lstm_textbook, d2l.lstm)}[name]
    V, h = 7, 5
    kwargs = {"reset_after": True} if reset_after else {}
    params = [p * 30 for p in get_params(V, h, None, **kwargs)]  # N(0, 0.3^2): gates away from 1/2
    X = ops.from_numpy(np.random.default_rng(2).integers(0, V, (3, 4)))
    nets = [d2l.RNNModelScratch(V, h, None, get_params, init_state, fn) for fn in (textbook, fast)]
    outputs = []
    for net in nets:
        net.params = params
        Y, state = net(X, net.begin_state(3))
        outputs.append([ops.to_numpy(Y)] + [ops.to_numpy(s) for s in state])
    for got, want in zip(*outputs, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)  # float32, summed in another order


def test_the_two_gru_forms_differ_from_the_same_weights():
    # (R * H) W_hh against R * (H W_hh): equal only where R is all ones or H all zeros.
    params = _draw(("gru", False), 3, 4, 3)
    X = ops.from_numpy(np.random.default_rng(4).standard_normal((2, 2, 3)).astype(np.float32))
    H0 = (ops.from_numpy(np.full((2, 4), 0.5, np.float32)),)
    book, _ = get_cell("gru").layer(X, H0, list(map(ops.from_numpy, params)))
    after, _ = get_cell("gru", True).layer(X, H0, list(map(ops.from_numpy, params)) + [ops.zeros(4)])
    assert np.abs(ops.to_numpy(book) - ops.to_numpy(after)).max() > 1e-2


@pytest.mark.parametrize("cell", ["rnn", "gru", "lstm"])
@pytest.mark.parametrize("num_layers, bidirectional", [(1, False), (2, False), (1, True), (2, True)])
def test_the_concise_layer_computes_the_stack(cell, num_layers, bidirectional):
    """The framework's layer (torch.nn.GRU, keras LSTM, gluon RNN, ...) from the book's weights equals
    the cells' own recurrence, for every cell, layer count and direction (the gate order and bias map)."""
    from d2lrnn.models import NativeLayer

    concise = NativeLayer(cell, 6, 5, num_layers, bidirectional)
    scratch = RecurrentStack(cell, 6, 5, num_layers, bidirectional, reset_after=concise.cell.reset_after)
    assert concise.names == scratch.names
    r = np.random.default_rng(5)
    params = [ops.from_numpy((r.standard_normal(s) * 0.5).astype(np.float32)) for s in scratch.shapes()]
    state = tuple(ops.from_numpy((r.standard_normal((3, 5)) * 0.5).astype(np.float32))
                  for _ in scratch.begin_state(3))
    X = ops.from_numpy(r.integers(0, 6, (4, 3)))
    Y1, s1 = scratch.forward(params, X, state)
    Y2, s2 = concise.forward(params, X, state)
    # a fused kernel sums in its own order: float32 rounding through 4 steps and 2 layers
    for got, want in zip((Y2, *s2), (Y1, *s1), strict=True):
        np.testing.assert_allclose(ops.to_numpy(got), ops.to_numpy(want), rtol=1e-5, atol=1e-5)


def test_a_stack_feeds_each_layer_the_one_below_and_reverses_the_backward_direction():
    # Built by hand from one-layer cells: layer 0 forward, layer 0 backward (reversed in time),
    # concatenated; layer 1 reads that.
    stack = RecurrentStack("gru", 4, 3, 2, True)
    cell = stack.cell
    r = np.random.default_rng(6)
    params = [ops.from_numpy((r.standard_normal(s) * 0.5).astype(np.float32)) for s in stack.shapes()]
    X = ops.from_numpy(r.standard_normal((5, 2, 4)).astype(np.float32))
    state = stack.begin_state(2)
    Y, new_state = stack.forward(params, X, state)
    n = len(cell.names)
    slots = [params[i * n:(i + 1) * n] for i in range(4)]

    def run(inputs, slot, reverse):
        inputs = ops.to_numpy(inputs)[::-1] if reverse else ops.to_numpy(inputs)
        Hs, (H,) = cell.layer(ops.from_numpy(np.ascontiguousarray(inputs)), (ops.zeros((2, 3)),), slots[slot])
        Hs = ops.to_numpy(Hs)
        return (Hs[::-1] if reverse else Hs), ops.to_numpy(H)

    f0, hf0 = run(X, 0, False)
    b0, hb0 = run(X, 1, True)
    layer0 = np.concatenate([f0, b0], axis=2)
    f1, hf1 = run(ops.from_numpy(layer0), 2, False)
    b1, hb1 = run(ops.from_numpy(layer0), 3, True)
    np.testing.assert_allclose(ops.to_numpy(Y), np.concatenate([f1, b1], axis=2), rtol=1e-6, atol=1e-7)
    for got, want in zip(new_state, [hf0, hb0, hf1, hb1], strict=True):
        np.testing.assert_allclose(ops.to_numpy(got), want, rtol=1e-6, atol=1e-7)  # same ops, same order


@pytest.mark.parametrize("kind", ["scratch", "concise"])
@pytest.mark.parametrize("cell, bidirectional", [("gru", False), ("lstm", True)])
def test_dropout_acts_between_layers_in_training_only(kind, cell, bidirectional):
    """With p = 0.5 between two layers, two training passes differ (fresh masks) and differ from
    evaluation; evaluation is deterministic and what ``net(X, state)`` computes; a single layer has
    nowhere to drop. Every backend, the framework layers included (MXNet's CPU kernel ignores its
    own dropout: d2lrnn drops between its layers)."""
    d2l.manual_seed(0)
    net = d2l.make_model(kind, 6, 5, cell=cell, num_layers=2, bidirectional=bidirectional, dropout=0.5)
    net.params = [p * 60 if len(ops.shape(p)) == 2 else p for p in net.params]  # O(1) weights: drops show
    X = ops.from_numpy(np.random.default_rng(6).integers(0, 6, (3, 4)))
    state = net.begin_state(3)

    def out(training):
        return ops.to_numpy(net.forward(net.params, X, state, training=training)[0])

    evaluation = out(False)
    np.testing.assert_array_equal(out(False), evaluation)
    np.testing.assert_array_equal(ops.to_numpy(net(X, state)[0]), evaluation)
    first, second = out(True), out(True)
    assert np.abs(first - second).max() > 0.05, "two training passes must draw different masks"
    assert np.abs(first - evaluation).max() > 0.05
    one = d2l.make_model(kind, 6, 5, cell=cell, bidirectional=bidirectional, dropout=0.5)
    start = one.begin_state(3)
    np.testing.assert_array_equal(ops.to_numpy(one.forward(one.params, X, start, training=True)[0]),
                                  ops.to_numpy(one(X, start)[0]))
