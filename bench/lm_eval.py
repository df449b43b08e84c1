"""Validation loss of a character language model over the whole validation text, the same for every
model of bench/bench_lm.py (d2lrnn's and the plain PyTorch reference): NumPy only, no d2lrnn import.

The validation token array is cut into ``streams`` contiguous streams of equal length
``L = len(tokens) // streams`` (the last ``len(tokens) % streams`` tokens, fewer than ``streams``,
are not read). The streams are run side by side as one batch, each from a zero state, in chunks of
``num_steps`` steps with the state carried from chunk to chunk, and the cross-entropy (natural log)
of every predicted character is summed in float64. Every character of a stream except its first is
predicted: ``streams * (L - 1)`` characters in all. The result is the mean in nats per predicted
character (exp of it is the perplexity).

A model is given as two functions:

- ``begin_state(batch)``: its zero state for ``batch`` sequences;
- ``predict(X, state) -> (logits, state)``: ``X`` a NumPy int64 array ``(batch, steps)``, ``logits``
  a NumPy array ``(batch, steps, vocab)`` of unnormalised log-probabilities of the next token after
  each position (in evaluation mode: no dropout).
"""

import time

import numpy as np

#: The cut used by bench/bench_lm.py for every run.
STREAMS, NUM_STEPS = 16, 64


def cut_streams(tokens, streams=STREAMS):
    """``tokens`` (1-D) as ``(streams, L)`` contiguous rows, and how many trailing tokens were left out."""
    tokens = np.asarray(tokens).reshape(-1)
    streams = int(streams)
    if streams < 1 or len(tokens) < 2 * streams:
        raise ValueError(f"{len(tokens)} validation tokens cannot be cut into {streams} streams of at least "
                         "2 tokens: use fewer streams")
    length = len(tokens) // streams
    return tokens[:streams * length].reshape(streams, length), len(tokens) - streams * length


def cross_entropy_sum(logits, targets):
    """Sum over all positions of ``-log softmax(logits)[target]`` in float64 (``logits`` ``(..., V)``)."""
    z = np.asarray(logits, dtype=np.float64)
    z = z - z.max(axis=-1, keepdims=True)
    log_norm = np.log(np.exp(z).sum(axis=-1))
    picked = np.take_along_axis(z, np.asarray(targets, dtype=np.int64)[..., None], axis=-1)[..., 0]
    return float((log_norm - picked).sum())


def evaluate(tokens, predict, begin_state, streams=STREAMS, num_steps=NUM_STEPS):
    """Mean cross-entropy (nats per predicted character) of a model over the whole of ``tokens``.

    Returns ``{"nats", "predicted", "streams", "stream_length", "left_out", "seconds"}``: ``predicted``
    is ``streams * (stream_length - 1)`` (every character but the first of each stream), ``left_out``
    the trailing tokens not read (fewer than ``streams``).
    """
    start = time.perf_counter()
    rows, left_out = cut_streams(tokens, streams)
    X_all, Y_all = rows[:, :-1].astype(np.int64), rows[:, 1:].astype(np.int64)
    state, total = begin_state(rows.shape[0]), 0.0
    for i in range(0, X_all.shape[1], int(num_steps)):
        X, Y = X_all[:, i:i + num_steps], Y_all[:, i:i + num_steps]
        logits, state = predict(X, state)
        logits = np.asarray(logits)
        if logits.shape[:2] != X.shape:
            raise ValueError(f"predict returned logits of shape {logits.shape} for inputs {X.shape}: "
                             "expected (batch, steps, vocab)")
        total += cross_entropy_sum(logits, Y)
    predicted = Y_all.size
    return {"nats": total / predicted, "predicted": int(predicted), "streams": int(rows.shape[0]),
            "stream_length": int(rows.shape[1]), "left_out": int(left_out),
            "seconds": time.perf_counter() - start}


def describe(result):
    """One line saying what was evaluated, for the benchmark's output."""
    return (f"{result['predicted']:,} characters predicted: the validation text cut into {result['streams']} "
            f"contiguous streams of {result['stream_length']:,}, each run from a zero state; every character "
            f"but the first of each stream is predicted"
            + (f", the last {result['left_out']} not read" if result["left_out"] else ""))
