"""The encoder-decoder and seq2seq sections' framework forms, run with ``import d2lrnn as d2l``.

A reader of those sections (d2l-zh 2.x) writes, in their framework, an encoder and a decoder that
subclass ``d2l.Encoder`` and ``d2l.Decoder`` as modules of that framework, joins them with
``d2l.EncoderDecoder(encoder, decoder)``, trains them with their own loop, then hands them to
``d2l.train_seq2seq``, ``d2l.predict_seq2seq`` and ``d2l.bleu`` as later sections do. The reader here is
written for these tests (the book is read for its call forms only): their decoder keeps the encoder's
top-layer summary beside its recurrent state (the book's reads its own top layer again at every step),
their masked loss is their own, and their loop is one function over a per-framework step. What reaches
``d2l`` is what the book's cells pass: the modules, ``d2l.grad_clipping(net, 1)`` after the backward
pass (TensorFlow: ``d2l.grad_clipping(grads, 1)`` and ``d2l.MaskedSoftmaxCELoss(valid_len)(label,
pred)``), the framework's Adam, ``d2l.Accumulator``, ``d2l.Timer``, ``d2l.Animator`` and
``d2l.truncate_pad``.

The reader's loop and ``d2l.train_seq2seq`` train copies of the same model from the same weights and
minibatches: the losses must agree and fall, the translations must be the reader's own greedy ones.
"""

import math
import warnings

import numpy as np
import pytest

import d2lrnn as d2l
from d2lrnn import ops

BOOK_FRAMEWORKS = ("torch", "mxnet", "tensorflow", "paddle")
EMBED, HIDDENS, LAYERS, DROPOUT = 8, 16, 2, 0.1
BATCH, STEPS, LR, EPOCHS, PAIRS = 64, 6, 0.04, 7, 128  # 2 minibatches an epoch
#: The book's four sentences and the French it expects.
SENTENCES = [("go .", "va !"), ("i lost .", "j'ai perdu ."), ("he's calm .", "il est calme ."),
             ("i'm home .", "je suis chez moi .")]


def fit(net, data_iter, num_epochs, step):
    """The reader's loop: ``step(batch)`` trains on one minibatch and returns (the sum of its sentences'
    losses, its target tokens); the loss per token of every epoch, drawn as the book draws it."""
    curve = d2l.Animator(xlabel="epoch", ylabel="loss", xlim=[1, num_epochs])  # drawn in notebooks only
    per_token = []
    for epoch in range(num_epochs):
        clock, sums = d2l.Timer(), d2l.Accumulator(2)
        for batch in data_iter:
            sums.add(*step(batch))
        per_token.append(sums[0] / sums[1])
        curve.add(epoch + 1, (per_token[-1],))
        assert clock.stop() >= 0
    return per_token


def source_ids(sentence, src_vocab, num_steps):
    ids = src_vocab[sentence.lower().split(" ")] + [src_vocab["<eos>"]]
    return d2l.truncate_pad(ids, num_steps, src_vocab["<pad>"]), len(ids)


def greedy_translation(net, sentence, src_vocab, tgt_vocab, num_steps, array, argmax=None, **call):
    """The reader's greedy decoding of one sentence: ``array(data)`` makes their framework's tensor,
    ``argmax(row)`` picks a token (the framework's ``row.argmax()`` if not given), ``call`` goes to every
    module call (Keras: ``training=False``)."""
    ids, length = source_ids(sentence, src_vocab, num_steps)
    valid_len = array([length])
    state = net.decoder.init_state(net.encoder(array([ids]), valid_len, **call), valid_len)
    words, token = [], tgt_vocab["<bos>"]
    for _ in range(num_steps):
        logits, state = net.decoder(array([[token]]), state, **call)
        token = int(logits[0, -1].argmax()) if argmax is None else argmax(logits[0, -1])
        if token == tgt_vocab["<eos>"]:
            break
        words.append(token)
    return " ".join(tgt_vocab.to_tokens(words))


class TorchReader:
    """PyTorch: ``nn.Module`` subclasses, Xavier weights, ``torch.optim.Adam``."""

    def __init__(self):
        import torch
        from torch import nn

        self.torch, self.device, self.tensor = torch, d2l.try_gpu(), torch.tensor

        class GRUEncoder(d2l.Encoder):
            """The source embedded, then a stacked GRU over it, the steps first as ``nn.GRU`` reads them."""

            def __init__(self, vocab_size, embed_size, num_hiddens, num_layers, dropout=0.0):
                super().__init__()
                self.embed = nn.Embedding(vocab_size, embed_size)
                self.gru = nn.GRU(embed_size, num_hiddens, num_layers, dropout=dropout)

            def forward(self, X, *args):
                return self.gru(self.embed(X).transpose(0, 1))  # (outputs, final states)

        class ContextDecoder(d2l.Decoder):
            """Starts from the encoder's final states and reads the encoder's top layer (the context),
            kept beside the recurrent state, with every target token."""

            def __init__(self, vocab_size, embed_size, num_hiddens, num_layers, dropout=0.0):
                super().__init__()
                self.embed = nn.Embedding(vocab_size, embed_size)
                self.gru = nn.GRU(embed_size + num_hiddens, num_hiddens, num_layers, dropout=dropout)
                self.readout = nn.Linear(num_hiddens, vocab_size)

            def init_state(self, enc_outputs, *args):
                finals = enc_outputs[1]
                return finals, finals[-1]

            def forward(self, X, state):
                hidden, context = state
                tokens = self.embed(X).transpose(0, 1)
                tokens = torch.cat([tokens, context.expand(tokens.shape[0], -1, -1)], dim=-1)
                outputs, hidden = self.gru(tokens, hidden)
                return self.readout(outputs).transpose(0, 1), (hidden, context)

        class MaskedCE(nn.CrossEntropyLoss):
            """Per sentence, the mean over its steps of the cross-entropy, the padding's counted as zero."""

            def __init__(self):
                super().__init__(reduction="none")

            def forward(self, pred, label, valid_len):
                per_token = super().forward(pred.transpose(1, 2), label)
                counted = torch.arange(label.shape[1], device=label.device)[None, :] < valid_len[:, None]
                return (per_token * counted).mean(dim=1)

        self.Encoder, self.Decoder, self.Loss = GRUEncoder, ContextDecoder, MaskedCE

    def build(self, src_vocab, tgt_vocab):
        self.torch.manual_seed(0)
        return d2l.EncoderDecoder(self.Encoder(len(src_vocab), EMBED, HIDDENS, LAYERS, DROPOUT),
                                  self.Decoder(len(tgt_vocab), EMBED, HIDDENS, LAYERS, DROPOUT))

    def same_start(self, net, twin, train_iter):
        """Both start from the same weights (``build`` seeds them) and draw the same Xavier weights and
        dropout masks from torch's generator, which d2l.manual_seed seeds."""

    def train(self, net, data_iter, lr, num_epochs, tgt_vocab, device):
        torch, nn = self.torch, self.torch.nn

        def xavier(module):  # the book's starting weights: Xavier-uniform for the dense and GRU weights
            if type(module) in (nn.Linear, nn.GRU):
                for name, weight in module.named_parameters(recurse=False):
                    if name.startswith("weight"):
                        nn.init.xavier_uniform_(weight)

        net.apply(xavier)
        net.to(device)
        adam, loss = torch.optim.Adam(net.parameters(), lr=lr), self.Loss()
        net.train()

        def step(batch):
            src, src_len, tgt, tgt_len = (t.to(device) for t in batch)
            bos = torch.full((tgt.shape[0], 1), tgt_vocab["<bos>"], dtype=tgt.dtype, device=device)
            logits, _ = net(src, torch.cat([bos, tgt[:, :-1]], dim=1), src_len)
            per_sentence = loss(logits, tgt, tgt_len)
            adam.zero_grad()
            per_sentence.sum().backward()
            d2l.grad_clipping(net, 1)
            adam.step()
            with torch.no_grad():
                return per_sentence.sum(), tgt_len.sum()

        return fit(net, data_iter, num_epochs, step)

    def translate(self, net, sentence, src_vocab, tgt_vocab, num_steps, device):
        net.eval()
        return greedy_translation(net, sentence, src_vocab, tgt_vocab, num_steps,
                                  lambda data: self.torch.tensor(data, device=device))

    def predict(self, net, sentence, src_vocab, tgt_vocab, num_steps):
        return d2l.predict_seq2seq(net, sentence, src_vocab, tgt_vocab, num_steps, self.device)

    def shapes(self, vocab_size=10):
        encoder, decoder = self.Encoder(vocab_size, 8, 16, 2), self.Decoder(vocab_size, 8, 16, 2)
        encoder.eval()
        decoder.eval()
        X = self.torch.zeros((4, 7), dtype=self.torch.long)
        outputs, finals = encoder(X)
        logits, (hidden, context) = decoder(X, decoder.init_state(encoder(X)))
        return [tuple(t.shape) for t in (outputs, finals, logits, hidden, context)]

    def weights(self, net):
        return [p.detach().cpu().numpy().copy() for p in net.parameters()]


class GluonReader:
    """MXNet: Gluon ``Block`` subclasses on ``mxnet.np`` arrays, ``init.Xavier()``, a Trainer's Adam."""

    def __init__(self):
        from mxnet import gluon, np
        from mxnet.gluon import nn, rnn

        self.device, self.tensor = d2l.try_gpu(), np.array

        class GRUEncoder(d2l.Encoder):
            """The source embedded, then a stacked GRU over it, the steps first as Gluon's GRU reads them."""

            def __init__(self, vocab_size, embed_size, num_hiddens, num_layers, dropout=0.0, **kwargs):
                super().__init__(**kwargs)
                self.embed = nn.Embedding(vocab_size, embed_size)
                self.gru = rnn.GRU(num_hiddens, num_layers, dropout=dropout)

            def forward(self, X, *args):
                tokens = self.embed(X).swapaxes(0, 1)
                return self.gru(tokens, self.gru.begin_state(batch_size=tokens.shape[1], ctx=tokens.ctx))

        class ContextDecoder(d2l.Decoder):
            """Starts from the encoder's final states and reads the encoder's top layer (the context),
            kept beside the recurrent state, with every target token."""

            def __init__(self, vocab_size, embed_size, num_hiddens, num_layers, dropout=0.0, **kwargs):
                super().__init__(**kwargs)
                self.embed = nn.Embedding(vocab_size, embed_size)
                self.gru = rnn.GRU(num_hiddens, num_layers, dropout=dropout)
                self.readout = nn.Dense(vocab_size, flatten=False)

            def init_state(self, enc_outputs, *args):
                finals = enc_outputs[1]
                return finals, finals[0][-1]

            def forward(self, X, state):
                finals, context = state
                tokens = self.embed(X).swapaxes(0, 1)
                every_step = np.broadcast_to(context, (tokens.shape[0],) + context.shape)
                outputs, finals = self.gru(np.concatenate([tokens, every_step], axis=-1), finals)
                return self.readout(outputs).swapaxes(0, 1), (finals, context)

        class MaskedCE(gluon.loss.SoftmaxCELoss):
            """Per sentence, the mean over its steps of the cross-entropy, the padding's weighted zero."""

            def forward(self, pred, label, valid_len):
                steps = np.arange(label.shape[1], ctx=label.ctx)
                counted = (steps[None, :] < valid_len.astype("float32")[:, None]).astype("float32")
                return super().forward(pred, label, np.expand_dims(counted, -1))

        self.Encoder, self.Decoder, self.Loss = GRUEncoder, ContextDecoder, MaskedCE

    def build(self, src_vocab, tgt_vocab):
        return d2l.EncoderDecoder(self.Encoder(len(src_vocab), EMBED, HIDDENS, LAYERS, DROPOUT),
                                  self.Decoder(len(tgt_vocab), EMBED, HIDDENS, LAYERS, DROPOUT))

    def same_start(self, net, twin, train_iter):
        """Both draw all their weights (Xavier) and dropout masks from MXNet's generator, which
        d2l.manual_seed seeds."""

    def train(self, net, data_iter, lr, num_epochs, tgt_vocab, device):
        from mxnet import autograd, gluon, init, np

        net.initialize(init.Xavier(), force_reinit=True, ctx=device)
        adam = gluon.Trainer(net.collect_params(), "adam", {"learning_rate": lr})
        loss = self.Loss()

        def step(batch):
            src, src_len, tgt, tgt_len = (t.as_in_ctx(device) for t in batch)
            bos = np.full((tgt.shape[0], 1), tgt_vocab["<bos>"], ctx=device).astype(tgt.dtype)
            with autograd.record():
                logits, _ = net(src, np.concatenate([bos, tgt[:, :-1]], axis=1), src_len)
                per_sentence = loss(logits, tgt, tgt_len)
            per_sentence.backward()
            d2l.grad_clipping(net, 1)
            tokens = tgt_len.sum()
            adam.step(tokens)  # the book's: Gluon divides the gradient by the token count
            return per_sentence.sum(), tokens

        return fit(net, data_iter, num_epochs, step)

    def translate(self, net, sentence, src_vocab, tgt_vocab, num_steps, device):
        from mxnet import np

        return greedy_translation(net, sentence, src_vocab, tgt_vocab, num_steps,
                                  lambda data: np.array(data, ctx=device))

    def predict(self, net, sentence, src_vocab, tgt_vocab, num_steps):
        return d2l.predict_seq2seq(net, sentence, src_vocab, tgt_vocab, num_steps, self.device)

    def shapes(self, vocab_size=10):
        from mxnet import np

        encoder, decoder = self.Encoder(vocab_size, 8, 16, 2), self.Decoder(vocab_size, 8, 16, 2)
        encoder.initialize()
        decoder.initialize()
        X = np.zeros((4, 7))
        outputs, finals = encoder(X)
        logits, (hidden, context) = decoder(X, decoder.init_state(encoder(X)))
        return [tuple(t.shape) for t in (outputs, finals[0], logits, hidden[0], context)]

    def weights(self, net):
        return [p.data().asnumpy().copy() for p in net.collect_params().values()]


class KerasReader:
    """TensorFlow: Keras layer subclasses (``call``, ``training=``), a ``GradientTape``, Keras's Adam."""

    def __init__(self):
        import tensorflow as tf

        self.tf, self.device, self.tensor = tf, d2l.try_gpu(), tf.constant
        self.keras3 = keras3 = hasattr(tf.keras.layers.Layer, "stateless_call")

        def stacked_gru(num_hiddens, num_layers, dropout):
            cells = [tf.keras.layers.GRUCell(num_hiddens, dropout=dropout) for _ in range(num_layers)]
            return tf.keras.layers.RNN(tf.keras.layers.StackedRNNCells(cells), return_sequences=True,
                                       return_state=True)

        class GRUEncoder(d2l.Encoder):
            """The source embedded, then a stacked GRU over it (Keras reads the batch first)."""

            def __init__(self, vocab_size, embed_size, num_hiddens, num_layers, dropout=0.0, **kwargs):
                super().__init__(**kwargs)
                self.embed = tf.keras.layers.Embedding(vocab_size, embed_size)
                self.gru = stacked_gru(num_hiddens, num_layers, dropout)

            def call(self, X, *args, **kwargs):
                outputs, *finals = self.gru(self.embed(X), **kwargs)
                return outputs, finals  # Keras 3: one list of states per layer, Keras 2: one state each

        class ContextDecoder(d2l.Decoder):
            """Starts from the encoder's final states and reads the encoder's top layer (the context),
            kept beside the recurrent state, with every target token."""

            def __init__(self, vocab_size, embed_size, num_hiddens, num_layers, dropout=0.0, **kwargs):
                super().__init__(**kwargs)
                self.embed = tf.keras.layers.Embedding(vocab_size, embed_size)
                self.gru = stacked_gru(num_hiddens, num_layers, dropout)
                self.readout = tf.keras.layers.Dense(vocab_size)

            def init_state(self, enc_outputs, *args):
                finals = enc_outputs[1]
                return finals, finals[-1][0] if keras3 else finals[-1]  # Keras 2's states are flat

            def call(self, X, state, **kwargs):
                finals, context = state
                tokens = self.embed(X)
                every_step = tf.repeat(tf.expand_dims(context, 1), repeats=tokens.shape[1], axis=1)
                outputs, *finals = self.gru(tf.concat([tokens, every_step], axis=-1), finals, **kwargs)
                return self.readout(outputs), (finals, context)

        class MaskedCE(tf.keras.losses.Loss):
            """Keras's form, as the book's TensorFlow cells write theirs: the valid lengths first, then
            ``loss(label, pred)``; per sentence, the mean over its steps, the padding's counted as zero."""

            def __init__(self, valid_len):
                super().__init__(reduction="none")
                self.valid_len = valid_len

            def call(self, label, pred):
                per_token = tf.keras.losses.sparse_categorical_crossentropy(label, pred, from_logits=True)
                steps = tf.range(tf.shape(label)[1], dtype=self.valid_len.dtype)
                counted = tf.cast(steps[None, :] < self.valid_len[:, None], per_token.dtype)
                return tf.reduce_mean(per_token * counted, axis=1)

        self.Encoder, self.Decoder, self.Loss = GRUEncoder, ContextDecoder, MaskedCE

    def build(self, src_vocab, tgt_vocab):
        self.tf.keras.utils.set_random_seed(0)  # the seeds of the dropout layers' generators, drawn here
        return d2l.EncoderDecoder(self.Encoder(len(src_vocab), EMBED, HIDDENS, LAYERS, DROPOUT),
                                  self.Decoder(len(tgt_vocab), EMBED, HIDDENS, LAYERS, DROPOUT))

    def same_start(self, net, twin, train_iter):
        """Keras draws the weights as it builds each model (at its first call): build both, copy."""
        X, X_valid_len, Y, _ = next(iter(train_iter))
        self.tf.keras.utils.set_random_seed(0)
        for model in (net, twin):
            model(X, Y, X_valid_len, training=False)
        twin.set_weights(net.get_weights())

    def train(self, net, data_iter, lr, num_epochs, tgt_vocab, device):
        tf = self.tf
        adam = tf.keras.optimizers.Adam(learning_rate=lr)

        def step(batch):
            src, src_len, tgt, tgt_len = batch
            bos = tf.fill((tgt.shape[0], 1), tf.constant(tgt_vocab["<bos>"], dtype=tgt.dtype))
            with tf.GradientTape() as tape:
                logits, _ = net(src, tf.concat([bos, tgt[:, :-1]], 1), src_len, training=True)
                per_sentence = d2l.MaskedSoftmaxCELoss(tgt_len)(tgt, logits)  # the book's TensorFlow form
            grads = d2l.grad_clipping(tape.gradient(per_sentence, net.trainable_variables), 1)
            adam.apply_gradients(zip(grads, net.trainable_variables))
            return tf.reduce_sum(per_sentence), tf.reduce_sum(tgt_len).numpy()

        return fit(net, data_iter, num_epochs, step)

    def translate(self, net, sentence, src_vocab, tgt_vocab, num_steps, device):
        tf = self.tf
        return greedy_translation(net, sentence, src_vocab, tgt_vocab, num_steps, tf.constant,
                                  lambda row: int(tf.argmax(row)), training=False)

    def predict(self, net, sentence, src_vocab, tgt_vocab, num_steps):
        return d2l.predict_seq2seq(net, sentence, src_vocab, tgt_vocab, num_steps)  # TensorFlow's: no device

    def shapes(self, vocab_size=10):
        encoder, decoder = self.Encoder(vocab_size, 8, 16, 2), self.Decoder(vocab_size, 8, 16, 2)
        X = self.tf.zeros((4, 7))
        outputs, finals = encoder(X, training=False)
        logits, (hidden, context) = decoder(X, decoder.init_state(encoder(X, training=False)), training=False)
        def layer_state(s):  # Keras 3: a list of states per layer, Keras 2: the state itself
            return s[0] if self.keras3 else s

        shapes = [tuple(t.shape) for t in (outputs, layer_state(finals[0]), logits, layer_state(hidden[0]),
                                           context)]
        return shapes + [len(finals), len(hidden)]

    def weights(self, net):
        return [v.numpy().copy() for v in net.trainable_variables]


class PaddleReader:
    """Paddle: ``nn.Layer`` subclasses whose layers take Xavier-uniform initializers as they are built,
    ``paddle.optimizer.Adam``, ``l.backward()``; the steps first (``time_major=True``) as the book's GRUs."""

    def __init__(self):
        import paddle
        from paddle import nn

        self.paddle, self.device, self.tensor = paddle, d2l.try_gpu(), paddle.to_tensor

        def xavier():
            return paddle.ParamAttr(initializer=nn.initializer.XavierUniform())

        def gru(num_inputs, num_hiddens, num_layers, dropout):
            return nn.GRU(num_inputs, num_hiddens, num_layers, dropout=dropout, time_major=True,
                          weight_ih_attr=xavier(), weight_hh_attr=xavier())

        class GRUEncoder(d2l.Encoder):
            """The source embedded, then a stacked GRU over it, the steps first."""

            def __init__(self, vocab_size, embed_size, num_hiddens, num_layers, dropout=0.0):
                super().__init__()
                self.embed = nn.Embedding(vocab_size, embed_size)
                self.gru = gru(embed_size, num_hiddens, num_layers, dropout)

            def forward(self, X, *args):
                return self.gru(self.embed(X).transpose([1, 0, 2]))  # (outputs, final states)

        class ContextDecoder(d2l.Decoder):
            """Starts from the encoder's final states and reads the encoder's top layer (the context),
            kept beside the recurrent state, with every target token."""

            def __init__(self, vocab_size, embed_size, num_hiddens, num_layers, dropout=0.0):
                super().__init__()
                self.embed = nn.Embedding(vocab_size, embed_size)
                self.gru = gru(embed_size + num_hiddens, num_hiddens, num_layers, dropout)
                self.readout = nn.Linear(num_hiddens, vocab_size, weight_attr=xavier())

            def init_state(self, enc_outputs, *args):
                finals = enc_outputs[1]
                return finals, finals[-1]

            def forward(self, X, state):
                hidden, context = state
                tokens = self.embed(X).transpose([1, 0, 2])
                every_step = context.unsqueeze(0).expand([tokens.shape[0], -1, -1])
                outputs, hidden = self.gru(paddle.concat([tokens, every_step], axis=-1), hidden)
                return self.readout(outputs).transpose([1, 0, 2]), (hidden, context)

        class MaskedCE(nn.CrossEntropyLoss):
            """Per sentence, the mean over its steps of the cross-entropy, the padding's counted as zero."""

            def __init__(self):
                super().__init__(reduction="none")

            def forward(self, pred, label, valid_len):
                per_token = super().forward(pred, label).reshape(label.shape)
                counted = paddle.arange(label.shape[1])[None, :] < valid_len[:, None]
                return (per_token * counted.astype(per_token.dtype)).mean(axis=1)

        self.Encoder, self.Decoder, self.Loss = GRUEncoder, ContextDecoder, MaskedCE

    def build(self, src_vocab, tgt_vocab):
        self.paddle.seed(0)  # Paddle draws the weights as it builds the layers
        return d2l.EncoderDecoder(self.Encoder(len(src_vocab), EMBED, HIDDENS, LAYERS, DROPOUT),
                                  self.Decoder(len(tgt_vocab), EMBED, HIDDENS, LAYERS, DROPOUT))

    def same_start(self, net, twin, train_iter):
        """Both start from the same weights (``build`` seeds them) and draw the same dropout masks from
        Paddle's generator, which d2l.manual_seed seeds."""

    def train(self, net, data_iter, lr, num_epochs, tgt_vocab, device):
        paddle = self.paddle
        adam = paddle.optimizer.Adam(learning_rate=lr, parameters=net.parameters())
        loss = self.Loss()
        net.train()

        def step(batch):
            src, src_len, tgt, tgt_len = (paddle.to_tensor(t, place=device) for t in batch)
            bos = paddle.full([tgt.shape[0], 1], tgt_vocab["<bos>"], dtype=tgt.dtype)
            logits, _ = net(src, paddle.concat([bos, tgt[:, :-1]], axis=1), src_len)
            per_sentence = loss(logits, tgt, tgt_len)
            adam.clear_grad()
            per_sentence.sum().backward()
            d2l.grad_clipping(net, 1)
            adam.step()
            with paddle.no_grad():
                return per_sentence.sum(), tgt_len.sum()

        return fit(net, data_iter, num_epochs, step)

    def translate(self, net, sentence, src_vocab, tgt_vocab, num_steps, device):
        net.eval()
        return greedy_translation(net, sentence, src_vocab, tgt_vocab, num_steps,
                                  lambda data: self.paddle.to_tensor(data, place=device))

    def predict(self, net, sentence, src_vocab, tgt_vocab, num_steps):
        return d2l.predict_seq2seq(net, sentence, src_vocab, tgt_vocab, num_steps, self.device)

    def shapes(self, vocab_size=10):
        encoder, decoder = self.Encoder(vocab_size, 8, 16, 2), self.Decoder(vocab_size, 8, 16, 2)
        encoder.eval()
        decoder.eval()
        X = d2l.zeros((4, 7), dtype=self.paddle.int64)  # the book's Paddle form
        outputs, finals = encoder(X)
        logits, (hidden, context) = decoder(X, decoder.init_state(encoder(X)))
        return [tuple(t.shape) for t in (outputs, finals, logits, hidden, context)]

    def weights(self, net):
        return [p.numpy().copy() for p in net.parameters()]


READERS = {"torch": TorchReader, "mxnet": GluonReader, "tensorflow": KerasReader, "paddle": PaddleReader}


@pytest.fixture(scope="module")
def framework():
    name = d2l.backend_name()
    if name not in BOOK_FRAMEWORKS:
        pytest.skip(f"the book's cells for these sections (d2l-zh 2.x) are PyTorch, MXNet, TensorFlow and "
                    f"Paddle: none are written for {name}")
    return name


@pytest.fixture
def reader(framework):
    if framework != "mxnet":
        yield READERS[framework]()
        return
    from mxnet import npx

    npx.set_np()  # the book's MXNet cells compute on mxnet.np arrays
    try:
        yield READERS[framework]()
    finally:
        npx.set_np(shape=True, array=False)  # d2lrnn's backend keeps NumPy shapes on


@pytest.fixture(scope="module")
def nmt_data(framework):
    return d2l.load_data_nmt(BATCH, STEPS, num_examples=PAIRS)


#: The book's shapes: encoder outputs (steps, batch, hiddens), final states (layers, batch, hiddens),
#: decoder outputs (batch, steps, vocab); and the context, (batch, hiddens). Keras keeps the batch first
#: and one state per layer.
BOOK_SHAPES = {"torch": [(7, 4, 16), (2, 4, 16), (4, 7, 10), (2, 4, 16), (4, 16)],
               "tensorflow": [(4, 7, 16), (4, 16), (4, 7, 10), (4, 16), (4, 16), 2, 2]}
BOOK_SHAPES["mxnet"] = BOOK_SHAPES["paddle"] = BOOK_SHAPES["torch"]


def test_the_readers_classes_are_framework_modules_with_the_books_shapes(framework, reader):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        shapes = reader.shapes()
    assert shapes == BOOK_SHAPES[framework]
    encoder = reader.Encoder(10, 8, 16, 2)
    assert ops.in_place_hooks().is_module(encoder)
    # d2l's base classes leave the shapes to the first call (Keras 3 cannot trace the book's *args)
    assert not [w for w in caught if "unbuilt state" in str(w.message)], [str(w.message) for w in caught]


def test_the_masked_loss_gives_the_books_numbers_on_framework_tensors(framework, reader):
    tensor = reader.tensor
    pred, label, valid_len = np.ones((3, 4, 10), np.float32), np.ones((3, 4), np.int64), np.array([4, 2, 0])
    expected = [math.log(10), math.log(10) / 2, 0.0]  # uniform over 10 words; 4, then 2, then 0 of 4 steps
    got = d2l.MaskedSoftmaxCELoss()(tensor(pred), tensor(label), tensor(valid_len))
    np.testing.assert_allclose(ops.to_numpy(got), expected, rtol=1e-6, atol=1e-7)
    if framework == "tensorflow":  # the book's TensorFlow form: the valid lengths first, then (label, pred)
        got = d2l.MaskedSoftmaxCELoss(tensor(valid_len))(tensor(label), tensor(pred))
        np.testing.assert_allclose(ops.to_numpy(got), expected, rtol=1e-6, atol=1e-7)
        own = reader.Loss(tensor(valid_len))(tensor(label), tensor(pred))
    else:
        own = reader.Loss()(tensor(pred), tensor(label), tensor(valid_len))
    # the reader's own loss on the framework's: Gluon's float32 log-softmax is off by ~1e-6 relative here
    np.testing.assert_allclose(ops.to_numpy(own), expected, rtol=1e-5, atol=1e-7)
    masked = d2l.sequence_mask(tensor(np.array([[7, 8, 9], [1, 2, 3]])), tensor(np.array([2, 1])))
    np.testing.assert_array_equal(ops.to_numpy(masked), [[7, 8, 0], [1, 0, 0]])


#: How closely d2l.train_seq2seq's losses follow the reader's loop, per framework.
LOSS_RTOL = {
    # the same model, masks, Adam and minibatches: float32 rounding, measured <= 1e-7 relative
    "torch": 1e-6,
    # Gluon's Trainer divides the gradient by the batch's token count before its Adam (so Adam's eps
    # weighs hundreds of times more) and adds eps to sqrt(V) before the bias correction: measured 1.3%
    # apart, both falling alike
    "mxnet": 0.05,
    # Keras's Adam adds eps = 1e-7 to sqrt(V) before the bias correction, d2lrnn's 1e-8 after it (as
    # PyTorch's): weights whose gradients are below ~1e-6 take other first steps; and Keras draws each
    # model's dropout masks from its own seed generators: measured 0.6% apart
    "tensorflow": 0.05,
    # the same model, masks, Adam and minibatches, as on torch
    "paddle": 1e-6,
}


def test_the_readers_loop_and_d2l_train_seq2seq_train_the_readers_model_alike(framework, reader, nmt_data):
    train_iter, src_vocab, tgt_vocab = nmt_data
    net, twin = reader.build(src_vocab, tgt_vocab), reader.build(src_vocab, tgt_vocab)
    reader.same_start(net, twin, train_iter)
    device = d2l.try_gpu()
    d2l.manual_seed(0)  # d2lrnn's generator (the minibatches' order) and the framework's (Xavier, dropout)
    expected = reader.train(twin, train_iter, LR, EPOCHS, tgt_vocab, device)
    d2l.manual_seed(0)
    history = d2l.train_seq2seq(net, train_iter, LR, EPOCHS, tgt_vocab, device, progress=False, plot=False,
                                verbose=False, return_history=True)
    np.testing.assert_allclose(history["train_loss"], expected, rtol=LOSS_RTOL[framework])
    assert expected[-1] < 0.6 * expected[0] and history["train_loss"][-1] < 0.6 * history["train_loss"][0]
    if framework in ("torch", "paddle"):  # the same Adam: the same weights
        for mine, theirs in zip(reader.weights(net), reader.weights(twin)):
            # Adam divides by sqrt(V), so float32 rounding in a tiny gradient moves a weight by up to
            # ~lr * 1e-3
            np.testing.assert_allclose(mine, theirs, rtol=1e-4, atol=1e-5)

    for english, french in SENTENCES:
        translation, attention = reader.predict(net, english, src_vocab, tgt_vocab, STEPS)
        assert translation == reader.translate(net, english, src_vocab, tgt_vocab, STEPS, device)
        assert attention == [] and 0 <= d2l.bleu(translation, french, k=2) <= 1


def test_a_framework_style_subclass_is_a_module_or_says_how_to_write_it(backend):
    """``forward(self, X, ...)`` without ``params`` is the book's framework style: a module of the
    backend's framework, or on the backends without modules one line naming d2lrnn's form."""
    if backend not in BOOK_FRAMEWORKS:
        with pytest.raises(d2l.ArgumentError) as err:
            class Identity(d2l.Encoder):
                def forward(self, X, *args):
                    return X
        assert str(err.value) == (f"d2l.Encoder subclasses on the {backend} backend are written d2lrnn's "
                                  f"way, with forward(self, params, X, ...) (the {backend} backend has no "
                                  "framework modules)")
        return

    class Doubling(d2l.Encoder):
        def call(self, X, *args, **kwargs):  # Keras calls call; the other frameworks' modules forward
            return X * 2

        forward = call

    class Adding(d2l.Decoder):
        def init_state(self, enc_outputs, *args):
            return enc_outputs

        def call(self, X, state, **kwargs):
            return X + state, state

        forward = call

    net = d2l.EncoderDecoder(Doubling(), Adding())
    hooks = ops.in_place_hooks()
    assert all(hooks.is_module(part) for part in (net, net.encoder, net.decoder))
    Y, state = net(d2l.ones((2, 3)), d2l.ones((2, 3)))
    np.testing.assert_array_equal(ops.to_numpy(Y), np.full((2, 3), 3.0))
    np.testing.assert_array_equal(ops.to_numpy(state), np.full((2, 3), 2.0))
    # d2lrnn's own parts keep d2lrnn's own functional EncoderDecoder on every backend
    functional = d2l.make_seq2seq(10, 10, 4, 4, 1)
    joined = d2l.EncoderDecoder(functional.encoder, functional.decoder)
    assert isinstance(joined, type(functional)) and not hooks.is_module(joined)
    assert not isinstance(net, type(functional))
