"""Generating text with a trained language model: warm the state up on a prefix, then choose one token
after another (the book's ``predict_ch8``), greedily or by sampling at a temperature."""

import weakref

import numpy as np

from .. import checks, ops
from ..errors import ArgumentError
from ..keys import tagged
from ..training.loop import model_device
from .model import _LanguageModel

#: Each model's one-token step, compiled once (:func:`token_step`); an entry goes with its model.
_TOKEN_STEPS = weakref.WeakKeyDictionary()
#: Each model's prefix warm-up, compiled for a few calls (:func:`prefix_step`); an entry goes with its model.
_PREFIX_STEPS = weakref.WeakKeyDictionary()


def predict(prefix, num_preds, net, vocab, device=None, temperature=0.0, seed=None):
    """Continue ``prefix`` by ``num_preds`` tokens: warm up on the prefix, then decode.

    ``temperature`` 0 is greedy (the book's argmax); above 0, the next token is sampled from
    softmax(logits / temperature) with a NumPy generator seeded by ``seed``. Characters not in
    the vocabulary map to ``<unk>`` when read; ``<unk>`` itself is never generated (it stands for
    no character). Returns the prefix followed by the generated text.
    """
    if not isinstance(prefix, str) or not prefix:
        raise ArgumentError(f"predict_ch8 needs a non-empty prefix string to warm up the state, "
                            f"got {prefix!r}")
    num_preds = checks.integer("num_preds", num_preds, 0)
    temperature = checks.number("temperature", temperature, 0, hint=" (0: greedy; e.g. 0.8 to sample)")
    if seed is not None:
        seed = checks.seed(seed)
    if len(vocab) != net.vocab_size:
        raise ArgumentError(f"the vocabulary has {len(vocab)} tokens but the model {net.vocab_size}: "
                            "pass the vocabulary the model was trained with")
    ids, device = [vocab[t] for t in prefix], model_device(net, device)  # character tokens
    state = net.begin_state(batch_size=1, device=device)  # keywords: the book's modules take (device, batch)
    if len(ids) > 1:  # warm-up: run the whole prefix but its last token through the state at once
        _, state = prefix_step(net)(ops.tensor([ids[:-1]], device=device), state)
    rng = np.random.default_rng(seed)
    unk = getattr(vocab, "unk", 0)
    last, generated, step = ids[-1], [], token_step(net)
    for _ in range(num_preds):
        Y, state = step(ops.tensor([[last]], device=device), state)
        last = next_token(ops.to_numpy(Y).reshape(-1), temperature, rng, unk)
        generated.append(last)
    return prefix + "".join(vocab.to_tokens(generated))


def token_step(net):
    """``step(X, state) -> (Y, new_state)`` for one token of ``net``: a model of d2lrnn's runs its
    ``forward`` with its current parameters compiled (on TensorFlow and JAX one program, made on the
    first call and kept for the model's lifetime: generating calls the model once per token, and each of
    those eager calls cost ~10x a compiled one); any other model is called as it is.

    The indices are not checked again here: the prefix was read through the vocabulary and every
    generated token comes from the model's own output layer.
    """
    return _compiled_forward(net, _TOKEN_STEPS, "many")


def prefix_step(net):
    """As :func:`token_step`, for the prefix that warms the state up: called once per generation, so
    compiled only where each eager operation would be compiled on its own (JAX: the GRU chapter's four
    generations took 7 s eagerly, most of it compiling every operation of the 13-step prefix's time loop);
    TensorFlow runs it eagerly (``ops.compile(..., calls="few")``)."""
    return _compiled_forward(net, _PREFIX_STEPS, "few")


def _compiled_forward(net, steps, calls):
    if not isinstance(net, _LanguageModel):
        return net
    step = steps.get(net)
    if step is None:
        model = weakref.ref(net)  # the compiled function must not keep its model alive
        compiled = ops.compile(lambda params, X, state: model().forward(params, X, state), calls=calls,
                               key=tagged("forward", net.compile_key()))  # shared by models of one structure

        def step(X, state):
            return compiled(model().params, X, state)

        step.compilations = getattr(compiled, "compilations", None)  # programs made so far (for tests)
        steps[net] = step
    return step


def next_token(logits, temperature, rng, unk=0):
    """The token that follows one row of ``logits``: the argmax at temperature 0, else a draw from
    softmax(logits / temperature) with ``rng``. Never ``unk`` (it stands for no character)."""
    logits = np.array(logits, dtype=np.float64)
    logits[unk] = -np.inf
    if temperature > 0:
        p = np.exp((logits - logits.max()) / temperature)  # exp(-inf) = 0 for <unk>
        return int(rng.choice(len(p), p=p / p.sum()))
    return int(logits.argmax())
