"""Training the encoder-decoder: teacher forcing, the objective, 20 Adam steps against the NumPy reference,
continuing a run, validation loss and BLEU."""

import numpy as np
import pytest

import d2lrnn as d2l
from d2lrnn import ops, train_seq2seq
from d2lrnn.data.translation import load_data_nmt_split
from d2lrnn.errors import ArgumentError
from d2lrnn.seq2seq import make_seq2seq, teacher_forcing
from d2lrnn.seq2seq.bleu import corpus_bleu
from d2lrnn.seq2seq.loss import masked_token_loss
from d2lrnn.seq2seq.train import (
    book_bleu,
    evaluate_bleu,
    evaluate_loss,
    make_seq2seq_updater,
    references,
    seq2seq_objective,
)
from d2lrnn.training.optim import get_optimizer
from d2lrnn.training.step import Updater
from d2lrnn.training.step import clip_by_global_norm as grad_clipping


def test_teacher_forcing_is_bos_then_the_target_shifted_right():
    Y = ops.from_numpy(np.array([[5, 6, 7, 3], [8, 3, 1, 1]]))
    np.testing.assert_array_equal(ops.to_numpy(teacher_forcing(Y, 2)), [[2, 5, 6, 7], [2, 8, 3, 1]])


def test_the_objective_is_the_token_loss_of_the_teacher_forced_outputs(rng):
    net = make_seq2seq(9, 11, 4, 6, 2, 0.0)
    X, Y = ops.from_numpy(rng.integers(0, 9, (3, 5))), ops.from_numpy(rng.integers(0, 11, (3, 5)))
    X_valid_len, Y_valid_len = ops.from_numpy(np.array([5, 2, 3])), ops.from_numpy(np.array([1, 5, 4]))
    value, aux = seq2seq_objective(net, 2)(net.params, X, X_valid_len, Y, Y_valid_len)
    Y_hat, _ = net(X, teacher_forcing(Y, 2), X_valid_len)
    assert aux == ()
    assert float(ops.to_numpy(value)) == pytest.approx(
        float(ops.to_numpy(masked_token_loss(Y_hat, Y, Y_valid_len))), rel=1e-6)


def test_label_smoothing_trains_on_the_smoothed_token_loss(rng):
    """The updater's loss is the smoothed token loss of the teacher-forced outputs; evaluation's stays the
    plain cross-entropy; a weight outside [0, 1) is one line."""
    net = make_seq2seq(9, 11, 4, 6, 1, 0.0)
    X, Y = ops.from_numpy(rng.integers(0, 9, (3, 5))), ops.from_numpy(rng.integers(0, 11, (3, 5)))
    X_valid_len, Y_valid_len = ops.from_numpy(np.array([5, 2, 3])), ops.from_numpy(np.array([1, 5, 4]))
    Y_hat, _ = net(X, teacher_forcing(Y, 2), X_valid_len)
    smoothed = float(ops.to_numpy(masked_token_loss(Y_hat, Y, Y_valid_len, 0.3)))
    plain = float(ops.to_numpy(masked_token_loss(Y_hat, Y, Y_valid_len)))
    assert smoothed > plain + 0.01  # an untrained model: the uniform part costs about log 11 as well
    updater = make_seq2seq_updater(net, {"<bos>": 2}, lr=0.1, optimizer="sgd", label_smoothing=0.3)
    loss, _, _ = updater(net.params, X, X_valid_len, Y, Y_valid_len)
    assert float(ops.to_numpy(loss)) == pytest.approx(smoothed, rel=1e-5)
    for bad in [-0.1, 1.0, float("nan"), "0.1", True]:
        with pytest.raises(ArgumentError, match="label_smoothing"):
            make_seq2seq_updater(net, {"<bos>": 2}, label_smoothing=bad)


@pytest.mark.parametrize("model, attention", [("scratch", False), ("scratch", True), ("concise", False)])
def test_a_bfloat16_step_is_the_float32_step_to_bfloat16s_precision_on_torch_and_refused_elsewhere(
        rng, model, attention):
    d2l.manual_seed(0)
    net = make_seq2seq(9, 11, 8, 16, 2, 0.0, rnn=model, attention=attention)
    if d2l.backend_name() != "torch":
        with pytest.raises(ArgumentError, match=f"torch backend only, not on {d2l.backend_name()}: use "):
            make_seq2seq_updater(net, {"<bos>": 2}, precision="bfloat16")
        return
    X, Y = ops.from_numpy(rng.integers(0, 9, (3, 5))), ops.from_numpy(rng.integers(0, 11, (3, 5)))
    X_valid_len, Y_valid_len = ops.from_numpy(np.array([5, 2, 3])), ops.from_numpy(np.array([1, 5, 4]))
    batch = (X, X_valid_len, Y, Y_valid_len)
    l32, p32, _ = make_seq2seq_updater(net, {"<bos>": 2}, lr=0.1, optimizer="sgd")(net.params, *batch)
    l16, p16, _ = make_seq2seq_updater(net, {"<bos>": 2}, lr=0.1, optimizer="sgd",
                                       precision="bfloat16")(net.params, *batch)
    # as for the language model's step: bfloat16's 8 significant bits move the loss by a few 2^-9 relative
    # and the step (lr 0.1 times a gradient clipped to norm 1) by a few 2^-9 of 0.1; other bits than
    # float32's, so the products did run in bfloat16
    l32, l16 = float(ops.to_numpy(l32)), float(ops.to_numpy(l16))
    assert l16 != l32 and abs(l16 - l32) <= 2 ** -6 * l32
    for new, old in zip(p16, p32):  # the weights stay float32 (to_numpy would refuse bfloat16)
        assert ops.to_numpy(new).dtype == np.float32
        np.testing.assert_allclose(ops.to_numpy(new), ops.to_numpy(old), rtol=0, atol=0.1 * 2 ** -5)


def _adam_losses(steps=20):
    """The losses of ``steps`` Adam steps from the seed's weights on the seed's batches (no dropout: its
    masks come from each framework's own generator)."""
    d2l.manual_seed(0)
    train_iter, src_vocab, tgt_vocab = d2l.load_data_nmt(64, 10)
    net = make_seq2seq(len(src_vocab), len(tgt_vocab), 32, 32, 2, 0.0)
    updater = make_seq2seq_updater(net, tgt_vocab, lr=0.005, clip=1.0)
    losses = []
    while len(losses) < steps:
        for batch in train_iter:
            l, net.params, _ = updater(net.params, *batch)
            losses.append(float(ops.to_numpy(l)))
            if len(losses) == steps:
                break
    return np.array(losses), [ops.to_numpy(p) for p in net.params]


def test_twenty_adam_steps_follow_the_numpy_reference():
    losses, params = _adam_losses()
    with d2l.use_backend("numpy"):
        ref_losses, ref_params = _adam_losses()
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-4)
    assert losses[-1] < losses[0] - 1.0  # it learns: from log(V) ~ 5.3 down
    # Adam divides by sqrt(V): a parameter whose gradients are tiny moves by ~lr in either direction, so the
    # weights are compared more loosely than the losses they produce
    for p, r in zip(params, ref_params):
        np.testing.assert_allclose(p, r, rtol=1e-2, atol=1e-3)


def test_gradients_are_clipped_to_the_global_norm(rng):
    """One SGD step at lr 1 with clip 0.01 moves the parameters by exactly the clipped gradient."""
    d2l.manual_seed(0)
    net = make_seq2seq(9, 11, 4, 6, 1, 0.0)
    batch = (ops.from_numpy(rng.integers(0, 9, (3, 5))), ops.from_numpy(np.array([5, 2, 3])),
             ops.from_numpy(rng.integers(0, 11, (3, 5))), ops.from_numpy(np.array([1, 5, 4])))
    objective = seq2seq_objective(net, 2)
    (_, _), grads = ops.value_and_grad(objective, has_aux=True)(net.params, *batch)
    norm = np.sqrt(sum(float((ops.to_numpy(g) ** 2).sum()) for g in grads))
    assert norm > 0.01
    updater = make_seq2seq_updater(net, {"<bos>": 2}, lr=1.0, clip=0.01, optimizer="sgd")
    _, new_params, _ = updater(net.params, *batch)
    moved = np.sqrt(sum(float(((ops.to_numpy(p) - ops.to_numpy(q)) ** 2).sum())
                        for p, q in zip(net.params, new_params)))
    assert moved == pytest.approx(0.01, rel=1e-4)
    expected = grad_clipping(grads, 0.01)
    np.testing.assert_allclose(ops.to_numpy(net.params[0]) - ops.to_numpy(new_params[0]),
                               ops.to_numpy(expected[0]), rtol=1e-4, atol=1e-7)


@pytest.fixture(scope="module")
def small_split():
    d2l.manual_seed(0)
    return load_data_nmt_split(32, 8, num_examples=400, val_fraction=0.1, seed=0)


def _run(split, epochs, history=None, net=None, updater=None):
    train_iter, val_iter, src_vocab, tgt_vocab = split
    if net is None:
        d2l.manual_seed(0)
        net = make_seq2seq(len(src_vocab), len(tgt_vocab), 16, 16, 1, 0.0)
        updater = make_seq2seq_updater(net, tgt_vocab, lr=0.01)
    history = train_seq2seq(net, train_iter, 0.01, epochs, tgt_vocab, val_iter=val_iter, progress=False,
                            verbose=False, plot=False, history=history, updater=updater,
                            return_history=True)
    return net, updater, history


@pytest.fixture(scope="module")
def three_epochs(small_split):
    """One plain 3-epoch run, shared by the tests that compare another run with it: the loader's state it
    started from, its history and its final parameters (as NumPy arrays)."""
    seed_state = small_split[0].rng_state()
    net, _, history = _run(small_split, 3)
    return seed_state, history, [ops.to_numpy(p) for p in net.params]


def test_training_records_losses_bleu_and_speed_and_continues_where_it_stopped(small_split, three_epochs):
    train_iter, val_iter, _, tgt_vocab = small_split
    seed_state, history, final = three_epochs
    assert history["epoch"] == [1, 2, 3]
    assert history["train_loss"][-1] < history["train_loss"][0]
    assert history["val_loss"][-1] < history["val_loss"][0]
    assert all(0 <= b <= 1 for b in history["val_bleu"]) and min(history["tokens_per_sec"]) > 0
    # the same run in two parts: 1 epoch, then 2 more from its parameters, optimizer state and data order
    train_iter.set_rng_state(seed_state)
    net, updater, history1 = _run(small_split, 1)
    state = updater.state_dict()
    loader = train_iter.rng_state()
    updater2 = make_seq2seq_updater(net, tgt_vocab, lr=0.01)
    updater2.load_state_dict(state)
    train_iter.set_rng_state(loader)
    net, _, resumed = _run(small_split, 3, history=history1, net=net, updater=updater2)
    assert resumed["epoch"] == [1, 2, 3]
    np.testing.assert_allclose(resumed["train_loss"], history["train_loss"], rtol=1e-5)
    for p, q in zip(net.params, final):
        np.testing.assert_allclose(ops.to_numpy(p), q, rtol=1e-5, atol=1e-6)
    with pytest.raises(ArgumentError, match="already holds 3 epochs"):
        _run(small_split, 3, history=resumed, net=net, updater=updater2)


def test_averaged_weights_are_validated_and_kept_but_never_trained_from(small_split, three_epochs):
    # The encoder-decoder's params setter writes into its encoder and decoder: validating a view of it
    # holding the averages must not hand them to the model that trains on.
    train_iter, _, _, tgt_vocab = small_split
    seed_state, plain, _ = three_epochs
    train_iter.set_rng_state(seed_state)
    d2l.manual_seed(0)
    net = make_seq2seq(len(small_split[2]), len(tgt_vocab), 16, 16, 1, 0.0)
    updater = Updater(net.params, seq2seq_objective(net, tgt_vocab["<bos>"]), get_optimizer("adam", 0.01),
                      average=0.9)
    net, updater, averaged = _run(small_split, 3, net=net, updater=updater)
    np.testing.assert_allclose(averaged["train_loss"], plain["train_loss"], rtol=1e-6)
    assert averaged["val_loss"] != plain["val_loss"]  # validated with the averages
    for p, a in zip(net.params, updater.averaged_params()):  # and kept as the model at the end
        np.testing.assert_array_equal(ops.to_numpy(p), ops.to_numpy(a))


def test_validation_loss_and_bleu_are_what_they_say(small_split):
    _, val_iter, src_vocab, tgt_vocab = small_split
    d2l.manual_seed(0)
    net = make_seq2seq(len(src_vocab), len(tgt_vocab), 16, 16, 1, 0.0)
    X, X_valid_len, Y, Y_valid_len = (ops.from_numpy(a) for a in val_iter.arrays)
    value, _ = seq2seq_objective(net, tgt_vocab["<bos>"], training=False)(net.params, X, X_valid_len, Y,
                                                                          Y_valid_len)
    assert evaluate_loss(net, val_iter, tgt_vocab) == pytest.approx(float(ops.to_numpy(value)), rel=1e-5)
    preds = d2l.translate(net, [" ".join(s) for s in val_iter.source], src_vocab, tgt_vocab, 8)
    labels = [" ".join(t) for t in val_iter.target]
    assert evaluate_bleu(net, val_iter, tgt_vocab) == pytest.approx(corpus_bleu(preds, labels, 4))
    # references read back from the arrays are the target sentences (cut to num_steps - 1 words)
    val_iter.target, kept = None, val_iter.target
    try:
        read_back = [[w if w in tgt_vocab else "<unk>" for w in t[:7]] for t in kept]
        assert references(val_iter, tgt_vocab) == read_back
    finally:
        val_iter.target = kept


def test_the_books_four_sentences_are_scored_with_k2_and_the_books_weights():
    class Echo:  # translates every sentence to the book's expected French
        encoder = decoder = None

    from d2lrnn.seq2seq import train as module

    expected = module.book_sentences()[1]
    original = module.translate
    module.translate = lambda net, engs, *a, **k: list(expected[:3]) + ["je suis <unk> ."]
    try:
        mean, preds = book_bleu(Echo(), None, None, 10)
    finally:
        module.translate = original
    # the last against "je suis chez moi .": 3 of 4 words, 1 of 3 bigrams, 4 words for 5: brevity
    # penalty exp(1 - 5/4); BLEU = exp(-1/4) (3/4)^(1/2) (1/3)^(1/4) = 0.5125
    last = np.exp(-0.25) * 0.75 ** 0.5 * (1 / 3) ** 0.25
    assert preds[-1] == "je suis <unk> ." and mean == pytest.approx((3 + last) / 4)
