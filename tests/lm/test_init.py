"""Starting weights: the book's N(0, 0.01^2) and the frameworks' uniform, drawn alike on every backend."""

import numpy as np
import pytest

import d2lrnn as d2l
from d2lrnn.models.cell import TOKEN_BOUND
from tests.parity import assert_parity

V, H = 7, 16


def _named(kind, cell, init=None, num_layers=2, bidirectional=False, seed=4, reset_after=None):
    """``{name: NumPy array}`` of a fresh model (``init`` None: make_model's default)."""
    d2l.manual_seed(seed)
    settings = {} if init is None else {"init": init}
    net = d2l.make_model(kind, V, H, cell=cell, num_layers=num_layers, bidirectional=bidirectional,
                         reset_after=reset_after, **settings)
    return {name: d2l.to_numpy(p) for name, p in zip(net.param_names, net.params, strict=True)}


@pytest.mark.parametrize("cell", ["rnn", "gru", "lstm"])
def test_uniform_bounds_every_parameter_by_its_fan_in_and_token_rows_by_one(cell):
    params = _named("scratch", cell, "uniform", bidirectional=True)
    bound = 1 / np.sqrt(H)
    for name, p in params.items():
        token_rows = name.startswith(("W_x", "rev.W_x"))  # the first layer, both directions, reads tokens
        limit = TOKEN_BOUND if token_rows else bound
        assert np.abs(p).max() <= limit, name
        # spread over the whole interval, not the book's 0.01: the largest draw is past half the bound
        assert np.abs(p).max() > limit / 2, name
    first_gate = {"rnn": "h", "gru": "z", "lstm": "i"}[cell]
    assert params[f"l1.W_x{first_gate}"].shape == (2 * H, H)  # the layer above reads both directions


def test_the_book_init_is_unchanged_by_default():
    default, normal = _named("scratch", "lstm", None), _named("scratch", "lstm", "normal")
    for name, p in normal.items():
        np.testing.assert_array_equal(default[name], p)
        if len(p.shape) == 1:  # b_*, l1.b_*, b_q
            assert not p.any(), name
        else:
            assert 0.005 < p.std() < 0.015, name


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_uniform_draws_the_hand_computed_numbers_in_the_books_order(cell):
    params = _named("scratch", cell, "uniform", num_layers=1)
    rng = np.random.default_rng(4)
    gates = "zr" if cell == "gru" else "ifo"
    bound = 1 / np.sqrt(H)
    for g in gates + ("h" if cell == "gru" else "c"):
        for name, shape, limit in ((f"W_x{g}", (V, H), TOKEN_BOUND), (f"W_h{g}", (H, H), bound),
                                   (f"b_{g}", (H,), bound)):
            expected = rng.uniform(-limit, limit, shape).astype(np.float32)
            np.testing.assert_array_equal(params[name], expected, err_msg=name)
    np.testing.assert_array_equal(params["W_hq"], rng.uniform(-bound, bound, (H, V)).astype(np.float32))
    np.testing.assert_array_equal(params["b_q"], rng.uniform(-bound, bound, V).astype(np.float32))


@pytest.mark.parametrize("cell", ["rnn", "gru", "lstm"])
def test_scratch_and_concise_start_from_the_same_uniform_weights_on_every_backend(cell):
    def draw():
        d2l.manual_seed(2)
        return list(d2l.make_model("concise", V, H, cell=cell, num_layers=2, init="uniform").params)

    concise, _ = assert_parity(draw, [])
    names = d2l.make_model("concise", V, H, cell=cell, num_layers=2).param_names
    scratch = _named("scratch", cell, "uniform", seed=2, reset_after=cell == "gru")
    assert list(names) == list(scratch)  # the concise GRU is the reset-after form, b_hh included
    for name, p in zip(names, concise, strict=True):
        np.testing.assert_array_equal(p, scratch[name], err_msg=name)
