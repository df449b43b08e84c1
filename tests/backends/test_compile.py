"""``compile``: a training step is compiled once per input shape, not once per minibatch."""

import numpy as np

import d2lrnn as d2l
from d2lrnn import ops
from d2lrnn.seq2seq import make_seq2seq
from d2lrnn.seq2seq.train import make_seq2seq_updater

COMPILERS = ("tensorflow", "jax")  # the backends whose compile builds a program (tf.function, jax.jit)


def test_a_plain_function_is_returned_where_there_is_no_compiler(backend):
    def f(x):
        return x * 2.0

    compiled = ops.compile(f)
    assert (compiled is f) == (backend not in COMPILERS)
    np.testing.assert_array_equal(ops.to_numpy(compiled(ops.ones(2))), [2.0, 2.0])


def test_training_compiles_the_step_once_per_shape(backend):
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
