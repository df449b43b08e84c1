"""Training, evaluation and prediction for language models, written once above the shim.

Updates are functional: a step takes the parameter list and returns a new one, so the
same code runs under HIPS autograd (which forbids in-place writes), torch, TensorFlow
(where the whole step is compiled with ``tf.function``) and MXNet.
"""

import math
import time

import numpy as np

from . import ops
from .errors import DataError, TrainingError
from .progress import Animator, progress_bar


class Timer:
    """Record running times (the book's ``Timer``)."""

    def __init__(self):
        self.times = []
        self.start()

    def start(self):
        self.tik = time.perf_counter()

    def stop(self):
        self.times.append(time.perf_counter() - self.tik)
        return self.times[-1]

    def avg(self):
        return sum(self.times) / len(self.times)

    def sum(self):
        return sum(self.times)


class Accumulator:
    """Sums over ``n`` variables (the book's ``Accumulator``)."""

    def __init__(self, n):
        self.data = [0.0] * n

    def add(self, *args):
        self.data = [a + float(b) for a, b in zip(self.data, args)]

    def reset(self):
        self.data = [0.0] * len(self.data)

    def __getitem__(self, idx):
        return self.data[idx]


def grad_clipping(grads, theta):
    """Scale gradients so their global norm is at most ``theta``: g <- min(1, theta / ||g||) g.

    ``grads`` is a list of tensors; a new list is returned. The scale is computed as
    ``theta / max(||g||, theta)``, which equals min(1, theta/||g||) without a Python branch,
    so it also runs inside a compiled (graph-mode) step.
    """
    if hasattr(grads, "params"):
        raise TypeError("grad_clipping takes the list of gradients (updates here are functional), "
                        "not the network: grads = grad_clipping(grads, theta)")
    norm = ops.sqrt(sum(ops.sum(g * g) for g in grads))
    scale = theta / ops.maximum(norm, theta)
    return [g * scale for g in grads]


def sgd(params, grads, lr, batch_size=1):
    """Minibatch stochastic gradient descent: p <- p - lr * g / batch_size, as new tensors."""
    return [p - (lr / batch_size) * g for p, g in zip(params, grads)]


def lm_loss(Y_hat, Y):
    """Mean cross-entropy of predictions (num_steps * batch, vocab) for labels Y (batch, num_steps)."""
    return ops.mean(ops.softmax_cross_entropy(Y_hat, ops.reshape(ops.transpose(Y), (-1,))))


def _objective(net, loss):
    """``(params, X, Y, state) -> (loss, new_state)``: what training differentiates."""

    def objective(params, X, Y, state):
        Y_hat, new_state = net.forward(params, X, state)
        return loss(Y_hat, Y), new_state

    return objective


def make_train_step(net, lr, clip=1.0, loss=lm_loss):
    """A compiled step ``(params, X, Y, state) -> (loss, new_params, new_state)``.

    Forward pass, gradients, clipping to global norm ``clip`` (None: no clipping), SGD.
    """
    value_and_grad = ops.value_and_grad(_objective(net, loss), has_aux=True)

    def step(params, X, Y, state):
        (l, new_state), grads = value_and_grad(params, X, Y, state)
        if clip is not None:
            grads = grad_clipping(grads, clip)
        return l, sgd(params, grads, lr), new_state

    return ops.compile(step)


def make_eval_step(net, loss=lm_loss):
    """A compiled step ``(params, X, Y, state) -> (loss, new_state)`` without gradients."""
    return ops.compile(_objective(net, loss))


def perplexity(mean_loss):
    """exp(mean cross-entropy); inf rather than an OverflowError for a huge (finite) loss."""
    return math.exp(mean_loss) if mean_loss < 700 else math.inf


def _state_for(net, X, state, device, reset=False):
    """The state minibatch X starts from: carried over, or fresh (first batch, reset, new batch size)."""
    batch_size = ops.shape(X)[0]
    if reset or state is None or batch_size != ops.shape(state[0])[0]:
        return net.begin_state(batch_size, device)
    return state


def train_epoch_ch8(net, train_iter, loss=None, updater=None, device=None, use_random_iter=False, *,
                    step=None, epoch=1, on_batch=None):
    """Train ``net`` for one epoch; return (perplexity, tokens per second).

    The state is re-initialised for every minibatch with random sampling, and carried over
    (detached from the previous minibatch's graph) with sequential partitioning. ``updater``
    is a learning rate (SGD with clipping at 1) unless a compiled ``step`` is given.
    If the loss becomes NaN or inf, training stops with a :class:`TrainingError` and
    ``net.params`` keeps the last parameters whose loss was finite.
    """
    if step is None:
        step = make_train_step(net, 1.0 if updater is None else float(updater), 1.0,
                               loss or lm_loss)
    state, timer = None, Timer()
    metric = Accumulator(2)  # sum of losses * tokens, tokens
    for i, (X, Y) in enumerate(train_iter, 1):
        state = _state_for(net, X, state, device, reset=use_random_iter)
        l, new_params, state = step(net.params, X, Y, state)
        l = float(ops.to_numpy(l))
        if not math.isfinite(l):
            raise TrainingError(
                f"loss became {l} at epoch {epoch}, step {i}: lower the learning rate or clip "
                f"gradients harder (e.g. --clip 1); the parameters from the step before are kept")
        net.params = new_params
        n = ops.size(Y)
        metric.add(l * n, n)
        if on_batch is not None:
            on_batch(n)
    if metric[1] == 0:
        raise DataError("the training iterator produced no minibatch: use a smaller batch size or "
                        "number of steps, or a longer corpus")
    return perplexity(metric[0] / metric[1]), metric[1] / timer.stop()


def evaluate_perplexity(net, data_iter, device=None, step=None):
    """exp(mean cross-entropy) of ``net`` on ``data_iter``, carrying the state across minibatches."""
    step = step or make_eval_step(net)
    state, metric = None, Accumulator(2)
    for X, Y in data_iter:
        state = _state_for(net, X, state, device)
        l, state = step(net.params, X, Y, state)
        n = ops.size(Y)
        metric.add(float(ops.to_numpy(l)) * n, n)
    if metric[1] == 0:
        raise DataError("the evaluation iterator produced no minibatch: hold out more text")
    return perplexity(metric[0] / metric[1])


def predict_ch8(prefix, num_preds, net, vocab, device=None, temperature=0.0, seed=None):
    """Continue ``prefix`` by ``num_preds`` tokens: warm up on the prefix, then decode.

    ``temperature`` 0 is greedy (the book's argmax); above 0, the next token is sampled from
    softmax(logits / temperature) with a NumPy generator seeded by ``seed``. Characters not in
    the vocabulary map to ``<unk>`` when read; ``<unk>`` itself is never generated (it stands for
    no character). Returns the prefix followed by the generated text.
    """
    if not prefix:
        raise DataError("predict_ch8 needs a non-empty prefix to warm up the state")
    if num_preds < 0:
        raise DataError(f"num_preds must be >= 0, got {num_preds}")
    ids = [vocab[t] for t in prefix]  # character tokens
    state = net.begin_state(1, device)
    if len(ids) > 1:  # warm-up: run the whole prefix but its last token through the state at once
        _, state = net(ops.tensor([ids[:-1]], device=device), state)
    rng = np.random.default_rng(seed)
    unk = getattr(vocab, "unk", 0)
    last, generated = ids[-1], []
    for _ in range(num_preds):
        Y, state = net(ops.tensor([[last]], device=device), state)
        logits = ops.to_numpy(Y).reshape(-1).astype(np.float64)
        logits[unk] = -np.inf
        if temperature and temperature > 0:
            p = np.exp((logits - logits.max()) / temperature)  # exp(-inf) = 0 for <unk>
            last = int(rng.choice(len(p), p=p / p.sum()))
        else:
            last = int(logits.argmax())
        generated.append(last)
    return prefix + "".join(vocab.to_tokens(generated))


def train_ch8(net, train_iter, vocab, lr, num_epochs, device=None, use_random_iter=False, *,
              clip=1.0, val_iter=None, progress=True, plot=None, prefixes=("time traveller", "traveller"),
              verbose=True):
    """Train a language model (the book's ``train_ch8``) and return its history.

    Each epoch reports training perplexity, tokens/s and (with ``val_iter``) validation
    perplexity. ``progress`` shows a progress bar (tqdm; a widget in notebooks); ``plot``
    draws the perplexity curves live (default: on in notebooks). Returns a dict of lists:
    ``epoch``, ``train_ppl``, ``val_ppl`` (if evaluated), ``tokens_per_sec``, ``seconds``.
    """
    if lr <= 0 or num_epochs < 1:
        raise DataError(f"need lr > 0 and num_epochs >= 1, got lr={lr}, num_epochs={num_epochs}")
    step = make_train_step(net, lr, clip)
    eval_step = make_eval_step(net) if val_iter is not None else None
    history = {"epoch": [], "train_ppl": [], "val_ppl": [], "tokens_per_sec": [], "seconds": []}
    legend = ["train"] + (["validation"] if val_iter is not None else [])
    animator = Animator(xlabel="epoch", ylabel="perplexity", legend=legend, xlim=[1, max(num_epochs, 2)],
                        enabled=plot)
    total = num_epochs * len(train_iter) if hasattr(train_iter, "__len__") else None
    start = time.perf_counter()
    with progress_bar(total=total, unit="batch", disable=not progress, desc="train") as bar:
        for epoch in range(1, num_epochs + 1):
            ppl, speed = train_epoch_ch8(net, train_iter, None, None, device, use_random_iter,
                                         step=step, epoch=epoch, on_batch=lambda n: bar.update(1))
            history["epoch"].append(epoch)
            history["train_ppl"].append(ppl)
            history["tokens_per_sec"].append(speed)
            info = {"ppl": f"{ppl:.2f}", "tok/s": f"{speed:,.0f}"}
            points = [ppl]
            if val_iter is not None:
                val_ppl = evaluate_perplexity(net, val_iter, device, eval_step)
                history["val_ppl"].append(val_ppl)
                info["val_ppl"] = f"{val_ppl:.2f}"
                points.append(val_ppl)
            history["seconds"].append(time.perf_counter() - start)
            bar.set_postfix(info, refresh=False)
            animator.add(epoch, points)
    animator.close()
    if verbose:
        line = f"perplexity {history['train_ppl'][-1]:.1f}"
        if history["val_ppl"]:
            line += f", validation perplexity {history['val_ppl'][-1]:.1f}"
        print(f"{line}, {history['tokens_per_sec'][-1]:,.0f} tokens/sec on {device or ops.cpu()}")
        for prefix in prefixes:
            print(predict_ch8(prefix, 50, net, vocab, device))
    return history
