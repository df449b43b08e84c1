"""Training an encoder-decoder, written once above the shim: teacher forcing, the masked loss per token,
Adam (or SGD) with gradient clipping, and per epoch the validation loss and BLEU.

In training the decoder reads the true target shifted by one step (teacher forcing): its input
is ``<bos>`` followed by the target without its last token, and it is asked for the target. The
loss is the cross-entropy per valid target token (:func:`d2lrnn.seq2seq.loss.masked_token_loss`).
The run is the training loop's (:mod:`d2lrnn.training.loop`) with this task, so the optimizers,
clipping, compiled steps, divergence guard and time budget are the language models' code.
"""

import math

import numpy as np

from .. import checks, ops
from ..backends import backend_name, checked_indices, checked_lengths
from ..errors import DataError
from ..keys import key_of, tagged
from ..training.guard import DIVERGENCE_FACTOR, blown_up_loss, quiet_numerics
from ..training.loop import Task, fit, model_device, placed
from ..training.metrics import Accumulator
from ..training.optim import get_optimizer
from ..training.step import Updater
from .bleu import corpus_bleu
from .decode import ALPHA, translate, translate_arrays
from .loss import masked_token_loss, sentence_losses

HISTORY_KEYS = ("epoch", "train_loss", "val_loss", "val_bleu", "tokens_per_sec", "seconds")
#: The n-gram order of the validation BLEU (uniform weights: standard BLEU-4).
BLEU_K = 4


def teacher_forcing(Y, bos):
    """The decoder's input in training: ``<bos>``, then the target ``Y`` (batch, num_steps) without its
    last token. (``Y[:, :1] * 0 + bos`` is a column of ``<bos>`` with ``Y``'s type on every backend.)"""
    return ops.concat([Y[:, :1] * 0 + bos, Y[:, :-1]], 1)


def seq2seq_objective(net, bos, training=True, summed=False, label_smoothing=0.0):
    """``(params, X, X_valid_len, Y, Y_valid_len) -> (loss, ())``: what training differentiates
    (``training`` turns dropout on). The loss is the mean per valid target token; ``summed``: the
    book's, the sum of the sentences' :class:`MaskedSoftmaxCELoss` (see :func:`batch_total`);
    ``label_smoothing`` eps: each token's cross-entropy against the target smoothed by eps
    (:mod:`d2lrnn.seq2seq.loss`)."""

    def objective(params, X, X_valid_len, Y, Y_valid_len):
        Y_hat, _ = net.forward(params, X, teacher_forcing(Y, bos), X_valid_len, training=training)
        if summed:
            return ops.sum(sentence_losses(Y_hat, Y, Y_valid_len, label_smoothing)), ()
        return masked_token_loss(Y_hat, Y, Y_valid_len, label_smoothing), ()

    return objective


def seq2seq_objective_key(net, bos, training=True, summed=False, label_smoothing=0.0):
    """``ops.compile``'s key for :func:`seq2seq_objective` of these arguments; None for the reader's model."""
    model_key = key_of(net)
    if model_key is None:
        return None
    return ("seq2seq", model_key, int(bos), bool(training), bool(summed), float(label_smoothing))


def make_eval_step(net, tgt_vocab, summed=False):
    """The compiled loss of ``net`` without dropout (validation): ``(params, X, X_valid_len, Y, Y_valid_len)
    -> (loss, ())``."""
    bos = tgt_vocab["<bos>"]
    return ops.compile(seq2seq_objective(net, bos, training=False, summed=summed),
                       key=tagged("eval", seq2seq_objective_key(net, bos, training=False, summed=summed)))


def batch_total(loss, tokens, summed=False):
    """A batch's objective (a float) as a sum over its ``tokens`` target tokens, for the mean per token over
    an epoch (the book's sum of sentence losses, ``summed``, is such a sum already)."""
    return loss if summed else loss * tokens


def make_seq2seq_updater(net, tgt_vocab, lr=0.005, clip=1.0, optimizer="adam", schedule=None, device=None,
                         summed=False, label_smoothing=0.0, average=0.0, precision="float32"):
    """The training step of ``net``: an :class:`~d2lrnn.training.step.Updater` called as ``updater(params,
    X, X_valid_len, Y, Y_valid_len) -> (loss, new_params, ())``, with ``optimizer`` ('adam', 'sgd' or an
    object) at ``lr`` (or ``schedule(t)`` at step t) and clipping to global norm ``clip``; ``summed``: the
    book's loss, ``label_smoothing`` its weight eps in [0, 1) (see :func:`seq2seq_objective`); ``average``
    the decay of the weights' moving average that training validates and keeps (0: none); ``precision``
    'bfloat16' the products in bfloat16 while training, the weights in float32 (torch; see
    :class:`~d2lrnn.training.step.Updater`)."""
    optimizer = get_optimizer(optimizer, checks.positive_number("lr", lr, " (the learning rate, e.g. 0.005)"))
    label_smoothing = check_label_smoothing(label_smoothing)
    bos = tgt_vocab["<bos>"]
    objective = seq2seq_objective(net, bos, summed=summed, label_smoothing=label_smoothing)
    key = seq2seq_objective_key(net, bos, summed=summed, label_smoothing=label_smoothing)
    return Updater(net.params, objective, optimizer, clip, schedule, model_device(net, device),
                   average=average, key=key, precision=precision)


def check_label_smoothing(label_smoothing):
    """``label_smoothing`` as a float in [0, 1), or one ArgumentError line."""
    return checks.below_one("label_smoothing", label_smoothing, "weight", "weight of the uniform target", 0.1)


def target_tokens(Y_valid_len):
    """The number of valid target tokens in a minibatch, as a float."""
    return float(ops.to_numpy(ops.sum(Y_valid_len)))


def evaluate_loss(net, data_iter, tgt_vocab, step=None, summed=False, device=None):
    """The loss per valid target token of ``net`` on ``data_iter`` (teacher forcing, no dropout)."""
    device = model_device(net, device)
    step = step or make_eval_step(net, tgt_vocab, summed)
    metric = Accumulator(2)
    with quiet_numerics():
        for batch in data_iter:
            X, X_valid_len, Y, Y_valid_len = placed(batch, device)
            l, _ = step(net.params, X, X_valid_len, Y, Y_valid_len)
            n = target_tokens(Y_valid_len)
            metric.add(batch_total(float(ops.to_numpy(l)), n, summed), n)
    if metric[1] == 0:
        raise DataError("the validation iterator produced no sentence pair: hold out more pairs")
    return metric[0] / metric[1]


def references(data_iter, tgt_vocab):
    """The target sentences of ``data_iter`` as token lists: its ``target`` lists where it keeps them
    (the untruncated sentences), else read back from the padded arrays (without ``<eos>``)."""
    if getattr(data_iter, "target", None) is not None:
        return data_iter.target
    Y, Y_valid_len = data_iter.arrays[2], data_iter.arrays[3]
    lines = [tgt_vocab.to_tokens(row[:n].tolist()) for row, n in zip(Y, Y_valid_len)]
    return [line[:-1] if line and line[-1] == "<eos>" else line for line in lines]


def evaluate_bleu(net, data_iter, tgt_vocab, beam_size=1, alpha=ALPHA, k=BLEU_K, max_len=None, device=None):
    """Corpus BLEU-``k`` (uniform weights) of ``net``'s translations of ``data_iter``'s source sentences,
    greedy or with beam search, against its target sentences."""
    X, X_valid_len = data_iter.arrays[0], data_iter.arrays[1]
    max_len, device = max_len or X.shape[1], model_device(net, device)
    preds = translate_arrays(net, X, X_valid_len, tgt_vocab, max_len, beam_size, alpha, device=device)
    labels = [" ".join(r) for r in references(data_iter, tgt_vocab)]
    return corpus_bleu([" ".join(p) for p in preds], labels, k)


def check_pairs(net, **iterators):
    """The padded pairs of each loader (``{name: loader}`` with NumPy ``arrays`` (X, X_valid_len, Y,
    Y_valid_len), as :class:`~d2lrnn.data.translation.PairBatches` holds them) inside the model's
    vocabularies, their valid lengths from 0 to num_steps: checked once, before training."""
    sizes = (getattr(net.encoder, "vocab_size", None), getattr(net.decoder, "vocab_size", None))
    for name, loader in iterators.items():
        arrays = getattr(loader, "arrays", None)
        if not isinstance(arrays, tuple) or len(arrays) != 4 or \
                not all(isinstance(a, np.ndarray) for a in arrays):
            continue
        for (tokens, lengths), size, side in zip((arrays[:2], arrays[2:]), sizes, ("source", "target")):
            if size is not None:
                checked_indices(f"{name}'s {side} sentences", tokens, size, f"the {side} vocabulary")
            if tokens.ndim == 2:
                checked_lengths(f"{name}'s {side} lengths", lengths, tokens.shape[1])


class EncoderDecoderTask(Task):
    """The encoder-decoder in the training loop: no state between minibatches, the loss per valid target
    token, and on validation data the loss and, every ``bleu_every`` epochs and after the last, the
    corpus BLEU-4 of greedy translations."""

    history_keys = HISTORY_KEYS
    empty_message = "the training iterator produced no sentence pair: give more pairs"
    name, ylabel = "train_seq2seq", "loss per token / BLEU"

    def __init__(self, tgt_vocab, val_iter=None, eval_step=None, bleu_every=1, summed=False, device=None):
        self.tgt_vocab, self.val_iter, self.eval_step, self.device = tgt_vocab, val_iter, eval_step, device
        self.bleu_every, self.summed = bleu_every, summed
        validation = ["validation loss", "validation BLEU"] if val_iter is not None else []
        self.legend = ["train loss"] + validation
        self.title = f"seq2seq, {backend_name()}"

    def step_inputs(self, batch, carry):
        return tuple(batch), target_tokens(batch[3])

    def batch_total(self, loss, tokens):
        return batch_total(loss, tokens, self.summed)

    def blown_up(self, net, loss, epoch):
        """The language models' rule (:func:`~d2lrnn.training.guard.blown_up_loss`): a loss per target token
        far above the untrained decoder's log V."""
        V = len(self.tgt_vocab)
        if not blown_up_loss(loss, V):
            return None
        limit, uniform = math.log(DIVERGENCE_FACTOR * V), math.log(V)
        return (f"training loss {loss:.3g} per token in epoch {epoch} is above log({DIVERGENCE_FACTOR} x the "
                f"target vocabulary size {V}) = {limit:.3g} (a uniform guess scores log {V} = {uniform:.3g})")

    def validate(self, net, epoch, last):
        if self.val_iter is None:
            return {"val_loss": None, "val_bleu": None}
        val_loss = evaluate_loss(net, self.val_iter, self.tgt_vocab, self.eval_step, self.summed, self.device)
        scored = last() or epoch % self.bleu_every == 0
        val_bleu = evaluate_bleu(net, self.val_iter, self.tgt_vocab, device=self.device) if scored else None
        return {"val_loss": val_loss, "val_bleu": val_bleu}

    def postfix(self, row):
        info = {"loss": f"{row['train_loss']:.3f}", "tok/s": f"{row['tokens_per_sec']:,.0f}"}
        if row["val_loss"] is not None:
            info["val_loss"] = f"{row['val_loss']:.3f}"
        if row["val_bleu"] is not None:
            info["val_bleu"] = f"{row['val_bleu']:.3f}"
        return info

    def points(self, row):
        extra = [row["val_loss"], row["val_bleu"]] if self.val_iter is not None else []
        return [row["train_loss"]] + extra


def train_encoder_decoder(net, data_iter, lr, num_epochs, tgt_vocab, device=None, *, clip=1.0,
                          optimizer="adam", val_iter=None, bleu_every=1, progress=True, plot=None,
                          history=None, on_epoch=None, updater=None, time_budget=None, summed=False,
                          label_smoothing=0.0):
    """Train an encoder-decoder and return its history.

    Adam at ``lr`` (``optimizer`` 'sgd' or an optimizer object otherwise), gradients clipped to
    global norm ``clip``, teacher forcing, the loss per valid target token (``summed``: the book's sum of
    the sentences' losses, reported per token). Every epoch records the training loss and target tokens
    per second; with ``val_iter`` also the validation loss and, every ``bleu_every`` epochs (and after
    the last), the corpus BLEU-4 of greedy translations of the validation sentences. Returns a dict of
    lists: ``epoch``, ``train_loss``, ``val_loss``, ``val_bleu`` (None where not computed),
    ``tokens_per_sec``, ``seconds``.

    ``history`` continues an earlier run (``net`` holding its parameters, ``updater`` its
    optimizer state); ``label_smoothing`` eps trains on each target token smoothed by eps (the reported
    losses, training's among them, are the plain cross-entropy only when eps is 0; validation's always
    is). ``on_epoch(epoch, net, history)`` runs after every epoch (the command line
    saves its checkpoints there). ``time_budget`` (seconds) stops after the epoch that crosses it.
    A loss or parameter that becomes NaN or inf stops training with a :class:`d2lrnn.TrainingError`,
    ``net`` keeping the last finite parameters.
    """
    num_epochs = checks.positive_int("num_epochs", num_epochs)
    bleu_every = checks.positive_int("bleu_every", bleu_every)
    check_pairs(net, data_iter=data_iter, val_iter=val_iter)
    device = model_device(net, device)
    step = updater or make_seq2seq_updater(net, tgt_vocab, lr, clip, optimizer, device=device, summed=summed,
                                           label_smoothing=label_smoothing)
    validation = make_eval_step(net, tgt_vocab, summed) if val_iter else None
    task = EncoderDecoderTask(tgt_vocab, val_iter, validation, bleu_every, summed, device)
    return fit(net, data_iter, step, task, num_epochs, history=history, progress=progress, plot=plot,
               on_epoch=on_epoch, time_budget=time_budget)


def report_line(history, device=None):
    """The book's last line of a run: the last epoch's losses, BLEU and speed."""
    line = f"loss {history['train_loss'][-1]:.3f}"
    if history["val_loss"][-1] is not None:
        line += f", validation loss {history['val_loss'][-1]:.3f}, BLEU-4 {history['val_bleu'][-1]:.3f}"
    return f"{line}, {history['tokens_per_sec'][-1]:,.0f} tokens/sec on {device or ops.cpu()}"


def book_sentences():
    """The four English sentences the book translates, with the French it expects."""
    return (["go .", "i lost .", "he's calm .", "i'm home ."],
            ["va !", "j'ai perdu .", "il est calme .", "je suis chez moi ."])


def book_bleu(net, src_vocab, tgt_vocab, num_steps, beam_size=1):
    """The book's check: the mean BLEU (k = 2, the book's weights) of the four sentences' translations,
    and the translations."""
    from .bleu import bleu

    engs, fras = book_sentences()
    preds = translate(net, engs, src_vocab, tgt_vocab, num_steps, beam_size)
    scores = [bleu(p, f, k=2) for p, f in zip(preds, fras)]
    return float(np.mean(scores)) if scores else math.nan, preds
