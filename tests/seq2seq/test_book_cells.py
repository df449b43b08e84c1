"""The seq2seq sections' own framework cells run with ``import d2lrnn as d2l``.

What a reader of the encoder-decoder and seq2seq sections writes for their framework: an encoder and a
decoder subclassing ``d2l.Encoder`` and ``d2l.Decoder`` as modules of that framework (an embedding, a
multi-layer GRU, a dense layer), ``d2l.EncoderDecoder`` over them, the section's training loop (its
masked loss, ``d2l.grad_clipping(net, 1)``, the framework's Adam, ``d2l.Accumulator``, ``d2l.Timer``
and ``d2l.Animator``), then ``d2l.train_seq2seq``, ``d2l.predict_seq2seq`` and ``d2l.bleu`` as later
sections call them. Written here from the book's API, not copied from its cells.

The reader's loop and ``d2l.train_seq2seq`` train copies of the same model from the same weights and
minibatches: the losses must agree and fall, the output shapes must be the book's.
"""

import warnings

import numpy as np
import pytest

import d2lrnn as d2l
from d2lrnn import ops

BOOK_FRAMEWORKS = ("torch", "mxnet", "tensorflow")
EMBED, HIDDENS, LAYERS, DROPOUT = 16, 32, 2, 0.1
BATCH, STEPS, LR, EPOCHS = 64, 10, 0.005, 8


def torch_reader():
    import torch
    from torch import nn

    class Seq2SeqEncoder(d2l.Encoder):
        def __init__(self, vocab_size, embed_size, num_hiddens, num_layers, dropout=0, **kwargs):
            super().__init__(**kwargs)
            self.embedding = nn.Embedding(vocab_size, embed_size)
            self.rnn = nn.GRU(embed_size, num_hiddens, num_layers, dropout=dropout)

        def forward(self, X, *args):
            X = self.embedding(X).permute(1, 0, 2)  # time steps first
            return self.rnn(X)  # (output, state)

    class Seq2SeqDecoder(d2l.Decoder):
        def __init__(self, vocab_size, embed_size, num_hiddens, num_layers, dropout=0, **kwargs):
            super().__init__(**kwargs)
            self.embedding = nn.Embedding(vocab_size, embed_size)
            self.rnn = nn.GRU(embed_size + num_hiddens, num_hiddens, num_layers, dropout=dropout)
            self.dense = nn.Linear(num_hiddens, vocab_size)

        def init_state(self, enc_outputs, *args):
            return enc_outputs[1]

        def forward(self, X, state):
            X = self.embedding(X).permute(1, 0, 2)
            context = state[-1].repeat(X.shape[0], 1, 1)  # the encoder's last layer, at every step
            output, state = self.rnn(torch.cat((X, context), 2), state)
            return self.dense(output).permute(1, 0, 2), state

    class MaskedSoftmaxCELoss(nn.CrossEntropyLoss):
        def forward(self, pred, label, valid_len):
            weights = d2l.sequence_mask(torch.ones_like(label), valid_len)
            self.reduction = "none"
            unweighted = super().forward(pred.permute(0, 2, 1), label)
            return (unweighted * weights).mean(dim=1)

    def xavier(module):
        if isinstance(module, nn.Linear):
            nn.init.xavier_uniform_(module.weight)
        if isinstance(module, nn.GRU):
            for name in module._flat_weights_names:
                if "weight" in name:
                    nn.init.xavier_uniform_(module._parameters[name])

    def train(net, data_iter, lr, num_epochs, tgt_vocab, device):
        net.apply(xavier)
        net.to(device)
        optimizer = torch.optim.Adam(net.parameters(), lr=lr)
        loss = MaskedSoftmaxCELoss()
        net.train()
        animator = d2l.Animator(xlabel="epoch", ylabel="loss", xlim=[1, num_epochs])  # drawn in notebooks
        losses = []
        for epoch in range(num_epochs):
            timer, metric = d2l.Timer(), d2l.Accumulator(2)
            for batch in data_iter:
                optimizer.zero_grad()
                X, X_valid_len, Y, Y_valid_len = [x.to(device) for x in batch]
                bos = torch.tensor([tgt_vocab["<bos>"]] * Y.shape[0], device=device).reshape(-1, 1)
                dec_input = torch.cat([bos, Y[:, :-1]], 1)
                Y_hat, _ = net(X, dec_input, X_valid_len)
                l = loss(Y_hat, Y, Y_valid_len)  # noqa: E741 - the book's name
                l.sum().backward()
                d2l.grad_clipping(net, 1)
                num_tokens = Y_valid_len.sum()
                optimizer.step()
                with torch.no_grad():
                    metric.add(l.sum(), num_tokens)
            losses.append(metric[0] / metric[1])
            animator.add(epoch + 1, (losses[-1],))
            assert timer.stop() > 0
        return losses

    def predict(net, src_sentence, src_vocab, tgt_vocab, num_steps, device):
        net.eval()
        src_tokens = src_vocab[src_sentence.lower().split(" ")] + [src_vocab["<eos>"]]
        enc_valid_len = torch.tensor([len(src_tokens)], device=device)
        src_tokens = d2l.truncate_pad(src_tokens, num_steps, src_vocab["<pad>"])
        enc_X = torch.unsqueeze(torch.tensor(src_tokens, dtype=torch.long, device=device), dim=0)
        dec_state = net.decoder.init_state(net.encoder(enc_X, enc_valid_len), enc_valid_len)
        dec_X = torch.unsqueeze(torch.tensor([tgt_vocab["<bos>"]], dtype=torch.long, device=device), dim=0)
        output = []
        for _ in range(num_steps):
            Y, dec_state = net.decoder(dec_X, dec_state)
            dec_X = Y.argmax(dim=2)
            pred = dec_X.squeeze(dim=0).type(torch.int32).item()
            if pred == tgt_vocab["<eos>"]:
                break
            output.append(pred)
        return " ".join(tgt_vocab.to_tokens(output))

    def shapes(vocab_size=10):
        encoder = Seq2SeqEncoder(vocab_size, 8, 16, 2)
        encoder.eval()
        X = torch.zeros((4, 7), dtype=torch.long)
        output, state = encoder(X)
        decoder = Seq2SeqDecoder(vocab_size, 8, 16, 2)
        decoder.eval()
        dec_out, dec_state = decoder(X, decoder.init_state(encoder(X)))
        return [tuple(t.shape) for t in (output, state, dec_out, dec_state)]

    def weights(net):
        return [p.detach().numpy().copy() for p in net.parameters()]

    def build(src_vocab, tgt_vocab):
        torch.manual_seed(0)
        return d2l.EncoderDecoder(Seq2SeqEncoder(len(src_vocab), EMBED, HIDDENS, LAYERS, DROPOUT),
                                  Seq2SeqDecoder(len(tgt_vocab), EMBED, HIDDENS, LAYERS, DROPOUT))

    return {"build": build, "train": train, "predict": predict, "shapes": shapes,
            "weights": weights, "seed": lambda: torch.manual_seed(1), "loss": MaskedSoftmaxCELoss,
            "tensor": torch.tensor}


def mxnet_reader():
    import mxnet as mx
    from mxnet import autograd, gluon, init, np, npx
    from mxnet.gluon import nn, rnn

    class Seq2SeqEncoder(d2l.Encoder):
        def __init__(self, vocab_size, embed_size, num_hiddens, num_layers, dropout=0, **kwargs):
            super().__init__(**kwargs)
            self.embedding = nn.Embedding(vocab_size, embed_size)
            self.rnn = rnn.GRU(num_hiddens, num_layers, dropout=dropout)

        def forward(self, X, *args):
            X = self.embedding(X).swapaxes(0, 1)  # time steps first
            state = self.rnn.begin_state(batch_size=X.shape[1], ctx=X.ctx)
            return self.rnn(X, state)  # (output, [state])

    class Seq2SeqDecoder(d2l.Decoder):
        def __init__(self, vocab_size, embed_size, num_hiddens, num_layers, dropout=0, **kwargs):
            super().__init__(**kwargs)
            self.embedding = nn.Embedding(vocab_size, embed_size)
            self.rnn = rnn.GRU(num_hiddens, num_layers, dropout=dropout)
            self.dense = nn.Dense(vocab_size, flatten=False)

        def init_state(self, enc_outputs, *args):
            return enc_outputs[1]

        def forward(self, X, state):
            X = self.embedding(X).swapaxes(0, 1)
            context = state[0][-1]  # the encoder's last layer, at every step
            context = np.broadcast_to(context, (X.shape[0], context.shape[0], context.shape[1]))
            output, state = self.rnn(np.concatenate((X, context), 2), state)
            return self.dense(output).swapaxes(0, 1), state

    class MaskedSoftmaxCELoss(gluon.loss.SoftmaxCELoss):
        def forward(self, pred, label, valid_len):
            weights = np.expand_dims(np.ones_like(label), axis=-1)
            weights = npx.sequence_mask(weights, valid_len, True, axis=1)
            return super().forward(pred, label, weights)

    def train(net, data_iter, lr, num_epochs, tgt_vocab, device):
        net.initialize(init.Xavier(), force_reinit=True, ctx=device)
        trainer = gluon.Trainer(net.collect_params(), "adam", {"learning_rate": lr})
        loss = MaskedSoftmaxCELoss()
        animator = d2l.Animator(xlabel="epoch", ylabel="loss", xlim=[1, num_epochs])  # drawn in notebooks
        losses = []
        for epoch in range(num_epochs):
            timer, metric = d2l.Timer(), d2l.Accumulator(2)
            for batch in data_iter:
                X, X_valid_len, Y, Y_valid_len = [x.as_in_ctx(device) for x in batch]
                bos = np.array([tgt_vocab["<bos>"]] * Y.shape[0], ctx=device).reshape(-1, 1)
                dec_input = np.concatenate([bos, Y[:, :-1]], 1)
                with autograd.record():
                    Y_hat, _ = net(X, dec_input, X_valid_len)
                    l = loss(Y_hat, Y, Y_valid_len)  # noqa: E741 - the book's name
                l.backward()
                d2l.grad_clipping(net, 1)
                num_tokens = Y_valid_len.sum()
                trainer.step(num_tokens)
                metric.add(l.sum(), num_tokens)
            losses.append(metric[0] / metric[1])
            animator.add(epoch + 1, (losses[-1],))
            assert timer.stop() > 0
        return losses

    def predict(net, src_sentence, src_vocab, tgt_vocab, num_steps, device):
        src_tokens = src_vocab[src_sentence.lower().split(" ")] + [src_vocab["<eos>"]]
        enc_valid_len = np.array([len(src_tokens)], ctx=device)
        src_tokens = d2l.truncate_pad(src_tokens, num_steps, src_vocab["<pad>"])
        enc_X = np.expand_dims(np.array(src_tokens, ctx=device), axis=0)
        dec_state = net.decoder.init_state(net.encoder(enc_X, enc_valid_len), enc_valid_len)
        dec_X = np.expand_dims(np.array([tgt_vocab["<bos>"]], ctx=device), axis=0)
        output = []
        for _ in range(num_steps):
            Y, dec_state = net.decoder(dec_X, dec_state)
            dec_X = Y.argmax(axis=2)
            pred = dec_X.squeeze(axis=0).astype("int32").item()
            if pred == tgt_vocab["<eos>"]:
                break
            output.append(pred)
        return " ".join(tgt_vocab.to_tokens(output))

    def shapes(vocab_size=10):
        encoder = Seq2SeqEncoder(vocab_size, 8, 16, 2)
        encoder.initialize()
        X = np.zeros((4, 7))
        output, state = encoder(X)
        decoder = Seq2SeqDecoder(vocab_size, 8, 16, 2)
        decoder.initialize()
        dec_out, dec_state = decoder(X, decoder.init_state(encoder(X)))
        return [tuple(t.shape) for t in (output, state[0], dec_out, dec_state[0])]

    def weights(net):
        return [p.data().asnumpy().copy() for p in net.collect_params().values()]

    def build(src_vocab, tgt_vocab):
        return d2l.EncoderDecoder(Seq2SeqEncoder(len(src_vocab), EMBED, HIDDENS, LAYERS, DROPOUT),
                                  Seq2SeqDecoder(len(tgt_vocab), EMBED, HIDDENS, LAYERS, DROPOUT))

    return {"build": build, "train": train, "predict": predict, "shapes": shapes,
            "weights": weights, "seed": lambda: mx.random.seed(1), "loss": MaskedSoftmaxCELoss,
            "tensor": np.array}


def tensorflow_reader():
    import tensorflow as tf

    def stacked_gru(num_hiddens, num_layers, dropout):
        cells = [tf.keras.layers.GRUCell(num_hiddens, dropout=dropout) for _ in range(num_layers)]
        return tf.keras.layers.RNN(tf.keras.layers.StackedRNNCells(cells), return_sequences=True,
                                   return_state=True)

    class Seq2SeqEncoder(d2l.Encoder):
        def __init__(self, vocab_size, embed_size, num_hiddens, num_layers, dropout=0, **kwargs):
            super().__init__(**kwargs)
            self.embedding = tf.keras.layers.Embedding(vocab_size, embed_size)
            self.rnn = stacked_gru(num_hiddens, num_layers, dropout)

        def call(self, X, *args, **kwargs):
            output = self.rnn(self.embedding(X), **kwargs)  # batch first
            return output[0], output[1:]

    class Seq2SeqDecoder(d2l.Decoder):
        def __init__(self, vocab_size, embed_size, num_hiddens, num_layers, dropout=0, **kwargs):
            super().__init__(**kwargs)
            self.embedding = tf.keras.layers.Embedding(vocab_size, embed_size)
            self.rnn = stacked_gru(num_hiddens, num_layers, dropout)
            self.dense = tf.keras.layers.Dense(vocab_size)

        def init_state(self, enc_outputs, *args):
            return enc_outputs[1]

        def call(self, X, state, **kwargs):
            X = self.embedding(X)
            # A change the book's cell needs on Keras 3 (TensorFlow 2.16 and later), d2lrnn or not: a
            # stacked cell's state comes back as one list per layer, so the last layer's H is state[-1][0].
            context = tf.repeat(tf.expand_dims(state[-1][0], axis=1), repeats=X.shape[1], axis=1)
            rnn_output = self.rnn(tf.concat((X, context), axis=2), state, **kwargs)
            return self.dense(rnn_output[0]), rnn_output[1:]

    def train(net, data_iter, lr, num_epochs, tgt_vocab, device):
        optimizer = tf.keras.optimizers.Adam(learning_rate=lr)
        animator = d2l.Animator(xlabel="epoch", ylabel="loss", xlim=[1, num_epochs])  # drawn in notebooks
        losses = []
        for epoch in range(num_epochs):
            timer, metric = d2l.Timer(), d2l.Accumulator(2)
            for batch in data_iter:
                X, X_valid_len, Y, Y_valid_len = list(batch)
                # The one change from the book's cell: d2lrnn's batches hold int64 indices, the book's the
                # int32 that tf.constant makes of Python ints, so <bos> is made in the batch's dtype.
                bos = tf.reshape(tf.constant([tgt_vocab["<bos>"]] * Y.shape[0], dtype=Y.dtype), shape=(-1, 1))
                dec_input = tf.concat([bos, Y[:, :-1]], 1)
                with tf.GradientTape() as tape:
                    Y_hat, _ = net(X, dec_input, X_valid_len, training=True)
                    l = d2l.MaskedSoftmaxCELoss(Y_valid_len)(Y, Y_hat)  # noqa: E741 - the book's name
                gradients = tape.gradient(l, net.trainable_variables)
                gradients = d2l.grad_clipping(gradients, 1)
                optimizer.apply_gradients(zip(gradients, net.trainable_variables))
                num_tokens = tf.reduce_sum(Y_valid_len).numpy()
                metric.add(tf.reduce_sum(l), num_tokens)
            losses.append(metric[0] / metric[1])
            animator.add(epoch + 1, (losses[-1],))
            assert timer.stop() > 0
        return losses

    def predict(net, src_sentence, src_vocab, tgt_vocab, num_steps, device):
        src_tokens = src_vocab[src_sentence.lower().split(" ")] + [src_vocab["<eos>"]]
        enc_valid_len = tf.constant([len(src_tokens)])
        src_tokens = d2l.truncate_pad(src_tokens, num_steps, src_vocab["<pad>"])
        enc_X = tf.expand_dims(src_tokens, axis=0)
        dec_state = net.decoder.init_state(net.encoder(enc_X, enc_valid_len, training=False), enc_valid_len)
        dec_X = tf.expand_dims(tf.constant([tgt_vocab["<bos>"]]), axis=0)
        output = []
        for _ in range(num_steps):
            Y, dec_state = net.decoder(dec_X, dec_state, training=False)
            dec_X = tf.argmax(Y, axis=2)
            pred = tf.squeeze(dec_X, axis=0)
            if pred == tgt_vocab["<eos>"]:
                break
            output.append(int(pred.numpy()[0]))
        return " ".join(tgt_vocab.to_tokens(output))

    def shapes(vocab_size=10):
        encoder = Seq2SeqEncoder(vocab_size, 8, 16, 2)
        X = tf.zeros((4, 7))
        output, state = encoder(X, training=False)
        decoder = Seq2SeqDecoder(vocab_size, 8, 16, 2)
        dec_out, dec_state = decoder(X, decoder.init_state(encoder(X, training=False)), training=False)
        return [tuple(t.shape) for t in (output, state[0][0], dec_out, dec_state[0][0])] + [len(state),
                                                                                          len(dec_state)]

    def weights(net):
        return [v.numpy().copy() for v in net.trainable_variables]

    def build(src_vocab, tgt_vocab):
        return d2l.EncoderDecoder(Seq2SeqEncoder(len(src_vocab), EMBED, HIDDENS, LAYERS, DROPOUT),
                                  Seq2SeqDecoder(len(tgt_vocab), EMBED, HIDDENS, LAYERS, DROPOUT))

    def same_start(net, book, batch):  # Keras draws weights (and dropout seeds) as it builds each model
        X, X_valid_len, Y, _ = batch
        tf.keras.utils.set_random_seed(0)
        for model in (net, book):
            model(X, Y, X_valid_len, training=False)
        book.set_weights(net.get_weights())
        tf.keras.utils.set_random_seed(1)

    return {"build": build, "train": train, "predict": predict, "shapes": shapes, "weights": weights,
            "seed": lambda: None, "same_start": same_start, "loss": lambda: d2l.MaskedSoftmaxCELoss(),
            "tensor": tf.constant,
            "book_shapes": [(4, 7, 16), (4, 16), (4, 7, 10), (4, 16), 2, 2]}


READERS = {"torch": torch_reader, "mxnet": mxnet_reader, "tensorflow": tensorflow_reader}


@pytest.fixture
def reader(backend):
    if backend not in BOOK_FRAMEWORKS:
        pytest.skip(f"the book's cells for this chapter (d2l-zh 2.x) are PyTorch, MXNet and TensorFlow: "
                    f"none are written for {backend}")
    if backend != "mxnet":
        yield READERS[backend]()
        return
    from mxnet import npx

    npx.set_np()  # the book's MXNet cells compute on mxnet.np arrays
    yield READERS[backend]()
    npx.set_np(shape=True, array=False)  # d2lrnn's backend keeps NumPy shapes on


@pytest.fixture(scope="module")
def data():
    return d2l.load_data_nmt(BATCH, STEPS, num_examples=600)


def test_the_readers_classes_are_framework_modules_with_the_books_shapes(reader):
    # the book's shapes: encoder outputs (steps, batch, hiddens), state (layers, batch, hiddens), decoder
    # outputs (batch, steps, vocab); Keras keeps the batch first and a state per layer
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        shapes = reader["shapes"]()
    assert shapes == reader.get("book_shapes", [(7, 4, 16), (2, 4, 16), (4, 7, 10), (2, 4, 16)])
    # d2l's base classes leave the shapes to the first call (Keras 3 cannot trace the book's *args)
    assert not [w for w in caught if "unbuilt state" in str(w.message)], [str(w.message) for w in caught]


def test_the_masked_loss_gives_the_books_numbers_on_framework_tensors(reader):
    tensor = reader["tensor"]
    pred, label, valid_len = np.ones((3, 4, 10), np.float32), np.ones((3, 4), np.int64), np.array([4, 2, 0])
    expected = [np.log(10), np.log(10) / 2, 0.0]  # uniform over 10 words, 4 then 2 then 0 of 4 steps counted
    got = d2l.MaskedSoftmaxCELoss()(tensor(pred), tensor(label), tensor(valid_len))
    np.testing.assert_allclose(ops.to_numpy(got), expected, rtol=1e-6, atol=1e-7)
    # the reader's own loss on the framework's: Gluon's float32 log-softmax is off by 1.3e-6 relative here
    got = reader["loss"]()(tensor(pred), tensor(label), tensor(valid_len))
    np.testing.assert_allclose(ops.to_numpy(got), expected, rtol=1e-5, atol=1e-7)
    masked = d2l.sequence_mask(tensor(np.array([[1, 2, 3], [4, 5, 6]])), tensor(np.array([1, 2])))
    np.testing.assert_array_equal(ops.to_numpy(masked), [[1, 0, 0], [4, 5, 0]])


#: How closely d2l.train_seq2seq's losses follow the book's loop, per framework.
LOSS_RTOL = {
    # the same model, masks, Adam and minibatches: float32 rounding, measured <= 5.3e-8 relative
    "torch": 1e-6,
    # Gluon's Trainer divides the gradient by the batch's token count before its Adam (so Adam's eps
    # weighs ~400 times more) and adds eps to sqrt(V) before the bias correction: measured 2.3% apart
    # over the 8 epochs (4e-4 with trainer.step(1)), both falling alike
    "mxnet": 0.05,
    # Keras's Adam adds eps = 1e-7 to sqrt(V) before the bias correction, d2lrnn's 1e-8 after it (as
    # PyTorch's): weights whose gradients are below ~1e-6 take other first steps (the same forward pass
    # and gradients measured); and Keras draws each model's dropout masks from its own seed generators.
    # Measured 0.9% apart (0.24% without dropout)
    "tensorflow": 0.05,
}


def test_the_sections_loop_and_d2l_train_seq2seq_train_the_readers_model_alike(backend, reader, data):
    train_iter, src_vocab, tgt_vocab = data
    net, book = reader["build"](src_vocab, tgt_vocab), reader["build"](src_vocab, tgt_vocab)
    device = d2l.try_gpu()
    if "same_start" in reader:
        with d2l.backends.generator_state_kept():
            reader["same_start"](net, book, next(iter(train_iter)))

    reader["seed"]()  # the framework's generator: the Xavier draws and the dropout masks
    d2l.manual_seed(0)  # d2lrnn's: the minibatches' order
    expected = reader["train"](book, train_iter, LR, EPOCHS, tgt_vocab, device)
    reader["seed"]()
    d2l.manual_seed(0)
    history = d2l.train_seq2seq(net, train_iter, LR, EPOCHS, tgt_vocab, device, progress=False, plot=False,
                                verbose=False)
    np.testing.assert_allclose(history["train_loss"], expected, rtol=LOSS_RTOL[backend])
    assert expected[-1] < 0.6 * expected[0] and history["train_loss"][-1] < 0.6 * history["train_loss"][0]
    if backend == "torch":  # the same Adam: the same weights
        for mine, theirs in zip(reader["weights"](net), reader["weights"](book)):
            # Adam divides by sqrt(V), so float32 rounding in a tiny gradient moves a weight by up to
            # ~lr * 1e-3: measured <= 2.1e-6 absolute
            np.testing.assert_allclose(mine, theirs, rtol=1e-4, atol=1e-5)

    engs, fras = d2l.seq2seq.train.book_sentences()
    for eng, fra in zip(engs, fras):
        translation, attention = d2l.predict_seq2seq(net, eng, src_vocab, tgt_vocab, STEPS, device)
        assert translation == reader["predict"](net, eng, src_vocab, tgt_vocab, STEPS, device)
        assert attention == [] and 0 <= d2l.bleu(translation, fra, k=2) <= 1


def test_a_framework_style_subclass_is_a_module_or_says_how_to_write_it(backend):
    """``forward(self, X, ...)`` without ``params`` is the book's framework style: a module of the
    backend's framework, or on the backends without modules one line naming d2lrnn's form."""
    if backend not in BOOK_FRAMEWORKS:
        with pytest.raises(d2l.ArgumentError) as err:
            class Encoder(d2l.Encoder):
                def forward(self, X, *args):
                    return X
        assert str(err.value) == (f"d2l.Encoder subclasses on the {backend} backend are written d2lrnn's "
                                  f"way, with forward(self, params, X, ...) (the {backend} backend has no "
                                  "framework modules)")
        return

    class Encoder(d2l.Encoder):
        def call(self, X, *args, **kwargs):  # Keras's name; other frameworks' modules call forward
            return X

        forward = call

    class Decoder(d2l.Decoder):
        def init_state(self, enc_outputs, *args):
            return enc_outputs

        def call(self, X, state, **kwargs):
            return X + state, state

        forward = call

    net = d2l.EncoderDecoder(Encoder(), Decoder())
    hooks = ops.in_place_hooks()
    assert all(hooks.is_module(m) for m in (net, net.encoder, net.decoder))
    assert not isinstance(net, d2l.seq2seq.model.EncoderDecoder)
    Y, state = net(d2l.ones((2, 3)), d2l.ones((2, 3)))
    np.testing.assert_array_equal(ops.to_numpy(Y), np.full((2, 3), 2.0))
    # d2lrnn's own parts keep d2lrnn's own functional EncoderDecoder on every backend
    functional = d2l.make_seq2seq(10, 10, 4, 4, 1)
    joined = d2l.EncoderDecoder(functional.encoder, functional.decoder)
    assert isinstance(joined, d2l.seq2seq.model.EncoderDecoder) and not hooks.is_module(joined)
