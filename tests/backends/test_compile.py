"""``compile``: a training step is compiled once per input shape, not once per minibatch."""

import numpy as np

import d2lrnn
import d2lrnn as d2l
import d2lrnn.lm.train
from d2lrnn import ops
from d2lrnn.seq2seq import make_seq2seq
from d2lrnn.seq2seq.decode import _Steps, greedy_search
from d2lrnn.seq2seq.train import make_eval_step, make_seq2seq_updater

COMPILERS = ("tensorflow", "jax")  # the backends whose compile builds a program (tf.function, jax.jit)


def test_a_plain_function_is_returned_where_there_is_no_compiler(backend):
    def f(x):
        return x * 2.0

    compiled = ops.compile(f)
    assert (compiled is f) == (backend not in COMPILERS)
    np.testing.assert_array_equal(ops.to_numpy(compiled(ops.ones(2))), [2.0, 2.0])


def test_training_compiles_the_step_once_per_shape(backend, no_shared_programs):
    """A language model's epochs (every minibatch the same shape) and a seq2seq run with a short last batch:
    one program for the first, two for the second, however many minibatches. The language model is a
    reader's, built from the book's functions: its parameters and each epoch's first state are made
    outside any compiled program, JAX's uncommitted arrays (a program's outputs are committed, and
    ``jax.jit`` compiled the step again for each change: three programs in two epochs)."""
    d2l.manual_seed(0)
    train_iter, vocab = d2l.load_data_time_machine(4, 5, max_tokens=400)
    net = d2l.RNNModelScratch(len(vocab), 8, d2l.try_gpu(), d2l.get_gru_params, d2l.init_gru_state, d2l.gru)
    updater = d2l.make_train_step(net, 1.0)
    d2l.train_epoch_ch8(net, train_iter, step=updater)
    d2l.train_epoch_ch8(net, train_iter, step=updater, epoch=2)
    assert len(train_iter) > 3

    d2l.manual_seed(0)
    pairs, src_vocab, tgt_vocab = d2l.load_data_nmt(16, 6, num_examples=40)  # 16 + 16 + 8 pairs
    seq2seq = make_seq2seq(len(src_vocab), len(tgt_vocab), 4, 4, 1, 0.0)
    step = make_seq2seq_updater(seq2seq, tgt_vocab)
    for _ in range(2):
        for batch in pairs:
            _, seq2seq.params, _ = step(seq2seq.params, *batch)
    if backend not in COMPILERS:
        assert not hasattr(updater._step, "compilations")
        return
    assert updater._step.compilations() == 1
    assert step._step.compilations() == 2


def _readers_gru(inputs, state, params):
    """A reader's forward function (here the book's GRU): d2lrnn cannot know what such a function reads."""
    return d2l.gru(inputs, state, params)


class _ReadersModel(d2l.StackedRNNModelScratch):
    """A reader's subclass: it may compute anything, whatever its settings."""


def test_models_of_one_structure_share_their_compiled_steps(backend, no_shared_programs):
    """A model of an earlier one's structure (a notebook's training cell run again, a resumed run) trains and
    is evaluated on the programs the earlier one's steps made: none traced again, the same numbers, dropout
    masks included (drawn from the seeded generator whichever model traced the program). Another structure,
    a reader's forward function or subclass get programs of their own."""
    d2l.manual_seed(0)
    train_iter, vocab = d2l.load_data_time_machine(4, 5, max_tokens=200)
    X, Y = next(iter(train_iter))
    V = len(vocab)

    def run(make):
        d2l.manual_seed(0)
        net = make()
        updater, evaluate = d2l.make_train_step(net, 1.0), d2lrnn.lm.train.make_eval_step(net)
        params, state, losses = net.params, net.begin_state(4), []
        for _ in range(2):
            loss, params, state = updater(params, X, Y, state)
            losses.append(float(ops.to_numpy(loss)))
        losses.append(float(ops.to_numpy(evaluate(params, X, Y, net.begin_state(4))[0])))
        return losses, [getattr(f, "compilations", lambda: None)() for f in (updater._step, evaluate)]

    def gru(hiddens=8, **kwargs):
        return lambda: d2l.StackedRNNModelScratch(V, hiddens, cell="gru", **kwargs)

    runs = {"first": run(gru()), "again": run(gru()), "wider": run(gru(9)),
            "readers": run(lambda: d2l.RNNModelScratch(V, 8, None, d2l.get_gru_params, d2l.init_gru_state,
                                                        _readers_gru)),
            "readers again": run(lambda: d2l.RNNModelScratch(V, 8, None, d2l.get_gru_params,
                                                              d2l.init_gru_state, _readers_gru)),
            "subclass": run(lambda: _ReadersModel(V, 8, cell="gru")),
            "dropout": run(gru(num_layers=2, dropout=0.5)),
            "dropout again": run(gru(num_layers=2, dropout=0.5))}
    assert runs["again"][0] == runs["first"][0]  # the same numbers from the shared programs
    assert runs["dropout again"][0] == runs["dropout"][0]  # the same masks too
    for name in ("readers", "readers again", "subclass"):  # the book's GRU, computed alike
        np.testing.assert_allclose(runs[name][0], runs["first"][0], rtol=1e-5)
    programs = {name: made for name, (_, made) in runs.items()}
    if backend not in COMPILERS:
        assert all(made == [None, None] for made in programs.values())
        return
    assert programs == {"first": [1, 1], "again": [0, 0], "wider": [1, 1], "readers": [1, 1],
                        "readers again": [1, 1], "subclass": [1, 1], "dropout": [1, 1],
                        "dropout again": [0, 0]}  # [training step, evaluation step]


def test_encoder_decoders_of_one_structure_share_their_compiled_steps(backend, no_shared_programs):
    """As for the language models: a second encoder-decoder of the first one's structure, with dropout
    between its layers (the book's) or without, trains, is evaluated and (on JAX, which compiles the
    searches' steps) translates on the first one's programs, with the same numbers."""
    d2l.manual_seed(0)
    pairs, src_vocab, tgt_vocab = d2l.load_data_nmt(8, 6, num_examples=16)
    batch = next(iter(pairs))
    bos, eos = tgt_vocab["<bos>"], tgt_vocab["<eos>"]

    def run(dropout):
        d2l.manual_seed(0)
        net = make_seq2seq(len(src_vocab), len(tgt_vocab), 4, 4, 2, dropout)
        updater, evaluate = make_seq2seq_updater(net, tgt_vocab), make_eval_step(net, tgt_vocab)
        params, losses = net.params, []
        for _ in range(2):
            loss, params, _ = updater(params, *batch)
            losses.append(float(ops.to_numpy(loss)))
        net.params = params
        losses.append(float(ops.to_numpy(evaluate(params, *batch)[0])))
        tokens = greedy_search(net, batch[0], batch[1], bos, eos, 4)
        steps = [updater._step, evaluate, _Steps.of(net).decode]
        return losses, tokens, [getattr(f, "compilations", lambda: None)() for f in steps]

    runs = {"first": run(0.0), "again": run(0.0), "dropout": run(0.5), "dropout again": run(0.5)}
    assert runs["again"][:2] == runs["first"][:2]
    assert runs["dropout again"][:2] == runs["dropout"][:2]
    programs = {name: made for name, (_, _, made) in runs.items()}
    if backend not in COMPILERS:
        assert all(made == [None, None, None] for made in programs.values())
        return
    decoding = 1 if backend == "jax" else None  # TensorFlow runs the searches' steps eagerly
    shared = 0 if backend == "jax" else None
    # [training step, evaluation step, the searches' decoder step]
    assert programs == {"first": [1, 1, decoding], "again": [0, 0, shared], "dropout": [1, 1, decoding],
                        "dropout again": [0, 0, shared]}
