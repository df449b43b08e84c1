"""The hand-written backward passes of the LSTM and GRU scans (``d2lrnn/models/bptt.py``), on every backend.

Three checks, each on the active backend:

- the fast models (:func:`d2l.lstm`, :func:`d2l.gru`, both GRU forms), whose layers run the scans,
  against the framework's own autograd of the book's step functions (:func:`d2l.lstm_textbook`,
  :func:`d2l.gru_textbook`): outputs, final states, and the gradients w.r.t. every parameter, the
  inputs and the initial state (H0, and C0 for the LSTM), with every output weighted or only some;
- the scans on their own against central finite differences in float64 (``tests/gradcheck.py``);
- truncated backpropagation through time (which runs the scan segment by segment, the state
  between segments detached or scaled, ``d2lrnn/truncation.py``) and the state-gradient probes,
  fast model against the textbook model.

Tolerance of the float32 comparisons: rtol 1e-5, atol 1e-6 for values and gradients. The two sides
compute the same sums in different orders (one weight-gradient product over all steps instead of T
products, the gates' products concatenated), so each result differs by a few float32 roundings of
its terms; the parameters (N(0, 0.5^2)) keep the entries O(0.1-10) so that relative error is
meaningful, and the atol only matters for entries that cancel to near zero.
"""

import numpy as np
import pytest

import d2lrnn as d2l
from d2lrnn import ops
from d2lrnn.lm.train import lm_loss, lm_objective
from d2lrnn.models import get_cell
from d2lrnn.models.bptt import gru_scan_fused, gru_scan_reset_after_fused, lstm_scan_fused, rnn_tanh_scan
from tests.gradcheck import FLOAT64, check_gradient
from tests.parity import assert_close, run, to_numpy_tree

RTOL, ATOL = 1e-5, 1e-6
CELLS = [("gru", False), ("gru", True), ("lstm", False)]
IDS = ["gru", "gru-reset-after", "lstm"]
V, h, B = 6, 5, 3


def _functions(name):
    """(get_params, init_state, textbook step, fast form) of a cell."""
    if name == "lstm":
        return d2l.get_lstm_params, d2l.init_lstm_state, d2l.lstm_textbook, d2l.lstm
    return d2l.get_gru_params, d2l.init_gru_state, d2l.gru_textbook, d2l.gru


def _params(name, reset_after, seed):
    """The cell's parameters and the output layer's, N(0, 0.5^2): gates well away from 1/2."""
    r = np.random.default_rng(seed)
    shapes = get_cell(name, reset_after).shapes(V, h) + [(h, V), (V,)]
    return [(0.5 * r.standard_normal(s)).astype(np.float32) for s in shapes]


def _as_model(fn, num_params, num_states, one_hot, keep):
    """``(X, *params, *state) -> the kept outputs among (Y, *final state)``."""
    def model(X, *rest):
        params, state = list(rest[:num_params]), tuple(rest[num_params:num_params + num_states])
        Y, state = fn(ops.one_hot(X, V) if one_hot else X, state, params)
        outputs = (Y, *state)
        return tuple(outputs[i] for i in keep)
    return model


@pytest.mark.parametrize("cell", CELLS, ids=IDS)
@pytest.mark.parametrize("form, T, keep", [
    ("float", 5, "all"),      # real-valued inputs (T, B, V): gradients w.r.t. the inputs too
    ("indices", 5, "all"),    # token indices: the input projection is a row gather
    ("float", 1, "all"),      # T = 1 and 2: the edge cases of the weight gradient's split product
    ("indices", 2, "all"),
    ("float", 4, "outputs"),  # only Y used: the final state's gradients come in as zeros
    ("float", 4, "state"),    # only the final state used (as between truncated segments)
])
def test_fast_gradients_equal_autograd_of_the_book_step(cell, form, T, keep):
    name, reset_after = cell
    _, _, textbook, fast = _functions(name)
    num_states = len(get_cell(name).state_names)
    params = _params(name, reset_after, 1)
    r = np.random.default_rng(2)
    if form == "float":
        X = r.standard_normal((T, B, V)).astype(np.float32)
    else:
        X = r.integers(0, V, (T, B)).astype(np.int64)
    state = [(0.5 * r.standard_normal((B, h))).astype(np.float32) for _ in range(num_states)]
    kept = {"all": range(1 + num_states), "outputs": [0], "state": range(1, 1 + num_states)}[keep]
    indices = form == "indices"
    inputs, n = [X, *params, *state], len(params)
    want_out, want_grads = run(d2l.backend_name(), _as_model(textbook, n, num_states, indices, kept), inputs,
                               grad=True)
    got_out, got_grads = run(d2l.backend_name(), _as_model(fast, n, num_states, False, kept), inputs,
                             grad=True)
    assert_close(got_out, want_out, rtol=RTOL, atol=ATOL)
    # every parameter, the inputs (float form) and the initial state(s) H0 (, C0)
    assert len(got_grads) == len(params) + num_states + (form == "float")
    assert_close(got_grads, want_grads, rtol=RTOL, atol=ATOL, what="gradient")


def _normal(r, *shape, scale=0.5):
    return r.standard_normal(shape) * scale


def _scan_cases():
    """(scan, float64 inputs) for the finite-difference checks."""
    r = np.random.default_rng(7)
    n, hh = 2, 3  # batch, hiddens
    cases = []
    for T in (1, 3):
        cases += [
            (lstm_scan_fused, [_normal(r, T, n, 4 * hh, scale=1.0), _normal(r, n, hh), _normal(r, n, hh),
                               _normal(r, hh, 4 * hh)]),
            (gru_scan_fused, [_normal(r, T, n, 2 * hh, scale=1.0), _normal(r, T, n, hh, scale=1.0),
                              _normal(r, n, hh), _normal(r, hh, 2 * hh), _normal(r, hh, hh)]),
            (gru_scan_reset_after_fused, [_normal(r, T, n, 2 * hh, scale=1.0),
                                          _normal(r, T, n, hh, scale=1.0), _normal(r, n, hh),
                                          _normal(r, hh, 2 * hh), _normal(r, hh, hh), _normal(r, hh)]),
        ]
    return cases


SCAN_CASES = _scan_cases()


@pytest.mark.parametrize("case", range(len(SCAN_CASES)),
                         ids=[f"{fn.__name__}-T{inputs[0].shape[0]}" for fn, inputs in SCAN_CASES])
def test_scan_gradients_match_finite_differences(case):
    # float64: w.r.t. the input projections, the initial state(s) and the recurrent weights (and b_hh)
    scan, inputs = SCAN_CASES[case]
    check_gradient(scan, inputs, FLOAT64)
    check_gradient(lambda *args: scan(*args)[-1], inputs, FLOAT64)  # only the last state used


@pytest.mark.parametrize("scan", [rnn_tanh_scan, lstm_scan_fused, gru_scan_fused, gru_scan_reset_after_fused],
                         ids=lambda scan: scan.__name__)
def test_the_scans_with_their_weights_packed_equal_the_scans_without(scan, monkeypatch):
    """torch packs only large recurrent weights for oneDNN (``PACK_MIN_ENTRIES``), so the small models of
    the other tests run the scans unpacked: here the same float32 scan, every weight packed against none,
    in outputs and in every gradient (the two products sum in different orders: RTOL, ATOL)."""
    if d2l.backend_name() != "torch":
        return  # packing is torch's (the other backends' products take the weight as it is)
    from d2lrnn.backends import torch as torch_backend

    if scan is rnn_tanh_scan:  # XW (T, n, h), H0, W_hh
        r = np.random.default_rng(7)
        inputs = [_normal(r, 3, 2, 3, scale=1.0), _normal(r, 2, 3), _normal(r, 3, 3)]
    else:
        inputs = [case_inputs for case_scan, case_inputs in SCAN_CASES if case_scan is scan][-1]  # T = 3
    inputs = [ops.from_numpy(np.asarray(a, np.float32)) for a in inputs]

    def weighted(*args):
        return sum(ops.sum(out * (k + 1.0)) for k, out in enumerate(_flatten(scan(*args))))

    results = []
    for min_entries in (torch_backend.PACK_MIN_ENTRIES, 0):
        monkeypatch.setattr(torch_backend, "PACK_MIN_ENTRIES", min_entries)
        value, grads = ops.value_and_grad(lambda params: weighted(*params))(inputs)
        results.append((ops.to_numpy(value), to_numpy_tree(grads)))
    assert_close(results[1], results[0], rtol=RTOL, atol=ATOL)


def _flatten(outputs):
    """The scan's outputs (tensors and tuples of tensors) as a flat list."""
    return [leaf for out in outputs for leaf in (out if isinstance(out, (tuple, list)) else [out])]


def _nets(name, reset_after, seed):
    """The textbook model and the fast one, both with the same parameters."""
    get_params, init_state, textbook, fast = _functions(name)
    params = [ops.from_numpy(p) for p in _params(name, reset_after, seed)]
    nets = []
    for fn in (textbook, fast):
        net = d2l.RNNModelScratch(V, h, None, get_params, init_state, fn)
        net.params = list(params)
        nets.append(net)
    return nets


def _loss_and_grads(net, truncation, X, Y, state, *factors):
    vg = ops.value_and_grad(lm_objective(net, lm_loss, True, truncation), has_aux=True)
    (l, new_state), grads = vg(net.params, ops.from_numpy(X), ops.from_numpy(Y),
                               tuple(map(ops.from_numpy, state)), *factors)
    return float(ops.to_numpy(l)), to_numpy_tree(grads), to_numpy_tree(new_state)


@pytest.mark.parametrize("cell", CELLS, ids=IDS)
def test_truncated_bptt_through_the_fast_scans_equals_the_textbook_model(cell):
    name, reset_after = cell
    T = 6
    r = np.random.default_rng(3)
    X, Y = r.integers(0, V, (B, T)), r.integers(0, V, (B, T))
    state = [(0.5 * r.standard_normal((B, h))).astype(np.float32) for _ in get_cell(name).state_names]
    textbook, fast = _nets(name, reset_after, 4)
    xi = ops.tensor(np.array([1.0, 2.0, 0.0, 2.0, 2.0, 0.0], np.float32))  # randomized, p = 0.5
    results = {}
    for truncation, factors in [(None, ()), (d2l.RegularTruncation(2), ()),
                                (d2l.RandomizedTruncation(0.5), (xi,))]:
        want = _loss_and_grads(textbook, truncation, X, Y, state, *factors)
        got = _loss_and_grads(fast, truncation, X, Y, state, *factors)
        assert got[0] == pytest.approx(want[0], rel=RTOL)
        assert_close(got[1], want[1], rtol=RTOL, atol=ATOL, what=f"gradient, {truncation!r}")
        assert_close(got[2], want[2], rtol=RTOL, atol=ATOL, what=f"final state, {truncation!r}")
        results[repr(truncation)] = got[1]
    # the cuts matter: the recurrent weights' gradients differ from the full ones
    full, regular = results["None"], results["RegularTruncation(k=2)"]
    assert np.abs(full[1] - regular[1]).max() > 1e-3


@pytest.mark.parametrize("cell", CELLS, ids=IDS)
def test_state_gradient_norms_of_the_fast_model_equal_the_textbook_ones(cell):
    # one step at a time, the gradient w.r.t. a probe added to the state: dL/dH0 (and dL/dC0) of the scans
    name, reset_after = cell
    r = np.random.default_rng(5)
    X, Y = ops.from_numpy(r.integers(0, V, (B, 5))), ops.from_numpy(r.integers(0, V, (B, 5)))
    state = tuple(ops.from_numpy((0.5 * r.standard_normal((B, h))).astype(np.float32))
                  for _ in get_cell(name).state_names)
    textbook, fast = _nets(name, reset_after, 6)
    want = d2l.state_gradient_norms(textbook, X, Y, state)
    got = d2l.state_gradient_norms(fast, X, Y, state)
    np.testing.assert_allclose(got, want, rtol=RTOL)
    assert want.min() > 1e-4  # the gradient reaches back through every step
