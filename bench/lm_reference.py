"""The reference of bench/bench_lm.py: a character LSTM language model written the way PyTorch users
write it, with no d2lrnn code at all.

    nn.Embedding(V, emb) -> nn.Dropout -> nn.LSTM(emb, hidden, layers, batch_first=True)
                         -> nn.Dropout -> nn.Linear(hidden, V)

trained with ``torch.optim.Adam`` (``AdamW`` when a weight decay is asked for), the learning rate on
a cosine curve over the wall-clock training budget (set in ``param_group["lr"]`` before each step
from the training seconds so far; optional linear warm-up), ``clip_grad_norm_(..., 1.0)``, and the
mean cross-entropy of all batch x steps predictions. Each epoch the training text is cut with torch
into ``batch`` contiguous streams (after a random offset of fewer than ``num_steps`` tokens, as
d2lrnn's sequential iterator does) and read ``num_steps`` at a time, the LSTM state carried from one
minibatch to the next and detached; each epoch starts from a zero state. ``torch.set_num_threads``
limits torch to ``threads`` threads (2 in the benchmark).

Its input is the token index arrays (NumPy), so it trains and is evaluated on exactly the streams
d2lrnn uses. :func:`train` keeps a training clock that runs only during training steps: at each
``eval_at`` point it is paused while the whole validation text is evaluated with
:func:`bench.lm_eval.evaluate` (NumPy, shared with d2lrnn's runs).

The two configurations of issue 13 (``bench.bench_lm.CONFIGS``): Time Machine, embedding 64, one
layer of 256, dropout 0.3, Adam 3e-3 cosine, batch 32 x 64 steps (:func:`train`'s defaults); Tiny
Shakespeare, embedding 64, one layer of 512, dropout 0.1, Adam 3e-3 cosine, batch 64 x 64 steps.
"""

import math
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from bench.lm_eval import NUM_STEPS, STREAMS, evaluate


class CharLSTM(nn.Module):
    def __init__(self, vocab_size, emb, hidden, layers=1, dropout=0.0):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, emb)
        self.drop_in = nn.Dropout(dropout)
        self.lstm = nn.LSTM(emb, hidden, layers, batch_first=True, dropout=dropout if layers > 1 else 0.0)
        self.drop_out = nn.Dropout(dropout)
        self.head = nn.Linear(hidden, vocab_size)

    def forward(self, x, state=None):
        out, state = self.lstm(self.drop_in(self.embedding(x)), state)
        return self.head(self.drop_out(out)), state


def cosine_lr(lr, seconds, budget, warmup=0.0):
    """The learning rate after ``seconds`` of training: linear warm-up, then cosine from ``lr`` to 0."""
    if seconds < warmup:
        return lr * seconds / warmup
    u = min(1.0, (seconds - warmup) / (budget - warmup))
    return lr * 0.5 * (1.0 + math.cos(math.pi * u))


def validation_loss(model, val_tokens, streams=STREAMS, num_steps=NUM_STEPS):
    """:func:`bench.lm_eval.evaluate` of ``model`` in eval mode (no dropout, no gradients)."""
    model.eval()

    @torch.no_grad()
    def predict(X, state):
        logits, state = model(torch.from_numpy(X), state)
        return logits.numpy(), state

    try:
        return evaluate(val_tokens, predict, lambda batch: None, streams, num_steps)  # None: zero state
    finally:
        model.train()


def train(train_tokens, val_tokens, vocab_size, minutes, eval_at=None, *, emb=64, hidden=256, layers=1,
          dropout=0.3, lr=3e-3, weight_decay=0.0, warmup=0.0, batch=32, num_steps=64, clip=1.0, seed=0,
          threads=2, eval_streams=STREAMS, eval_steps=NUM_STEPS, log=None, log_every=30.0):
    """Train for ``minutes`` of training time; evaluate at each of ``eval_at`` (minutes, default the end).

    Returns ``{"curve": [[training minutes, validation nats, tokens trained], ...], "eval": the last
    evaluation's details, "tokens", "steps", "train_seconds", "tokens_per_s", "train_loss",
    "eval_seconds", "framework"}``. ``log(message)`` gets a progress line about every ``log_every``
    seconds and one per evaluation.
    """
    if threads:
        torch.set_num_threads(int(threads))
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    budget = float(minutes) * 60.0
    marks = sorted(float(m) * 60.0 for m in (eval_at or [minutes]))
    data = torch.from_numpy(np.asarray(train_tokens, dtype=np.int64))
    if len(data) < batch * (2 * num_steps) + 1:
        raise ValueError(f"{len(data)} training tokens are too few for {batch} streams of "
                         f"{2 * num_steps} steps")

    model = CharLSTM(vocab_size, emb, hidden, layers, dropout)
    if weight_decay:
        optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    else:
        optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()

    clock, tokens, steps, loss_value, curve, eval_seconds, last = 0.0, 0, 0, float("nan"), [], 0.0, None
    next_log = time.perf_counter() + log_every
    while clock < budget:
        # One epoch: after a random offset, the text as `batch` contiguous rows, read num_steps at a time.
        offset = int(rng.integers(num_steps))
        row = (len(data) - 1 - offset) // batch
        xs = data[offset:offset + batch * row].view(batch, row)
        ys = data[offset + 1:offset + 1 + batch * row].view(batch, row)
        state = None
        for i in range(0, row - num_steps + 1, num_steps):
            start = time.perf_counter()
            for group in optimizer.param_groups:
                group["lr"] = cosine_lr(lr, clock, budget, warmup)
            logits, state = model(xs[:, i:i + num_steps], state)
            loss = F.cross_entropy(logits.reshape(-1, vocab_size), ys[:, i:i + num_steps].reshape(-1))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), clip)
            optimizer.step()
            state = tuple(s.detach() for s in state)
            loss_value = loss.item()
            clock += time.perf_counter() - start
            tokens += batch * num_steps
            steps += 1
            if marks and clock >= marks[0]:  # the training clock is paused while evaluating
                last = validation_loss(model, val_tokens, eval_streams, eval_steps)
                eval_seconds += last["seconds"]
                while marks and clock >= marks[0]:
                    marks.pop(0)
                    curve.append([clock / 60.0, last["nats"], tokens])
                if log:
                    log(f"eval at {clock / 60:.2f} min: {last['nats']:.4f} nats/char "
                        f"({last['predicted']:,} chars, {last['seconds']:.1f} s)")
            elif log and time.perf_counter() >= next_log:
                log(f"{clock / 60:.2f}/{budget / 60:g} min trained, {tokens / 1e6:.2f}M tokens, "
                    f"{tokens / clock:,.0f} tokens/s, train loss {loss_value:.3f}")
            if log and time.perf_counter() >= next_log:
                next_log = time.perf_counter() + log_every
            if clock >= budget:
                break
    return {"curve": curve, "eval": last, "tokens": tokens, "steps": steps, "train_seconds": clock,
            "tokens_per_s": tokens / clock, "train_loss": loss_value, "eval_seconds": eval_seconds,
            "framework": f"torch {torch.__version__}"}
