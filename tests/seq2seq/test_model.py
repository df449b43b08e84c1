"""The encoder-decoder: shapes, the equations by hand, the fixed context, scratch = concise, a reader's layer,
parity with the NumPy reference."""

import numpy as np
import pytest

import d2lrnn as d2l
from d2lrnn import ops
from d2lrnn.errors import ArgumentError
from d2lrnn.seq2seq import EncoderDecoder, Seq2SeqDecoder, Seq2SeqEncoder, make_seq2seq
from d2lrnn.seq2seq.loss import masked_token_loss
from tests.lm.test_rnn_concise import _readers_layer
from tests.parity import assert_parity

V_SRC, V_TGT, E, H = 10, 12, 8, 16


def _tokens(rng, shape, V):
    return ops.from_numpy(rng.integers(0, V, shape).astype(np.int64))


def test_the_books_shapes_batch_4_steps_7_two_layers(rng):
    encoder = Seq2SeqEncoder(V_SRC, E, H, num_layers=2)
    X = _tokens(rng, (4, 7), V_SRC)
    outputs, state = encoder(X)
    assert ops.shape(outputs) == (7, 4, H)
    assert [ops.shape(s) for s in state] == [(4, H), (4, H)]
    decoder = Seq2SeqDecoder(V_TGT, E, H, num_layers=2)
    dec_state = decoder.init_state((outputs, state))
    Y, new_state = decoder(_tokens(rng, (4, 7), V_TGT), dec_state)
    assert ops.shape(Y) == (4, 7, V_TGT)
    assert len(new_state) == 3 and [ops.shape(s) for s in new_state] == [(4, H)] * 3
    assert encoder.param_names[:4] == ("embedding", "W_xz", "W_hz", "b_z")
    assert decoder.param_names[-2:] == ("W_hq", "b_q")
    shapes = {n: tuple(ops.shape(p)) for n, p in decoder.named_params().items()}
    assert shapes["embedding"] == (V_TGT, E) and shapes["W_xz"] == (E + H, H) and shapes["l1.W_xz"] == (H, H)
    assert shapes["b_hh"] == (H,)  # the frameworks' (reset-after) GRU form by default


def test_the_starting_weights_xavier_zero_biases_unit_embeddings():
    net = make_seq2seq(300, 400, 64, 64, 2, 0.0)
    named = {n: ops.to_numpy(p) for n, p in net.named_params().items()}
    W = named["decoder.W_xz"]  # (E + h, h)
    bound = np.sqrt(6 / sum(W.shape))
    assert np.abs(W).max() <= bound and np.abs(W).max() > 0.9 * bound
    assert not named["encoder.b_z"].any() and not named["decoder.b_q"].any()
    assert abs(named["encoder.embedding"].std() - 1) < 0.02


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _gru_step(X, Hp, p):
    """One reset-after GRU step in NumPy from the book-layout parameters ``p`` (a dict)."""
    Z = _sigmoid(X @ p["W_xz"] + Hp @ p["W_hz"] + p["b_z"])
    R = _sigmoid(X @ p["W_xr"] + Hp @ p["W_hr"] + p["b_r"])
    H_tilde = np.tanh(X @ p["W_xh"] + p["b_h"] + R * (Hp @ p["W_hh"] + p["b_hh"]))
    return Z * Hp + (1 - Z) * H_tilde


def _W_hq(dec):
    """The decoder's output weights: its own, or its embedding's transpose when tied."""
    return dec["W_hq"] if "W_hq" in dec else dec["embedding"].T


def _encoded_by_hand(enc, X, bidirectional=False):
    """The one-layer encoder's states (batch, T, h) and final state (batch, h) in NumPy; both ways, each
    direction's h / 2 units side by side, [forward, backward]."""
    def run(p, steps, width):
        state, states = np.zeros((X.shape[0], width)), {}
        for t in steps:
            state = states[t] = _gru_step(enc["embedding"][X[:, t]], state, p)
        return np.stack([states[t] for t in range(X.shape[1])], 1), state

    if not bidirectional:
        return run(enc, range(X.shape[1]), H)
    forward = {n: v for n, v in enc.items() if not n.startswith("rev.")}
    H_fwd, last_fwd = run(forward, range(X.shape[1]), H // 2)
    H_bwd, last_bwd = run({n[4:]: v for n, v in enc.items() if n.startswith("rev.")},
                          reversed(range(X.shape[1])), H // 2)
    return np.concatenate([H_fwd, H_bwd], 2), np.concatenate([last_fwd, last_bwd], 1)


def _by_hand(net, X, Y_in):
    """The one-layer model's logits, computed from the equations in the module docstring with NumPy."""
    named = {n: ops.to_numpy(p).astype(np.float64) for n, p in net.named_params().items()}
    enc = {n[8:]: v for n, v in named.items() if n.startswith("encoder.")}
    dec = {n[8:]: v for n, v in named.items() if n.startswith("decoder.")}
    _, Hs = _encoded_by_hand(enc, X, net.encoder.bidirectional)
    context, S, logits = Hs, Hs, []
    for t in range(Y_in.shape[1]):
        S = _gru_step(np.concatenate([dec["embedding"][Y_in[:, t]], context], 1), S, dec)
        logits.append(S @ _W_hq(dec) + dec["b_q"])
    return np.stack(logits, 1)


@pytest.mark.parametrize("rnn", ["scratch", "concise"])
def test_one_layer_model_equals_the_equations_by_hand(rng, rnn):
    net = make_seq2seq(V_SRC, V_TGT, E, H, 1, 0.0, rnn=rnn)
    net.params = [p + 0.1 * ops.from_numpy(rng.standard_normal(ops.shape(p)).astype(np.float32))
                  for p in net.params]  # non-zero biases too
    X, Y_in = rng.integers(0, V_SRC, (3, 5)), rng.integers(0, V_TGT, (3, 4))
    Y_hat, _ = net(ops.from_numpy(X), ops.from_numpy(Y_in))
    np.testing.assert_allclose(ops.to_numpy(Y_hat), _by_hand(net, X, Y_in), rtol=1e-4, atol=1e-5)


def test_decoding_step_by_step_equals_decoding_at_once_and_the_context_stays(rng):
    """What prediction does (one token at a time, carrying the state) is what training computes at once;
    the context is the encoder's last-layer final state at every step, not the decoder's."""
    net = make_seq2seq(V_SRC, V_TGT, E, H, 2, 0.0)
    X, Y_in = _tokens(rng, (3, 6), V_SRC), rng.integers(0, V_TGT, (3, 5))
    state = net.encode(net.params, X)
    context = ops.to_numpy(state[0])
    np.testing.assert_array_equal(context, ops.to_numpy(net.encoder(X)[1][-1]))
    at_once, _ = net.decode(net.params, ops.from_numpy(Y_in), state)
    steps = []
    for t in range(5):
        Y, state = net.decode(net.params, ops.from_numpy(Y_in[:, t:t + 1]), state)
        steps.append(ops.to_numpy(Y)[:, 0])
        np.testing.assert_array_equal(ops.to_numpy(state[0]), context)
    np.testing.assert_allclose(np.stack(steps, 1), ops.to_numpy(at_once), rtol=1e-5, atol=1e-6)


def _loss_and_grads(net, X, X_valid_len, Y, Y_valid_len):
    def loss(params):
        Y_hat, _ = net.forward(params, X, Y, X_valid_len)
        return masked_token_loss(Y_hat, Y, Y_valid_len)

    value, grads = ops.value_and_grad(loss)(net.params)
    return float(ops.to_numpy(value)), [ops.to_numpy(g) for g in grads]


def _batch(rng, batch=4, steps=6):
    return (ops.from_numpy(rng.integers(0, V_SRC, (batch, steps))), ops.from_numpy(np.array([6, 3, 1, 4])),
            ops.from_numpy(rng.integers(0, V_TGT, (batch, steps))), ops.from_numpy(np.array([2, 6, 5, 1])))


def test_scratch_and_concise_agree_from_the_same_weights(rng):
    """Outputs, loss and every gradient to 1e-5: the framework's own layer computes the same model."""
    scratch = make_seq2seq(V_SRC, V_TGT, E, H, 2, 0.0, rnn="scratch")
    d2l.manual_seed(1)
    concise = make_seq2seq(V_SRC, V_TGT, E, H, 2, 0.0, rnn="concise")
    assert concise.param_names == scratch.param_names
    concise.params = scratch.params
    X, X_valid_len, Y, Y_valid_len = _batch(rng)
    out_s, out_c = scratch(X, Y, X_valid_len)[0], concise(X, Y, X_valid_len)[0]
    np.testing.assert_allclose(ops.to_numpy(out_c), ops.to_numpy(out_s), rtol=1e-5, atol=1e-5)
    loss_s, grads_s = _loss_and_grads(scratch, X, X_valid_len, Y, Y_valid_len)
    loss_c, grads_c = _loss_and_grads(concise, X, X_valid_len, Y, Y_valid_len)
    assert loss_c == pytest.approx(loss_s, rel=1e-5)
    for name, gs, gc in zip(scratch.param_names, grads_s, grads_c):
        np.testing.assert_allclose(gc, gs, rtol=1e-5, atol=1e-5, err_msg=name)


def test_the_books_gru_form_is_available_and_differs(rng):
    book = make_seq2seq(V_SRC, V_TGT, E, H, 1, 0.0, reset_after=False)
    assert "decoder.b_hh" not in book.param_names
    cudnn = make_seq2seq(V_SRC, V_TGT, E, H, 1, 0.0)
    X, Y = _tokens(rng, (2, 4), V_SRC), _tokens(rng, (2, 4), V_TGT)
    assert ops.shape(book(X, Y)[0]) == ops.shape(cudnn(X, Y)[0])


def test_a_gru_layer_the_reader_built(backend, rng):
    """torch.nn.GRU(E + h, h, 2), a keras GRU stack, gluon's GRU: the decoder computes the scratch model
    with them from the same weights; a layer of the wrong input size is refused in one line."""
    native = _readers_layer(backend, "gru", 2, False, E + H, H)
    if native is None:  # numpy has no framework layers: refused in one line
        with pytest.raises(ArgumentError, match="no framework layers"):
            Seq2SeqDecoder(V_TGT, E, H, 2, rnn=object())
        return
    decoder = Seq2SeqDecoder(V_TGT, E, H, 2, rnn=native)
    scratch = Seq2SeqDecoder(V_TGT, E, H, 2, rnn="scratch")
    decoder.params = scratch.params
    encoder = Seq2SeqEncoder(V_SRC, E, H, 2)
    state = scratch.init_state(encoder(_tokens(rng, (3, 5), V_SRC)))
    Y_in = _tokens(rng, (3, 4), V_TGT)
    np.testing.assert_allclose(ops.to_numpy(decoder(Y_in, state)[0]), ops.to_numpy(scratch(Y_in, state)[0]),
                               rtol=1e-5, atol=1e-5)
    both_ways = _readers_layer(backend, "gru", 1, True, E, H // 2)  # an encoder's, h / 2 units a direction
    encoder = Seq2SeqEncoder(V_SRC, E, H, 1, rnn=both_ways, bidirectional=True)
    scratch = Seq2SeqEncoder(V_SRC, E, H, 1, bidirectional=True)
    encoder.params = scratch.params
    X = _tokens(rng, (3, 5), V_SRC)
    for mine, its in zip(encoder(X)[1] + (encoder(X)[0],), scratch(X)[1] + (scratch(X)[0],), strict=True):
        np.testing.assert_allclose(ops.to_numpy(mine), ops.to_numpy(its), rtol=1e-5, atol=1e-5)
    assert encoder.num_hiddens == H and ops.shape(encoder(X)[1][0]) == (3, H)
    with pytest.raises(ArgumentError, match="so both run in one direction: build the layer without "):
        Seq2SeqDecoder(V_TGT, E, H // 2, 1, rnn=_readers_layer(backend, "gru", 1, True, E + H // 2, H // 2))
    with pytest.raises(ArgumentError, match="bidirectional=True runs the encoder's layer in both directions"):
        Seq2SeqEncoder(V_SRC, E, H, 1, rnn=_readers_layer(backend, "gru", 1, False, E, H), bidirectional=True)
    if backend in ("tensorflow", "jax"):  # Keras layers and Flax cells take their input size from the first
        return                            # call: nothing to check
    wrong = _readers_layer(backend, "gru", 2, False, E, H)
    with pytest.raises(ArgumentError, match=f"build it with input size {E + H}"):
        Seq2SeqDecoder(V_TGT, E, H, 2, rnn=wrong)


def test_bad_settings_are_one_line_errors():
    with pytest.raises(ArgumentError, match="'scratch'"):
        Seq2SeqEncoder(V_SRC, E, H, rnn="fast")
    with pytest.raises(ArgumentError, match="EncoderDecoder takes an Encoder and a Decoder"):
        EncoderDecoder(Seq2SeqEncoder(V_SRC, E, H), object())
    with pytest.raises(ArgumentError, match="embed_size"):
        Seq2SeqEncoder(V_SRC, 0, H)
    with pytest.raises(ArgumentError, match="dropout"):
        make_seq2seq(V_SRC, V_TGT, E, H, 2, dropout=1.5)
    with pytest.raises(ArgumentError, match="embed_dropout is 1"):
        make_seq2seq(V_SRC, V_TGT, E, H, 2, embed_dropout=1)
    with pytest.raises(ArgumentError, match="output_dropout is -0.1"):
        Seq2SeqDecoder(V_TGT, E, H, output_dropout=-0.1)
    for wrong in (1, "True", None):
        with pytest.raises(ArgumentError, match=f"attention must be True or False, got {wrong!r}$"):
            make_seq2seq(V_SRC, V_TGT, E, H, attention=wrong)
    assert make_seq2seq(V_SRC, V_TGT, E, H, attention=np.bool_(True)).decoder.attention is True
    with pytest.raises(ArgumentError, match="bidirectional=True gives each direction half of num_hiddens, "
                                            "and 15 is odd: give an even num_hiddens$"):
        make_seq2seq(V_SRC, V_TGT, E, 15, bidirectional=True)
    with pytest.raises(ArgumentError, match="bidirectional must be True or False, got 1$"):
        Seq2SeqEncoder(V_SRC, E, H, bidirectional=1)
    with pytest.raises(ArgumentError, match="tie_embeddings must be True or False, got 'yes'$"):
        make_seq2seq(V_SRC, V_TGT, H, H, tie_embeddings="yes")
    with pytest.raises(ArgumentError, match=f"the embedding \\({E} wide\\).*{H} hidden units: "
                                            "make embed_size equal num_hiddens$"):
        Seq2SeqDecoder(V_TGT, E, H, tie_embeddings=True)
    net = make_seq2seq(V_SRC, V_TGT, E, H, 1, 0.0)
    with pytest.raises(ArgumentError, match="expected"):
        net.params = net.params[:-1]


@pytest.mark.parametrize("rnn", ["scratch", "concise"])
def test_embedding_and_output_dropout_act_in_training_only(rng, rnn):
    """``embed_dropout`` and ``output_dropout`` change nothing outside training; in training, output dropout
    zeroes each unit of the decoder's states or scales it by 1 / (1 - p), seen through the dense layer."""
    X, Y = _tokens(rng, (3, 5), V_SRC), _tokens(rng, (3, 6), V_TGT)
    d2l.manual_seed(0)
    plain = make_seq2seq(V_SRC, V_TGT, E, H, 2, 0.0, rnn=rnn)
    d2l.manual_seed(0)
    dropped = make_seq2seq(V_SRC, V_TGT, E, H, 2, 0.0, rnn=rnn, embed_dropout=0.4, output_dropout=0.5)
    assert dropped.config()["embed_dropout"] == 0.4 and dropped.config()["output_dropout"] == 0.5
    eval_plain, eval_dropped = ops.to_numpy(plain(X, Y)[0]), ops.to_numpy(dropped(X, Y)[0])
    np.testing.assert_array_equal(eval_dropped, eval_plain)
    assert not np.allclose(ops.to_numpy(dropped.forward(dropped.params, X, Y, training=True)[0]), eval_plain)
    enc_params, _ = dropped.split(dropped.params)
    enc_eval = ops.to_numpy(dropped.encoder.forward(enc_params, X)[0])
    assert not np.allclose(ops.to_numpy(dropped.encoder.forward(enc_params, X, training=True)[0]), enc_eval)

    p, hidden = 0.5, V_TGT - 4  # fewer states than logits: the dense layer's map from states is one to one
    d2l.manual_seed(0)
    net = make_seq2seq(V_SRC, V_TGT, E, hidden, 2, 0.0, rnn=rnn, output_dropout=p)
    state = net.encode(net.params, X)
    W, b = (ops.to_numpy(w).astype(np.float64) for w in net.params[-2:])

    def states(training):
        """The decoder's last-layer states the dense layer saw: S W_hq = logits - b_q, solved exactly."""
        logits = ops.to_numpy(net.decode(net.params, Y, state, training=training)[0]).astype(np.float64)
        return np.linalg.lstsq(W.T, (logits - b).reshape(-1, V_TGT).T, rcond=None)[0].T

    S, S_dropped = states(False), states(True)  # the recurrence is the same in both: no other dropout
    kept = np.isclose(S_dropped, S / (1 - p), rtol=1e-3, atol=1e-4)
    zeroed = np.isclose(S_dropped, 0.0, atol=1e-4)
    assert np.all(kept | zeroed)
    assert 0.3 < zeroed.mean() < 0.7  # 144 units, each dropped with probability 0.5


@pytest.mark.parametrize("rnn", ["scratch", "concise"])
def test_outputs_and_gradients_equal_the_numpy_reference(rnn):
    """The same seed draws the same weights on every backend, and the model computes the same numbers."""
    rng = np.random.default_rng(3)
    X, Y = rng.integers(0, V_SRC, (3, 5)), rng.integers(0, V_TGT, (3, 5))

    def run(X, Y):
        d2l.manual_seed(0)
        net = make_seq2seq(V_SRC, V_TGT, E, H, 2, 0.0, rnn=rnn)
        Y_hat, state = net(X, Y)
        return (Y_hat,) + tuple(state)

    assert_parity(run, [X, Y])


@pytest.mark.parametrize("cell", ["gru", "lstm", "rnn"])
def test_folding_the_context_into_the_biases_is_concatenating_it(rng, cell):
    """The scratch decoder multiplies the context once per sentence; the book concatenates it to every
    step's input. Same numbers, for every cell."""
    decoder = Seq2SeqDecoder(V_TGT, E, H, 2, cell=cell)
    decoder.params = [p + 0.1 for p in decoder.params]  # non-zero biases
    encoder = Seq2SeqEncoder(V_SRC, E, H, 2, cell=cell)
    state = decoder.init_state(encoder(_tokens(rng, (3, 5), V_SRC)))
    Y_in = _tokens(rng, (3, 4), V_TGT)
    folded, _ = decoder(Y_in, state)
    emb = ops.take(decoder.params[0], ops.transpose(Y_in))
    inputs = ops.concat([emb, ops.zeros((4, 1, 1)) + state[0]], 2)
    Hs, _ = decoder.rnn.forward(decoder.params[1:-2], inputs, tuple(state[1:]))
    concatenated = ops.matmul(ops.transpose(Hs, (1, 0, 2)), decoder.params[-2]) + decoder.params[-1]
    np.testing.assert_allclose(ops.to_numpy(folded), ops.to_numpy(concatenated), rtol=1e-5, atol=1e-6)


def _softmax(z):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _attended_by_hand(net, X, X_valid_len, Y_in):
    """The one-layer attention model's logits from the module docstring's equations, in NumPy (float64)."""
    named = {n: ops.to_numpy(p).astype(np.float64) for n, p in net.named_params().items()}
    enc = {n[8:]: v for n, v in named.items() if n.startswith("encoder.")}
    dec = {n[8:]: v for n, v in named.items() if n.startswith("decoder.")}
    H_all, Hs = _encoded_by_hand(enc, X, net.encoder.bidirectional)  # (batch, T, h), (batch, h)
    valid = np.arange(X.shape[1])[None, :] < X_valid_len[:, None]
    context, S, logits = Hs, Hs, []
    for t in range(Y_in.shape[1]):
        S = _gru_step(np.concatenate([dec["embedding"][Y_in[:, t]], context], 1), S, dec)
        scores = np.einsum("bh,bth->bt", S @ dec["W_a"], H_all)
        a = _softmax(np.where(valid, scores, -np.inf))  # padding: weight exactly 0
        c = np.einsum("bt,bth->bh", a, H_all)
        logits.append(np.tanh(np.concatenate([S, c], 1) @ dec["W_c"] + dec["b_c"]) @ _W_hq(dec) + dec["b_q"])
    return np.stack(logits, 1)


@pytest.mark.parametrize("rnn", ["scratch", "concise"])
def test_attention_equals_the_equations_by_hand_and_ignores_the_padding(rng, rnn):
    net = make_seq2seq(V_SRC, V_TGT, E, H, 1, 0.0, rnn=rnn, attention=True)
    assert net.param_names[-5:] == tuple("decoder." + n for n in ("W_a", "W_c", "b_c", "W_hq", "b_q"))
    assert net.config()["attention"] is True
    net.params = [p + 0.1 * ops.from_numpy(rng.standard_normal(ops.shape(p)).astype(np.float32))
                  for p in net.params]
    X, Y_in, X_valid_len = rng.integers(0, V_SRC, (3, 5)), rng.integers(0, V_TGT, (3, 4)), np.array([5, 2, 3])
    Y_hat, _ = net(ops.from_numpy(X), ops.from_numpy(Y_in), ops.from_numpy(X_valid_len))
    np.testing.assert_allclose(ops.to_numpy(Y_hat), _attended_by_hand(net, X, X_valid_len, Y_in),
                               rtol=1e-4, atol=1e-5)
    # the encoder's states past a sentence's length change nothing: their weights are 0
    state = net.encode(net.params, ops.from_numpy(X), ops.from_numpy(X_valid_len))
    H_enc = ops.to_numpy(state[1]).copy()
    np.testing.assert_array_equal(ops.to_numpy(state[2]), np.arange(5)[None, :] < X_valid_len[:, None])
    H_enc[1, 2:] = 100.0
    moved = (state[0], ops.from_numpy(H_enc)) + tuple(state[2:])
    np.testing.assert_array_equal(ops.to_numpy(net.decode(net.params, ops.from_numpy(Y_in), moved)[0]),
                                  ops.to_numpy(Y_hat))


def test_attention_decoding_step_by_step_equals_at_once_and_beam_search_reorders_its_state(rng):
    """The state's encoder states and mask ride along each step unchanged; a beam of one is greedy search."""
    from d2lrnn.seq2seq.decode import beam_search, greedy_search

    net = make_seq2seq(V_SRC, V_TGT, E, H, 2, 0.0, attention=True)
    net.params = [p + 0.1 * ops.from_numpy(rng.standard_normal(ops.shape(p)).astype(np.float32))
                  for p in net.params]
    X, X_valid_len = _tokens(rng, (3, 6), V_SRC), ops.from_numpy(np.array([6, 2, 4]))
    Y_in = rng.integers(0, V_TGT, (3, 5))
    state = net.encode(net.params, X, X_valid_len)
    at_once, _ = net.decode(net.params, ops.from_numpy(Y_in), state)
    steps = []
    for t in range(5):
        Y, state = net.decode(net.params, ops.from_numpy(Y_in[:, t:t + 1]), state)
        steps.append(ops.to_numpy(Y)[:, 0])
    np.testing.assert_allclose(np.stack(steps, 1), ops.to_numpy(at_once), rtol=1e-5, atol=1e-6)
    greedy = greedy_search(net, X, X_valid_len, 1, 2, 6)
    assert beam_search(net, X, X_valid_len, 1, 2, 6, beam_size=1) == greedy
    assert len(set(map(tuple, greedy))) > 1  # the three sentences decode differently
    four = beam_search(net, X, X_valid_len, 1, 2, 6, beam_size=3)
    assert four == [beam_search(net, X[i:i + 1], X_valid_len[i:i + 1], 1, 2, 6, beam_size=3)[0]
                    for i in range(3)]


def test_attention_outputs_and_gradients_equal_the_numpy_reference():
    rng = np.random.default_rng(4)
    X, Y, X_valid_len = rng.integers(0, V_SRC, (3, 5)), rng.integers(0, V_TGT, (3, 5)), np.array([5, 1, 3])

    def run(X, Y, X_valid_len):
        d2l.manual_seed(0)
        net = make_seq2seq(V_SRC, V_TGT, E, H, 2, 0.0, attention=True)
        Y_hat, state = net(X, Y, X_valid_len)

        def loss(params):
            return masked_token_loss(net.forward(params, X, Y, X_valid_len)[0], Y, X_valid_len)

        _, grads = ops.value_and_grad(loss)(net.params)
        return (Y_hat,) + tuple(state) + tuple(grads)

    assert_parity(run, [X, Y, X_valid_len])


def _assert_one_layer_model_by_hand(net, rng, attention, X_valid_len):
    """The one-layer ``net``, its weights moved off their start (non-zero biases), gives the logits of the
    equations by hand for 3 source sentences of 5 words (``X_valid_len`` of them valid)."""
    net.params = [p + 0.1 * ops.from_numpy(rng.standard_normal(ops.shape(p)).astype(np.float32))
                  for p in net.params]
    X, Y_in = rng.integers(0, V_SRC, (3, 5)), rng.integers(0, V_TGT, (3, 4))
    Y_hat, _ = net(ops.from_numpy(X), ops.from_numpy(Y_in), ops.from_numpy(X_valid_len))
    by_hand = _attended_by_hand(net, X, X_valid_len, Y_in) if attention else _by_hand(net, X, Y_in)
    np.testing.assert_allclose(ops.to_numpy(Y_hat), by_hand, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("rnn", ["scratch", "concise"])
@pytest.mark.parametrize("attention", [False, True])
def test_tied_embeddings_are_the_output_layer_by_hand(rng, rnn, attention):
    """With ``tie_embeddings`` the logits are S embedding^T + b_q: no W_hq, one matrix fewer."""
    untied = make_seq2seq(V_SRC, V_TGT, H, H, 1, 0.0, rnn=rnn, attention=attention)
    d2l.manual_seed(0)
    net = make_seq2seq(V_SRC, V_TGT, H, H, 1, 0.0, rnn=rnn, attention=attention, tie_embeddings=True)
    assert net.param_names == tuple(n for n in untied.param_names if n != "decoder.W_hq")
    assert net.config()["tie_embeddings"] is True and untied.config()["tie_embeddings"] is False
    embedding = ops.to_numpy(net.named_params()["decoder.embedding"])
    bound = np.sqrt(6 / (V_TGT + H))  # it starts as the output layer it also is: Xavier, not N(0, 1)
    assert np.abs(embedding).max() <= bound and np.abs(embedding).max() > 0.8 * bound
    _assert_one_layer_model_by_hand(net, rng, attention, np.array([5, 5, 5]))


def test_tied_embeddings_and_a_bidirectional_encoder_equal_the_numpy_reference():
    """The embedding's gradient sums what it gets as the input table and as the output layer; the encoder's
    two directions and their joined state give the same numbers everywhere."""
    rng = np.random.default_rng(5)
    X, Y, X_valid_len = rng.integers(0, V_SRC, (3, 5)), rng.integers(0, V_TGT, (3, 5)), np.array([5, 2, 3])

    def run(X, Y, X_valid_len):
        d2l.manual_seed(0)
        net = make_seq2seq(V_SRC, V_TGT, H, H, 2, 0.0, attention=True, tie_embeddings=True,
                           bidirectional=True)

        def loss(params):
            return masked_token_loss(net.forward(params, X, Y, X_valid_len)[0], Y, X_valid_len)

        value, grads = ops.value_and_grad(loss)(net.params)
        return (value,) + tuple(net.encode(net.params, X, X_valid_len)) + tuple(grads)

    assert_parity(run, [X, Y, X_valid_len])


@pytest.mark.parametrize("rnn", ["scratch", "concise"])
@pytest.mark.parametrize("attention", [False, True])
def test_a_bidirectional_encoder_equals_the_equations_by_hand(rng, rnn, attention):
    """Each direction has h / 2 units; the outputs and the final state are the two side by side, so the
    decoder (its context, its first state, the attention) is the one-way model's."""
    net = make_seq2seq(V_SRC, V_TGT, E, H, 1, 0.0, rnn=rnn, attention=attention, bidirectional=True)
    shapes = {n: tuple(ops.shape(p)) for n, p in net.named_params().items()}
    assert shapes["encoder.W_hz"] == shapes["encoder.rev.W_hz"] == (H // 2, H // 2)
    assert shapes["encoder.rev.W_xz"] == (E, H // 2) and shapes["decoder.W_hz"] == (H, H)
    assert net.config()["bidirectional"] is True and net.encoder.num_hiddens == H
    _assert_one_layer_model_by_hand(net, rng, attention, np.array([5, 2, 3]))
