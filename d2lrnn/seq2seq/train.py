"""Training an encoder-decoder, written once above the shim: teacher forcing, the masked loss per token,
Adam (or SGD) with gradient clipping, and per epoch the validation loss and BLEU.

In training the decoder reads the true target shifted by one step (teacher forcing): its input
is ``<bos>`` followed by the target without its last token, and it is asked for the target. The
loss is the cross-entropy per valid target token (:func:`d2lrnn.seq2seq.loss.masked_token_loss`).
The update is the language models' :class:`d2lrnn.train.Updater` with this objective, so the
optimizers, clipping and compiled steps are the same code.
"""

import math
import time

import numpy as np

from .. import checks, ops
from ..backends import backend_name
from ..bleu import corpus_bleu
from ..errors import ArgumentError, DataError
from ..optim import get_optimizer
from ..progress import Animator, progress_bar
from ..train import Accumulator, LastGood, Timer, Updater, quiet_numerics
from .decode import ALPHA, translate, translate_arrays
from .loss import MaskedSoftmaxCELoss, masked_token_loss
from .modules import as_seq2seq

HISTORY_KEYS = ("epoch", "train_loss", "val_loss", "val_bleu", "tokens_per_sec", "seconds")
#: The n-gram order of the validation BLEU (uniform weights: standard BLEU-4).
BLEU_K = 4


def teacher_forcing(Y, bos):
    """The decoder's input in training: ``<bos>``, then the target ``Y`` (batch, num_steps) without its
    last token. (``Y[:, :1] * 0 + bos`` is a column of ``<bos>`` with ``Y``'s type on every backend.)"""
    return ops.concat([Y[:, :1] * 0 + bos, Y[:, :-1]], 1)


def seq2seq_objective(net, bos, training=True):
    """``(params, X, X_valid_len, Y, Y_valid_len) -> (loss, ())``: what training differentiates
    (``training`` turns dropout on). The loss is the mean per valid target token; for the reader's own
    framework model (``net.book_objective``) it is the book's, the sum of the sentences'
    :class:`MaskedSoftmaxCELoss` (see :func:`batch_total`)."""
    book = getattr(net, "book_objective", False)

    def objective(params, X, X_valid_len, Y, Y_valid_len):
        Y_hat, _ = net.forward(params, X, teacher_forcing(Y, bos), X_valid_len, training=training)
        if book:
            return ops.sum(MaskedSoftmaxCELoss()(Y_hat, Y, Y_valid_len)), ()
        return masked_token_loss(Y_hat, Y, Y_valid_len), ()

    return objective


def batch_total(net, l, n):
    """A batch's objective ``l`` (a float) as a sum over its ``n`` target tokens, for the mean per token
    over an epoch (the book's sum of sentence losses is such a sum already)."""
    return l if getattr(net, "book_objective", False) else l * n


def make_seq2seq_updater(net, tgt_vocab, lr=0.005, clip=1.0, optimizer="adam", schedule=None, device=None):
    """The training step of ``net``: an :class:`Updater` called as ``updater(params, X, X_valid_len, Y,
    Y_valid_len) -> (loss, new_params, ())``, with ``optimizer`` ('adam', 'sgd' or an object) at ``lr``
    and clipping to global norm ``clip``."""
    optimizer = get_optimizer(optimizer, checks.positive_number("lr", lr, " (the learning rate, e.g. 0.005)"))
    return Updater(net, optimizer, clip, schedule=schedule, device=device,
                   objective=seq2seq_objective(net, tgt_vocab["<bos>"]))


def evaluate_loss(net, data_iter, tgt_vocab, step=None):
    """The loss per valid target token of ``net`` on ``data_iter`` (teacher forcing, no dropout)."""
    step = step or ops.compile(seq2seq_objective(net, tgt_vocab["<bos>"], training=False))
    metric = Accumulator(2)
    with quiet_numerics():
        for X, X_valid_len, Y, Y_valid_len in data_iter:
            l, _ = step(net.params, X, X_valid_len, Y, Y_valid_len)
            n = float(ops.to_numpy(ops.sum(Y_valid_len)))
            metric.add(batch_total(net, float(ops.to_numpy(l)), n), n)
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


def evaluate_bleu(net, data_iter, tgt_vocab, beam_size=1, alpha=ALPHA, k=BLEU_K, max_len=None):
    """Corpus BLEU-``k`` (uniform weights) of ``net``'s translations of ``data_iter``'s source sentences,
    greedy or with beam search, against its target sentences."""
    X, X_valid_len = data_iter.arrays[0], data_iter.arrays[1]
    max_len = max_len or X.shape[1]
    preds = translate_arrays(net, X, X_valid_len, tgt_vocab, max_len, beam_size, alpha)
    labels = [" ".join(r) for r in references(data_iter, tgt_vocab)]
    return corpus_bleu([" ".join(p) for p in preds], labels, k)


def _check_history(history, num_epochs):
    if history is None:
        return {key: [] for key in HISTORY_KEYS}
    if not isinstance(history, dict) or any(not isinstance(history.get(k), list) for k in HISTORY_KEYS):
        raise ArgumentError("history must be the dict train_seq2seq returned (lists "
                            f"{', '.join(HISTORY_KEYS)})")
    if len(history["epoch"]) >= num_epochs:
        raise ArgumentError(f"the history already holds {len(history['epoch'])} epochs and num_epochs is "
                            f"{num_epochs}: pass a larger num_epochs to train further")
    return {key: list(history[key]) for key in HISTORY_KEYS}


def train_seq2seq(net, data_iter, lr, num_epochs, tgt_vocab, device=None, *, clip=1.0, optimizer="adam",
                  val_iter=None, bleu_every=1, progress=True, plot=None, verbose=True, history=None,
                  on_epoch=None, updater=None, time_budget=None):
    """Train an encoder-decoder (the book's ``train_seq2seq``) and return its history.

    Adam at ``lr`` (``optimizer`` 'sgd' or an optimizer object otherwise), gradients clipped to
    global norm ``clip``, teacher forcing, the loss per valid target token. Every epoch records the
    training loss and target tokens per second; with ``val_iter`` also the validation loss and,
    every ``bleu_every`` epochs (and after the last), the corpus BLEU-4 of greedy translations of the
    validation sentences. Returns a dict of lists: ``epoch``, ``train_loss``, ``val_loss``,
    ``val_bleu`` (None where not computed), ``tokens_per_sec``, ``seconds``.

    ``history`` continues an earlier run (``net`` holding its parameters, ``updater`` its
    optimizer state); ``on_epoch(epoch, net, history)`` runs after every epoch (the command line
    saves its checkpoints there). ``time_budget`` (seconds) stops after the epoch that crosses it.
    A loss or parameter that becomes NaN or inf stops training with a :class:`d2lrnn.TrainingError`,
    ``net`` keeping the last finite parameters.

    ``net`` may be the reader's own framework model (``d2l.EncoderDecoder`` of the book's framework
    ``Encoder`` and ``Decoder`` subclasses): then, as the book's ``train_seq2seq`` does, it starts from
    new Xavier-uniform weights (PyTorch, MXNet; not when continuing a ``history``), trains on the sum of
    the sentences' losses, and holds the trained values afterwards.
    """
    model = as_seq2seq(net)
    if model is not net:
        hooks = ops.imperative()
        if history is None and hooks.book_seq2seq_init is not None:
            hooks.book_seq2seq_init(net, device)
        bos = tgt_vocab["<bos>"]
        model.infer_shapes(data_iter, lambda X, X_valid_len, Y, _: (X, teacher_forcing(Y, bos), X_valid_len))
        try:
            return train_seq2seq(model, data_iter, lr, num_epochs, tgt_vocab, device, clip=clip,
                                 optimizer=optimizer, val_iter=val_iter, bleu_every=bleu_every,
                                 progress=progress, plot=plot, verbose=verbose, history=history,
                                 on_epoch=on_epoch, updater=updater, time_budget=time_budget)
        finally:
            model.write_back()
    num_epochs = checks.positive_int("num_epochs", num_epochs)
    bleu_every = checks.positive_int("bleu_every", bleu_every)
    history = _check_history(history, num_epochs)
    step = updater or make_seq2seq_updater(net, tgt_vocab, lr, clip, optimizer, device=device)
    eval_step = ops.compile(seq2seq_objective(net, tgt_vocab["<bos>"], training=False)) if val_iter else None
    first = len(history["epoch"]) + 1
    legend = ["train loss"] + (["validation loss", "validation BLEU"] if val_iter is not None else [])
    animator = Animator(xlabel="epoch", ylabel="loss per token / BLEU", legend=legend,
                        xlim=[1, max(num_epochs, 2)], enabled=plot, title=f"seq2seq, {backend_name()}")
    for i, epoch in enumerate(history["epoch"]):
        animator.add(epoch, [history["train_loss"][i]] + ([history["val_loss"][i], history["val_bleu"][i]]
                                                          if val_iter is not None else []))
    start = time.perf_counter() - (history["seconds"][-1] if history["seconds"] else 0.0)
    last_good = LastGood(net.params)
    try:
        with progress_bar(total=(num_epochs - first + 1) * len(data_iter), unit="batch", disable=not progress,
                          desc="train") as bar:
            for epoch in range(first, num_epochs + 1):
                loss, speed = train_epoch_seq2seq(net, data_iter, step, last_good, epoch, bar.update)
                history["epoch"].append(epoch)
                history["train_loss"].append(loss)
                history["tokens_per_sec"].append(speed)
                info, points = {"loss": f"{loss:.3f}", "tok/s": f"{speed:,.0f}"}, [loss]
                if val_iter is not None:
                    val_loss = evaluate_loss(net, val_iter, tgt_vocab, eval_step)
                    out_of_time = time_budget is not None and time.perf_counter() - start >= time_budget
                    last = epoch == num_epochs or out_of_time
                    val_bleu = evaluate_bleu(net, val_iter, tgt_vocab) if last or epoch % bleu_every == 0 \
                        else None
                    history["val_loss"].append(val_loss)
                    history["val_bleu"].append(val_bleu)
                    info["val_loss"] = f"{val_loss:.3f}"
                    if val_bleu is not None:
                        info["val_bleu"] = f"{val_bleu:.3f}"
                    points += [val_loss, val_bleu]
                else:
                    history["val_loss"].append(None)
                    history["val_bleu"].append(None)
                history["seconds"].append(time.perf_counter() - start)
                bar.set_postfix(info, refresh=False)
                animator.add(epoch, points)
                if on_epoch is not None:
                    on_epoch(epoch, net, history)
                if time_budget is not None and history["seconds"][-1] >= time_budget:
                    break
    finally:
        animator.close()
    if verbose:
        line = f"loss {history['train_loss'][-1]:.3f}"
        if val_iter is not None:
            line += f", validation loss {history['val_loss'][-1]:.3f}, BLEU-4 {history['val_bleu'][-1]:.3f}"
        print(f"{line}, {history['tokens_per_sec'][-1]:,.0f} tokens/sec on {device or ops.cpu()}")
    return history


def train_epoch_seq2seq(net, data_iter, step, last_good, epoch=1, on_batch=None):
    """One pass over ``data_iter``: (loss per valid target token, target tokens per second)."""
    metric, timer = Accumulator(2), Timer()
    with quiet_numerics():
        for i, (X, X_valid_len, Y, Y_valid_len) in enumerate(data_iter, 1):
            params = net.params
            l, new_params, _ = step(params, X, X_valid_len, Y, Y_valid_len)
            l = last_good.check_step(net, params, l, new_params, epoch, i)
            n = float(ops.to_numpy(ops.sum(Y_valid_len)))
            metric.add(batch_total(net, l, n), n)
            if on_batch is not None:
                on_batch(1)
    if metric[1] == 0:
        raise DataError("the training iterator produced no sentence pair: give more pairs")
    return metric[0] / metric[1], metric[1] / timer.stop()


def book_sentences():
    """The four English sentences the book translates, with the French it expects."""
    return (["go .", "i lost .", "he's calm .", "i'm home ."],
            ["va !", "j'ai perdu .", "il est calme .", "je suis chez moi ."])


def book_bleu(net, src_vocab, tgt_vocab, num_steps, beam_size=1):
    """The book's check: the mean BLEU (k = 2, the book's weights) of the four sentences' translations,
    and the translations."""
    from ..bleu import bleu

    engs, fras = book_sentences()
    preds = translate(net, engs, src_vocab, tgt_vocab, num_steps, beam_size)
    scores = [bleu(p, f, k=2) for p, f in zip(preds, fras)]
    return float(np.mean(scores)) if scores else math.nan, preds
