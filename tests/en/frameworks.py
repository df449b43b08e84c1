"""A reader's framework code, as the 1.0 edition's cells write it, for the tests' own models."""

import importlib


def parameter(backend, array):
    """``array`` as a trainable parameter the framework's way (PyTorch: ``nn.Parameter``, MXNet: an array
    with a gradient attached)."""
    if backend == "torch":
        torch = importlib.import_module("torch")
        return torch.nn.Parameter(torch.tensor(array))
    if backend == "mxnet":
        mx = importlib.import_module("mxnet")
        param = mx.np.array(array)
        param.attach_grad()
        return param
    if backend == "tensorflow":  # (Keras 3 tracks a keras.Variable, not a tf.Variable, on a model)
        tf = importlib.import_module("tensorflow")
        return tf.keras.Variable(array) if keras3(backend) else tf.Variable(array)
    raise NotImplementedError(backend)


def keras3(backend):
    """Whether the env's framework is TensorFlow with Keras 3, which has no time-major layers (the 1.0
    edition's d2l.RNN and d2l.GRU are Keras 2's)."""
    if backend != "tensorflow":
        return False
    return hasattr(importlib.import_module("tensorflow").keras.layers.Layer, "stateless_call")


def decoder_class(backend, d2l):
    """The seq2seq section's decoder (the reader writes it; the book does not save it)."""
    if backend == "torch":
        torch = importlib.import_module("torch")

        class Seq2SeqDecoder(d2l.Decoder):
            def __init__(self, vocab_size, embed_size, num_hiddens, num_layers, dropout=0):
                super().__init__()
                self.embedding = torch.nn.Embedding(vocab_size, embed_size)
                self.rnn = d2l.GRU(embed_size + num_hiddens, num_hiddens, num_layers, dropout)
                self.dense = torch.nn.LazyLinear(vocab_size)
                self.apply(d2l.init_seq2seq)

            def init_state(self, enc_all_outputs, *args):
                return enc_all_outputs

            def forward(self, X, state):
                embs = self.embedding(d2l.astype(d2l.transpose(X), d2l.int32))
                enc_output, hidden_state = state
                context = enc_output[-1].repeat(embs.shape[0], 1, 1)
                outputs, hidden_state = self.rnn(d2l.concat((embs, context), -1), hidden_state)
                return d2l.swapaxes(self.dense(outputs), 0, 1), [enc_output, hidden_state]

        return Seq2SeqDecoder
    if backend == "mxnet":
        mx = importlib.import_module("mxnet")

        class GluonDecoder(d2l.Decoder):
            def __init__(self, vocab_size, embed_size, num_hiddens, num_layers, dropout=0):
                super().__init__()
                self.embedding = mx.gluon.nn.Embedding(vocab_size, embed_size)
                self.rnn = d2l.GRU(num_hiddens, num_layers, dropout)
                self.dense = mx.gluon.nn.Dense(vocab_size, flatten=False)
                self.initialize(mx.init.Xavier())

            def init_state(self, enc_all_outputs, *args):
                return enc_all_outputs

            def forward(self, X, state):
                embs = self.embedding(d2l.transpose(X))
                enc_output, hidden_state = state
                context = mx.np.tile(enc_output[-1], (embs.shape[0], 1, 1))
                outputs, hidden_state = self.rnn(d2l.concat((embs, context), -1), hidden_state)
                return d2l.swapaxes(self.dense(outputs), 0, 1), [enc_output, hidden_state]

        return GluonDecoder
    if backend == "tensorflow":
        tf = importlib.import_module("tensorflow")

        class KerasDecoder(d2l.Decoder):
            def __init__(self, vocab_size, embed_size, num_hiddens, num_layers, dropout=0):
                super().__init__()
                self.embedding = tf.keras.layers.Embedding(vocab_size, embed_size)
                self.rnn = d2l.GRU(num_hiddens, num_layers, dropout)
                self.dense = tf.keras.layers.Dense(vocab_size)

            def init_state(self, enc_all_outputs, *args):
                return enc_all_outputs

            def call(self, X, state, training=False):
                embs = self.embedding(d2l.transpose(X))
                enc_output, hidden_state = state
                context = tf.tile(tf.expand_dims(enc_output[-1], 0), (embs.shape[0], 1, 1))
                outputs, hidden_state = self.rnn(d2l.concat((embs, context), -1), hidden_state,
                                                 training=training)
                return d2l.swapaxes(self.dense(outputs), 0, 1), [enc_output, hidden_state]

        return KerasDecoder
    if backend == "jax":
        nn = importlib.import_module("flax.linen")
        jnp = importlib.import_module("jax.numpy")

        class FlaxDecoder(d2l.Decoder):
            vocab_size: int
            embed_size: int
            num_hiddens: int
            num_layers: int
            dropout: float = 0

            def setup(self):
                self.embedding = nn.Embed(self.vocab_size, self.embed_size)
                self.rnn = d2l.GRU(self.num_hiddens, self.num_layers, self.dropout)
                self.dense = nn.Dense(self.vocab_size)

            def init_state(self, enc_all_outputs, *args):
                return enc_all_outputs

            def __call__(self, X, state, training=False):
                embs = self.embedding(d2l.astype(d2l.transpose(X), d2l.int32))
                enc_output, hidden_state = state
                context = jnp.tile(enc_output[-1], (embs.shape[0], 1, 1))
                outputs, hidden_state = self.rnn(d2l.concat((embs, context), -1), hidden_state,
                                                 training=training)
                return d2l.swapaxes(self.dense(outputs), 0, 1), [enc_output, hidden_state]

        return FlaxDecoder
    raise NotImplementedError(backend)
