"""The reference for d2lrnn's seq2seq benchmark: the chapter's encoder-decoder as each framework's own
documentation teaches it, with no d2lrnn code at all.

The model is the book's (``Seq2SeqEncoder``/``Seq2SeqDecoder``): an embedding and ``num_layers``
GRU layers encode the source; the decoder embeds its input, concatenates the context (the
encoder's last-layer final state) to it at every step, runs its own GRU layers from the encoder's
final state, and a dense layer gives the logits. Dropout acts between GRU layers, in training.
Training is teacher forcing (the decoder reads ``<bos>`` and the target shifted by one), the
softmax cross-entropy summed over the valid target tokens (each sentence's ``Y_valid_len``)
divided by their number, gradients clipped to a global norm, and the framework's own Adam.

- ``torch``: ``nn.Embedding`` + ``nn.GRU`` + ``nn.Linear`` (time-major, as the book), weights
  Xavier-uniform as the book's ``train_seq2seq`` initializes them, ``clip_grad_norm_``,
  ``torch.optim.Adam``;
- ``tensorflow``: Keras ``Embedding`` + ``GRU`` (one per layer, ``Dropout`` between) + ``Dense``
  (batch-major), a ``tf.function`` step with ``tf.GradientTape``, ``tf.clip_by_global_norm``,
  ``keras.optimizers.Adam``;
- ``mxnet``: Gluon ``nn.Embedding`` + ``rnn.GRU`` + ``nn.Dense`` in a hybridized ``HybridBlock``
  (time-major), ``autograd.record``, ``clip_global_norm``, ``gluon.Trainer`` with 'adam'.

Every GRU is the framework's (cuDNN's form: the reset gate applied after the recurrent product,
as d2lrnn's seq2seq GRU by default). The framework's RNG is seeded with 0 so runs repeat.

    ref = make_seq2seq_reference("torch", src_vocab_size, tgt_vocab_size, 256, 256, 2, 0.2, bos=2)
    batch = ref.to_batch(X, X_valid_len, Y, Y_valid_len)  # NumPy arrays -> tensors (untimed)
    loss = ref.step(batch)        # one training step; the loss per valid token as a float (a sync)
    ref.loss(batch)               # the same loss without training (no dropout, no update)

``ref.get_weights()`` returns ``{name: NumPy array}`` in the framework's own layout and gate order
(``enc_embedding.weight``, ``enc_rnn.weight_ih_l0``, ..., ``dense.bias`` on torch;
``enc_rnn0/kernel``, ... on Keras; ``enc_rnn.l0_i2h_weight``, ... on Gluon); ``ref.set_weights``
assigns any of them. The framework is imported inside ``make_seq2seq_reference`` only.
"""

import numpy as np

FRAMEWORKS = ("torch", "tensorflow", "mxnet")
#: What each reference computes the model with, for the benchmark's table.
LOOPS = {"torch": "plain loop: nn.Embedding + nn.GRU + nn.Linear, clip_grad_norm_, optim.Adam",
         "tensorflow": "plain loop: keras Embedding + GRU + Dense, tf.function step, clip_by_global_norm, "
                       "Adam",
         "mxnet": "plain loop: gluon Embedding + rnn.GRU + Dense hybridized, clip_global_norm, Trainer adam"}


def make_seq2seq_reference(framework, src_vocab_size, tgt_vocab_size, embed_size, num_hiddens, num_layers,
                           dropout, bos, lr=0.002, clip=1.0):
    """The plain-framework seq2seq training loop for ``framework`` ('torch', 'tensorflow', 'mxnet');
    ``bos`` is the target vocabulary's index of ``<bos>``."""
    builders = {"torch": TorchSeq2Seq, "tensorflow": KerasSeq2Seq, "mxnet": GluonSeq2Seq}
    if framework not in builders:
        raise ValueError(f"unknown framework {framework!r}; expected one of {FRAMEWORKS}")
    return builders[framework](src_vocab_size, tgt_vocab_size, embed_size, num_hiddens, num_layers, dropout,
                               bos, lr, clip)


class TorchSeq2Seq:
    """``nn.Embedding`` + ``nn.GRU`` + ``nn.Linear``, ``torch.optim.Adam``, ``clip_grad_norm_``."""

    def __init__(self, src_vocab_size, tgt_vocab_size, embed_size, num_hiddens, num_layers, dropout, bos, lr,
                 clip):
        import torch
        from torch import nn

        self.torch, self.bos, self.clip = torch, bos, clip
        torch.manual_seed(0)
        self.layer_name = "torch.nn.GRU"
        self.model = _torch_model(src_vocab_size, tgt_vocab_size, embed_size, num_hiddens, num_layers,
                                  dropout)

        def xavier_init_weights(m):  # the book's train_seq2seq
            if type(m) is nn.Linear:
                nn.init.xavier_uniform_(m.weight)
            if type(m) is nn.GRU:
                for name in m._flat_weights_names:
                    if "weight" in name:
                        nn.init.xavier_uniform_(m._parameters[name])

        self.model.apply(xavier_init_weights)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=lr)

    def to_batch(self, X, X_valid_len, Y, Y_valid_len):
        return tuple(self.torch.from_numpy(np.asarray(a, np.int64)) for a in (X, X_valid_len, Y, Y_valid_len))

    def _loss(self, batch):
        torch, F = self.torch, self.torch.nn.functional
        X, _, Y, Y_valid_len = batch
        bos = torch.full((Y.shape[0], 1), self.bos, dtype=Y.dtype)
        dec_input = torch.cat([bos, Y[:, :-1]], 1)  # teacher forcing
        logits = self.model(X, dec_input)  # (batch, num_steps, vocab)
        mask = (torch.arange(Y.shape[1])[None, :] < Y_valid_len[:, None]).float()
        losses = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), Y.reshape(-1), reduction="none")
        return (losses.reshape(Y.shape) * mask).sum() / mask.sum()

    def step(self, batch):
        self.model.train()
        loss = self._loss(batch)
        self.optimizer.zero_grad()
        loss.backward()
        self.torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip)
        self.optimizer.step()
        return loss.item()

    def loss(self, batch):
        self.model.eval()
        with self.torch.no_grad():
            return self._loss(batch).item()

    def get_weights(self):
        return {name: p.detach().numpy().copy() for name, p in self.model.named_parameters()}

    def set_weights(self, weights):
        params = dict(self.model.named_parameters())
        with self.torch.no_grad():
            for name, value in weights.items():
                params[name].copy_(self.torch.from_numpy(_checked(value, params[name].shape, name)))


def _torch_model(src_vocab_size, tgt_vocab_size, embed_size, num_hiddens, num_layers, dropout):
    import torch
    from torch import nn

    class Seq2Seq(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc_embedding = nn.Embedding(src_vocab_size, embed_size)
            self.enc_rnn = nn.GRU(embed_size, num_hiddens, num_layers, dropout=dropout)
            self.dec_embedding = nn.Embedding(tgt_vocab_size, embed_size)
            self.dec_rnn = nn.GRU(embed_size + num_hiddens, num_hiddens, num_layers, dropout=dropout)
            self.dense = nn.Linear(num_hiddens, tgt_vocab_size)

        def forward(self, X, dec_X):
            _, state = self.enc_rnn(self.enc_embedding(X.t()))  # state: (num_layers, batch, num_hiddens)
            embs = self.dec_embedding(dec_X.t())  # (num_steps, batch, embed_size)
            context = state[-1].expand(embs.shape[0], -1, -1)  # the context at every step
            outputs, _ = self.dec_rnn(torch.cat([embs, context], 2), state)
            return self.dense(outputs).transpose(0, 1)

    return Seq2Seq()


class KerasSeq2Seq:
    """Keras ``Embedding`` + ``GRU`` layers (``Dropout`` between) + ``Dense``, a ``tf.function`` step,
    ``tf.clip_by_global_norm``, ``keras.optimizers.Adam``."""

    def __init__(self, src_vocab_size, tgt_vocab_size, embed_size, num_hiddens, num_layers, dropout, bos, lr,
                 clip):
        import keras
        import tensorflow as tf

        self.tf, self.bos, self.clip = tf, bos, clip
        keras.utils.set_random_seed(0)
        self.layer_name = "keras GRU (tf.function)"
        L = keras.layers
        self.enc_embedding, self.dec_embedding = L.Embedding(src_vocab_size, embed_size), \
            L.Embedding(tgt_vocab_size, embed_size)
        self.enc_rnns, self.dec_rnns = ([L.GRU(num_hiddens, return_sequences=True, return_state=True)
                                         for _ in range(num_layers)] for _ in range(2))
        self.dropout = L.Dropout(dropout)
        self.dense = L.Dense(tgt_vocab_size)
        self.enc_embedding.build((None, None))
        self.dec_embedding.build((None, None))
        for i, (enc, dec) in enumerate(zip(self.enc_rnns, self.dec_rnns)):
            enc.build((None, None, embed_size if i == 0 else num_hiddens))
            dec.build((None, None, embed_size + num_hiddens if i == 0 else num_hiddens))
        self.dense.build((None, None, num_hiddens))
        self.layers = {"enc_embedding": self.enc_embedding, "dec_embedding": self.dec_embedding,
                       **{f"enc_rnn{i}": layer for i, layer in enumerate(self.enc_rnns)},
                       **{f"dec_rnn{i}": layer for i, layer in enumerate(self.dec_rnns)}, "dense": self.dense}
        self.variables = [v for layer in self.layers.values() for v in layer.trainable_variables]
        self.optimizer = keras.optimizers.Adam(learning_rate=lr)
        self.optimizer.build(self.variables)
        self.train_step = tf.function(self._train_step)
        self.eval_loss = tf.function(self._loss)

    def to_batch(self, X, X_valid_len, Y, Y_valid_len):
        return tuple(self.tf.constant(a, self.tf.int64) for a in (X, X_valid_len, Y, Y_valid_len))

    def forward(self, X, dec_X, training):
        H, states = self.enc_embedding(X), []
        for i, rnn in enumerate(self.enc_rnns):
            H, state = rnn(H, training=training)
            states.append(state)
            if i < len(self.enc_rnns) - 1:
                H = self.dropout(H, training=training)
        embs = self.dec_embedding(dec_X)  # (batch, num_steps, embed_size)
        context = self.tf.repeat(states[-1][:, None, :], self.tf.shape(embs)[1], axis=1)
        H = self.tf.concat([embs, context], 2)
        for i, rnn in enumerate(self.dec_rnns):
            H, _ = rnn(H, initial_state=[states[i]], training=training)
            if i < len(self.dec_rnns) - 1:
                H = self.dropout(H, training=training)
        return self.dense(H)

    def _loss(self, X, X_valid_len, Y, Y_valid_len, training=False):
        tf = self.tf
        dec_input = tf.concat([tf.fill((tf.shape(Y)[0], 1), tf.constant(self.bos, Y.dtype)), Y[:, :-1]], 1)
        logits = self.forward(X, dec_input, training)
        losses = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=Y, logits=logits)
        mask = tf.sequence_mask(Y_valid_len, tf.shape(Y)[1], dtype=losses.dtype)
        return tf.reduce_sum(losses * mask) / tf.reduce_sum(mask)

    def _train_step(self, X, X_valid_len, Y, Y_valid_len):
        with self.tf.GradientTape() as tape:
            loss = self._loss(X, X_valid_len, Y, Y_valid_len, training=True)
        grads = tape.gradient(loss, self.variables)
        grads, _ = self.tf.clip_by_global_norm(grads, self.clip)
        self.optimizer.apply(grads, self.variables)
        return loss

    def step(self, batch):
        return float(self.train_step(*batch))

    def loss(self, batch):
        return float(self.eval_loss(*batch))

    def _named_variables(self):
        return {f"{prefix}/{v.name}": v for prefix, layer in self.layers.items()
                for v in layer.trainable_variables}

    def get_weights(self):
        return {name: np.array(v.numpy()) for name, v in self._named_variables().items()}

    def set_weights(self, weights):
        variables = self._named_variables()
        for name, value in weights.items():
            variables[name].assign(_checked(value, tuple(variables[name].shape), name))


class GluonSeq2Seq:
    """Gluon ``nn.Embedding`` + ``rnn.GRU`` + ``nn.Dense`` hybridized, ``autograd.record``,
    ``clip_global_norm``, ``gluon.Trainer`` with 'adam'."""

    def __init__(self, src_vocab_size, tgt_vocab_size, embed_size, num_hiddens, num_layers, dropout, bos, lr,
                 clip):
        import mxnet as mx
        from mxnet import autograd, gluon

        self.mx, self.autograd, self.gluon, self.bos, self.clip = mx, autograd, gluon, bos, clip
        self.num_layers, self.num_hiddens = num_layers, num_hiddens
        mx.random.seed(0)
        self.layer_name = "gluon.rnn.GRU (hybridized)"
        self.model = _gluon_model(src_vocab_size, tgt_vocab_size, embed_size, num_hiddens, num_layers,
                                  dropout)
        self.model.initialize(mx.init.Xavier(), ctx=mx.cpu())
        self.model.hybridize()
        self.params = list(self.model.collect_params().values())
        self.trainer = gluon.Trainer(self.model.collect_params(), "adam", {"learning_rate": lr})

    def to_batch(self, X, X_valid_len, Y, Y_valid_len):
        nd = self.mx.nd
        return (nd.array(X, dtype="int64"), nd.array(X_valid_len, dtype="float32"),
                nd.array(Y, dtype="int64"), nd.array(Y_valid_len, dtype="float32"))

    def _loss(self, batch):
        nd = self.mx.nd
        X, _, Y, Y_valid_len = batch
        bos = nd.full((Y.shape[0], 1), self.bos, dtype=Y.dtype)
        dec_input = nd.concat(bos, nd.slice_axis(Y, axis=1, begin=0, end=-1), dim=1)  # teacher forcing
        state = nd.zeros((self.num_layers, X.shape[0], self.num_hiddens))
        logits = self.model(X, dec_input, state)  # (num_steps, batch, vocab)
        losses = -nd.pick(nd.log_softmax(logits), Y.T)  # (num_steps, batch)
        mask = nd.SequenceMask(nd.ones_like(losses), Y_valid_len, use_sequence_length=True)
        return (losses * mask).sum() / mask.sum()

    def step(self, batch):
        with self.autograd.record():
            loss = self._loss(batch)
        loss.backward()
        self.gluon.utils.clip_global_norm([p.grad() for p in self.params], self.clip)
        self.trainer.step(1)  # the loss is already per valid token
        return float(loss.asscalar())

    def loss(self, batch):
        return float(self._loss(batch).asscalar())

    def _named_params(self):
        model = self.model
        return {f"{prefix}.{name[len(layer.prefix):]}": p
                for prefix, layer in (("enc_embedding", model.enc_embedding), ("enc_rnn", model.enc_rnn),
                                      ("dec_embedding", model.dec_embedding), ("dec_rnn", model.dec_rnn),
                                      ("dense", model.dense))
                for name, p in layer.collect_params().items()}

    def get_weights(self):
        return {name: p.data().asnumpy().copy() for name, p in self._named_params().items()}

    def set_weights(self, weights):
        params = self._named_params()
        for name, value in weights.items():
            params[name].set_data(self.mx.nd.array(_checked(value, params[name].shape, name)))


def _gluon_model(src_vocab_size, tgt_vocab_size, embed_size, num_hiddens, num_layers, dropout):
    from mxnet import gluon
    from mxnet.gluon import nn, rnn

    class Seq2Seq(gluon.HybridBlock):
        def __init__(self):
            super().__init__()
            with self.name_scope():
                self.enc_embedding = nn.Embedding(src_vocab_size, embed_size)
                self.enc_rnn = rnn.GRU(num_hiddens, num_layers, dropout=dropout, input_size=embed_size)
                self.dec_embedding = nn.Embedding(tgt_vocab_size, embed_size)
                self.dec_rnn = rnn.GRU(num_hiddens, num_layers, dropout=dropout,
                                       input_size=embed_size + num_hiddens)
                self.dense = nn.Dense(tgt_vocab_size, flatten=False, in_units=num_hiddens)

        def hybrid_forward(self, F, X, dec_X, state):
            _, (state,) = self.enc_rnn(self.enc_embedding(F.transpose(X)), [state])
            embs = self.dec_embedding(F.transpose(dec_X))  # (num_steps, batch, embed_size)
            context = F.broadcast_like(F.slice_axis(state, axis=0, begin=-1, end=None), embs,
                                       lhs_axes=(0,), rhs_axes=(0,))  # the context at every step
            outputs, _ = self.dec_rnn(F.concat(embs, context, dim=2), [state])
            return self.dense(outputs)

    return Seq2Seq()


def _checked(value, shape, name):
    """``value`` as float32, after checking it has the parameter's shape."""
    value = np.asarray(value, dtype=np.float32)
    if value.shape != tuple(shape):
        raise ValueError(f"{name}: expected shape {tuple(shape)}, got {value.shape}")
    return value
