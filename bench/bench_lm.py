"""Wall-clock language-model benchmark: validation loss after a fixed training time, d2lrnn against a
plain PyTorch character LSTM (bench/lm_reference.py), on the same token streams.

    .tox/numpy/bin/python bench/bench_lm.py --corpus tinyshakespeare --minutes 10 --eval-at 1 3 5 10 \\
        --runs torch:concise torch:scratch numpy:scratch reference
    .tox/numpy/bin/python bench/bench_lm.py --corpus timemachine --minutes 10 --eval-at 1 3 5 10

Runs (``--runs``, in that order, one after another, never at the same time):

- ``BACKEND:KIND``: d2lrnn's model ``KIND`` ('scratch' or 'concise', :func:`d2lrnn.make_model`) on
  backend ``BACKEND`` (numpy, torch, tensorflow, mxnet), trained with ``d2l.Updater`` + ``d2l.Adam``
  and a cosine ``d2l.Schedule`` over the wall-clock budget, in ``.tox/BACKEND/bin/python``;
- ``BACKEND:train``: the ``d2lrnn train`` command itself (in the child process, ``cli.main``) for
  ``epochs=N`` epochs (required; Adam with cosine decay over them, no early stopping), its curve read
  from the run's metrics.csv: the command's own validation loss after every epoch against the wall
  time since its training started, evaluations included; the table shows, at each ``--eval-at``
  time, the last epoch finished by then;
- ``reference``: bench/lm_reference.py (Embedding -> Dropout -> nn.LSTM -> Dropout -> Linear, Adam,
  cosine learning rate over the budget) in ``.tox/torch/bin/python``; d2lrnn (on NumPy) only loads
  the token arrays before its training starts.

A run name may end in ``:key=value,...`` to change that run's settings (e.g. ``torch:scratch:cell=gru,
hidden=256`` or ``reference:emb=128``; the keys are the flags below, '-' written as '_').

Each run is a fresh process (``--single``, which prints one JSON line: its curve of [training minutes,
validation nats, tokens trained] at the ``--eval-at`` times, its settings and tokens/s). The training
clock runs during training steps only (batches, forward, backward, update; the first steps' compile
time included) and is paused for evaluation: the whole validation text, cut into ``--eval-streams``
contiguous streams run from a zero state in chunks of ``--eval-steps`` (bench/lm_eval.py, the same
NumPy code for every run). Defaults per corpus are the issue's (:data:`CONFIGS`); d2lrnn has no
embedding (one-hot inputs), so its ``--output-dropout`` takes the reference's ``--dropout`` unless
given, ``--input-dropout`` (whole tokens dropped) is 0, and ``--dropout`` acts between layers.
Tiny Shakespeare is read raw (every character a token, 65 of them: ``--raw``, the default there);
other corpora are cleaned the book's way (28 symbols) unless ``--raw``. The split is d2lrnn's: the
last 10% of the token stream is validation.

At the end the parent writes a table (validation loss at each ``--eval-at`` time; perplexity too for
the Time Machine), the command of every row, the machine and date into the ``lm-CORPUS`` section of
bench/RESULTS.md (``--out`` for another file), and a plot of validation loss against training
minutes: bench/lm_CORPUS.png (next to the ``--out`` file when one is given; ``--plot`` to choose).
"""

import argparse
import datetime
import json
import math
import os
import pathlib
import platform
import resource
import shlex
import subprocess
import sys
import time

if __name__ == "__main__":  # before NumPy or a framework starts its thread pools
    _threads = "2"
    for _i, _a in enumerate(sys.argv):
        if _a == "--threads" and _i + 1 < len(sys.argv):
            _threads = sys.argv[_i + 1]
    for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TF_NUM_INTRAOP_THREADS",
                  "TF_NUM_INTEROP_THREADS"):
        os.environ.setdefault(_name, _threads)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench._common import cpu_name, tox_python  # noqa: E402
from bench.lm_eval import NUM_STEPS, STREAMS, describe, evaluate  # noqa: E402
from bench.results import RESULTS, write_section  # noqa: E402

#: The issue's configurations by corpus (the reference's model and both sides' training); a corpus
#: not named here takes the Time Machine's.
CONFIGS = {
    "timemachine": {"emb": 64, "hidden": 256, "layers": 1, "dropout": 0.3, "lr": 3e-3, "batch": 32,
                    "num_steps": 64},
    "tinyshakespeare": {"emb": 64, "hidden": 512, "layers": 1, "dropout": 0.1, "lr": 3e-3, "batch": 64,
                        "num_steps": 64},
}
#: d2lrnn's side: the frameworks' initialization (``init='uniform'``) starts faster than the book's.
DEFAULTS = {"cell": "lstm", "init": "uniform", "input_dropout": 0.0, "output_dropout": None,
            "weight_decay": 0.0, "warmup": 0.0, "clip": 1.0, "seed": 0, "model": "scratch", "epochs": None,
            "precision": "float32", "weight_drop": 0.0, "ema": 0.0}
#: Every setting of a run, with its type.
KEYS = {"emb": int, "hidden": int, "layers": int, "cell": str, "init": str, "dropout": float,
        "input_dropout": float, "output_dropout": float, "lr": float, "weight_decay": float, "warmup": float,
        "batch": int, "num_steps": int, "clip": float, "seed": int, "model": str, "epochs": int,
        "precision": str, "weight_drop": float, "ema": float}
REFERENCE_KEYS = ("emb", "hidden", "layers", "dropout", "lr", "weight_decay", "warmup", "batch", "num_steps",
                  "clip", "seed")
#: What only ``d2lrnn train`` has among the settings.
TRAIN_ONLY = ("model", "epochs", "precision", "weight_drop", "ema")
D2LRNN_KEYS = tuple(k for k in KEYS if k != "emb" and k not in TRAIN_ONLY)
#: ``BACKEND:train`` runs: ``d2lrnn train`` itself, which also needs the model kind and its epochs.
TRAIN_KEYS = (*D2LRNN_KEYS, *TRAIN_ONLY)
BACKENDS = ("numpy", "torch", "tensorflow", "mxnet")
KINDS = ("scratch", "concise", "train")
DEFAULT_RUNS = ("torch:concise", "torch:scratch", "numpy:scratch", "reference")
VAL_FRACTION = 0.1


class BenchError(Exception):
    """A bad run name or setting: one line for the user."""


# ------------------------------------------------------------------ settings

def parse_run(spec):
    """``'torch:concise:hidden=256,cell=gru'`` -> ``('torch', 'concise', {'hidden': 256, 'cell': 'gru'})``;
    ``'reference[:...]'`` -> ``('torch', 'reference', {...})``."""
    parts = spec.split(":")
    if parts[0] == "reference":
        backend, kind, rest = "torch", "reference", parts[1:]
    elif len(parts) >= 2 and parts[0] in BACKENDS and parts[1] in KINDS:
        backend, kind, rest = parts[0], parts[1], parts[2:]
    else:
        raise BenchError(f"unknown run {spec!r}: use BACKEND:KIND (BACKEND one of {', '.join(BACKENDS)}, "
                         f"KIND scratch or concise) or 'reference', optionally followed by :key=value,...")
    allowed = _keys(kind)
    overrides = {}
    for item in filter(None, ",".join(rest).split(",")):
        key, sep, value = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or key not in allowed:
            raise BenchError(f"run {spec!r}: {item!r} is not key=value with a key of {', '.join(allowed)}")
        try:
            overrides[key] = KEYS[key](value)
        except ValueError:
            raise BenchError(f"run {spec!r}: {key} must be a {KEYS[key].__name__}, got {value!r}") from None
    return backend, kind, overrides


def resolve(corpus, kind, flags=None, overrides=None):
    """A run's settings: the corpus's :data:`CONFIGS`, then the command line's ``flags`` (None: not
    given), then the run's own ``overrides``; only the keys the run uses."""
    config = dict(CONFIGS.get(corpus, CONFIGS["timemachine"]), **DEFAULTS)
    config.update({k: v for k, v in (flags or {}).items() if k in KEYS and v is not None})
    config.update(overrides or {})
    if config["output_dropout"] is None:
        config["output_dropout"] = config["dropout"]
    return {k: config[k] for k in _keys(kind)}


def _keys(kind):
    return {"reference": REFERENCE_KEYS, "train": TRAIN_KEYS}.get(kind, D2LRNN_KEYS)


def default_raw(corpus):
    """Raw characters for Tiny Shakespeare (the anchors' 65 symbols), the book's cleaning otherwise."""
    return corpus == "tinyshakespeare"


def eval_points(minutes, eval_at):
    """The sorted evaluation times in minutes, the end of training always among them."""
    if not float(minutes) > 0:
        raise BenchError(f"--minutes is {minutes:g}: give a positive number of training minutes")
    points = sorted({float(m) for m in (eval_at or [])} | {float(minutes)})
    if points[0] <= 0 or points[-1] > float(minutes):
        raise BenchError(f"--eval-at {' '.join(f'{m:g}' for m in eval_at)}: every time must be in (0, "
                         f"--minutes {minutes:g}]")
    return points


# ------------------------------------------------------------------ one run (in its own process)

def _logger(label):
    wall = time.perf_counter()

    def log(message):
        print(f"[{label} +{(time.perf_counter() - wall) / 60:.1f} min wall] {message}", file=sys.stderr,
              flush=True)
    return log


def load_tokens(corpus, raw, max_tokens=-1):
    """Training and validation index arrays (d2lrnn's split) and the vocabulary size."""
    from d2lrnn.data import load_corpus, train_val_split

    indices, vocab = load_corpus(corpus, "char", max_tokens, raw=raw)
    train, val = train_val_split(indices, VAL_FRACTION)
    return train, val, len(vocab)


def d2lrnn_predict(net):
    """bench/lm_eval.py's ``predict(X, state)`` for a d2lrnn model (its current ``net.params``, no dropout):
    NumPy in, NumPy logits ``(batch, steps, vocab)`` out (d2lrnn's are step-major ``(steps * batch, V)``)."""
    from d2lrnn import ops

    @ops.compile
    def forward(params, X, state):
        return net.forward(params, X, state, training=False)

    def predict(X, state):
        logits, state = forward(net.params, ops.from_numpy(X), state)
        batch_size, steps = X.shape
        return ops.to_numpy(logits).reshape(steps, batch_size, -1).transpose(1, 0, 2), state

    return predict


def run_d2lrnn(corpus, kind, minutes, eval_at=None, *, raw=False, max_tokens=-1, cell="lstm", init="uniform",
               hidden=256,
               layers=1, dropout=0.0, input_dropout=0.0, output_dropout=0.0, lr=3e-3, weight_decay=0.0,
               warmup=0.0, batch=32, num_steps=64, clip=1.0, seed=0, threads=None, eval_streams=STREAMS,
               eval_steps=NUM_STEPS, log=None, log_every=30.0, now=time.perf_counter):
    """Train d2lrnn's ``kind`` model on the active backend for ``minutes`` of training time, evaluating
    the whole validation text (bench/lm_eval.py) at each of ``eval_at`` with the training clock paused.
    ``now`` is the clock (seconds; tests pass one that ticks per call, so the budget is in steps).

    Returns the same fields as :func:`bench.lm_reference.train` plus ``vocab_size``, ``train_size``
    and ``val_size``.
    """
    import d2lrnn as d2l
    from d2lrnn import ops

    if threads:
        ops.set_num_threads(int(threads))
    train_iter, val_iter, vocab = d2l.load_data_lm(corpus, batch, num_steps, False, max_tokens, VAL_FRACTION,
                                                   seed=seed, raw=raw)
    val_tokens = val_iter.corpus
    d2l.manual_seed(seed)
    net = d2l.make_model(kind, len(vocab), hidden, cell=cell, num_layers=layers, dropout=dropout,
                         input_dropout=input_dropout, output_dropout=output_dropout, init=init)
    budget = float(minutes) * 60.0
    schedule = d2l.Schedule(lr, total=budget, warmup=warmup, decay="cosine")
    clock = 0.0  # training seconds so far: the schedule's x
    updater = d2l.Updater(net, d2l.Adam(lr, weight_decay=weight_decay), clip=clip,
                          schedule=lambda t: schedule(clock))
    predict = d2lrnn_predict(net)
    marks = [m * 60.0 for m in eval_points(minutes, eval_at)]
    tokens, steps, loss_value, curve, eval_seconds, last = 0, 0, float("nan"), [], 0.0, None
    next_log = now() + log_every
    while clock < budget:
        state, batches = None, iter(train_iter)  # an epoch: a new random offset, a zero state
        while clock < budget:
            start = now()
            batch_xy = next(batches, None)
            if batch_xy is None:
                clock += now() - start
                break
            X, Y = batch_xy
            if state is None:
                state = net.begin_state(batch)
            loss, net.params, state = updater(net.params, X, Y, state)
            loss_value = float(ops.to_numpy(loss))  # waits for the step to finish
            clock += now() - start
            tokens += batch * num_steps
            steps += 1
            if marks and clock >= marks[0]:  # the training clock is paused while evaluating
                last = evaluate(val_tokens, predict, net.begin_state, eval_streams, eval_steps)
                eval_seconds += last["seconds"]
                while marks and clock >= marks[0]:
                    marks.pop(0)
                    curve.append([clock / 60.0, last["nats"], tokens])
                if log:
                    log(f"eval at {clock / 60:.2f} min: {last['nats']:.4f} nats/char "
                        f"({last['predicted']:,} chars, {last['seconds']:.1f} s)")
            elif log and now() >= next_log:
                log(f"{clock / 60:.2f}/{budget / 60:g} min trained, {tokens / 1e6:.2f}M tokens, "
                    f"{tokens / clock:,.0f} tokens/s, train loss {loss_value:.3f}")
            if log and now() >= next_log:
                next_log = now() + log_every
    return {"curve": curve, "eval": last, "tokens": tokens, "steps": steps, "train_seconds": clock,
            "tokens_per_s": tokens / clock, "train_loss": loss_value, "eval_seconds": eval_seconds,
            "framework": _framework(d2l.backend_name()), "vocab_size": len(vocab),
            "train_size": len(train_iter.corpus), "val_size": len(val_tokens)}


def train_argv(corpus, out, *, backend, raw=False, max_tokens=-1, model="scratch", epochs=None, cell="lstm",
               init="uniform", hidden=256, layers=1, dropout=0.0, input_dropout=0.0, output_dropout=0.0,
               lr=3e-3, weight_decay=0.0, warmup_steps=0, batch=32, num_steps=64, clip=1.0, seed=0,
               precision="float32", weight_drop=0.0, ema=0.0):
    """The ``d2lrnn train`` arguments of a ``BACKEND:train`` run: Adam with cosine decay over ``epochs``,
    no early stopping, the last 10% of the text for validation."""
    if not epochs:
        raise BenchError("a BACKEND:train run needs epochs=N (passes over the training text, cosine decay "
                         "over them): pick N so that they fit --minutes, e.g. torch:train:epochs=14")
    argv = ["train", "--backend", backend, "--corpus", str(corpus), "--model", model, "--cell", cell,
            "--init", init, "--hidden", str(hidden), "--num-layers", str(layers),
            "--input-dropout", f"{input_dropout:g}", "--output-dropout", f"{output_dropout:g}",
            "--optimizer", "adam", "--lr", f"{lr:g}", "--weight-decay", f"{weight_decay:g}",
            "--schedule", "cosine", "--warmup", str(int(warmup_steps)), "--clip", f"{clip:g}",
            "--batch-size", str(batch), "--num-steps", str(num_steps), "--epochs", str(epochs),
            "--patience", "0", "--sampling", "sequential", "--val-fraction", f"{VAL_FRACTION:g}",
            "--max-tokens", str(max_tokens), "--seed", str(seed), "--out", str(out), "--no-progress"]
    if precision != "float32":
        argv += ["--precision", precision]
    if weight_drop:
        argv += ["--weight-drop", f"{weight_drop:g}"]
    if ema:
        argv += ["--ema", f"{ema:g}"]
    if layers > 1:  # d2lrnn train refuses dropout between layers where there is one layer
        argv += ["--dropout", f"{dropout:g}"]
    return argv + (["--raw"] if raw else [])


def marks_of(epochs_curve, points):
    """For each evaluation time, the last epoch finished by then: ``[minutes, nats, tokens]``, or None."""
    marks = []
    for point in points:
        done = [row for row in epochs_curve if row[0] <= point + 1e-9]
        marks.append(done[-1] if done else None)
    return marks


def run_train(corpus, minutes, eval_at=None, *, raw=False, max_tokens=-1, threads=None, log=None, warmup=0.0,
              epochs=None, eval_streams=STREAMS, eval_steps=NUM_STEPS, **config):
    """``d2lrnn train`` itself (``cli.main``, in this process) for ``epochs`` epochs, its curve read from the
    run's metrics.csv: after every epoch its validation loss (its own evaluation, d2l.VAL_STREAMS streams)
    and the wall time since training started, evaluations and checkpoint writes included. The table
    takes, at each of ``eval_at``, the last epoch finished by then. ``warmup`` (seconds) becomes the
    same fraction of the run's steps as of ``minutes``."""
    import contextlib
    import csv
    import tempfile

    import d2lrnn as d2l
    from d2lrnn import cli, ops

    if threads:
        ops.set_num_threads(int(threads))
    train_iter, val_iter, vocab = d2l.load_data_lm(corpus, config["batch"], config["num_steps"], False,
                                                   max_tokens, VAL_FRACTION, seed=config["seed"], raw=raw)
    steps = len(train_iter)
    epoch_tokens = steps * config["batch"] * config["num_steps"]
    warmup_steps = round(float(warmup) / (float(minutes) * 60.0) * (epochs or 0) * steps)
    with tempfile.TemporaryDirectory() as tmp:
        argv = train_argv(corpus, pathlib.Path(tmp) / "run", backend=d2l.backend_name(), raw=raw,
                          max_tokens=max_tokens, epochs=epochs, warmup_steps=warmup_steps, **config)
        if log:
            log("d2lrnn " + " ".join(map(shlex.quote, argv)))
        with contextlib.redirect_stdout(sys.stderr):  # this process's stdout carries the JSON line only
            status = cli.main(argv)
        if status:
            raise BenchError(f"d2lrnn {' '.join(argv)} exited with status {status}")
        with open(pathlib.Path(tmp) / "run" / "metrics.csv", newline="") as f:
            rows = list(csv.DictReader(f))
    epochs_curve = [[float(r["seconds"]) / 60.0, math.log(float(r["val_ppl"])),
                     int(r["epoch"]) * epoch_tokens] for r in rows]
    points = eval_points(minutes, eval_at)
    curve = [row for row in marks_of(epochs_curve, points) if row is not None]
    seconds = epochs_curve[-1][0] * 60.0
    tokens = epochs_curve[-1][2]
    return {"curve": curve, "epochs_curve": epochs_curve, "tokens": tokens,
            "steps": steps * len(rows), "train_seconds": seconds, "tokens_per_s": tokens / seconds,
            "train_loss": math.log(float(rows[-1]["train_ppl"])), "eval_seconds": 0.0,
            "eval": {"cli": True, "predicted": val_iter.num_tokens,
                     "streams": val_iter.batch_size},
            "framework": _framework(d2l.backend_name()), "vocab_size": len(vocab),
            "train_size": len(train_iter.corpus), "val_size": len(val_iter.corpus), "argv": argv,
            "warmup_steps": warmup_steps}


def run_reference(corpus, minutes, eval_at=None, *, raw=False, max_tokens=-1, threads=2, log=None,
                  eval_streams=STREAMS, eval_steps=NUM_STEPS, log_every=30.0, **config):
    """bench/lm_reference.py's model trained on the same token arrays (loaded with d2lrnn beforehand)."""
    train, val, vocab_size = load_tokens(corpus, raw, max_tokens)
    from bench import lm_reference

    result = lm_reference.train(train, val, vocab_size, minutes, eval_points(minutes, eval_at),
                                threads=threads, eval_streams=eval_streams, eval_steps=eval_steps, log=log,
                                log_every=log_every, **config)
    return dict(result, vocab_size=vocab_size, train_size=len(train), val_size=len(val))


def _framework(backend):
    import numpy

    if backend == "numpy":
        import autograd  # noqa: F401

        return f"numpy {numpy.__version__} + autograd"
    module = __import__(backend)
    return f"{backend} {getattr(module, '__version__', '?')}"


def single(args):
    """``--single``: one run in this process; its JSON line on stdout."""
    backend, kind, overrides = parse_run(args.single)
    config = resolve(args.corpus, kind, vars(args), overrides)
    label = args.label or args.single
    log = _logger(label)
    raw = default_raw(args.corpus) if args.raw is None else args.raw
    points = eval_points(args.minutes, args.eval_at)
    common = {"raw": raw, "max_tokens": args.max_tokens, "threads": args.threads, "log": log,
              "eval_streams": args.eval_streams, "eval_steps": args.eval_steps}
    wall = time.perf_counter()
    if kind == "reference":
        result = run_reference(args.corpus, args.minutes, points, **common, **config)
    else:
        import d2lrnn

        active = d2lrnn.backend_name()
        if active != backend:
            raise BenchError(f"run {args.single!r} needs D2LRNN_BACKEND={backend}, this process has {active}")
        if kind == "train":
            result = run_train(args.corpus, args.minutes, points, **common, **config)
        else:
            result = run_d2lrnn(args.corpus, kind, args.minutes, points, **common, **config)
    result.update(run=label, spec=args.single, backend=backend, kind=kind, corpus=args.corpus, raw=raw,
                  minutes=args.minutes, eval_at=points, config=config, threads=args.threads,
                  max_tokens=args.max_tokens, wall_seconds=time.perf_counter() - wall,
                  peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    log(f"done: {result['curve'][-1][1]:.4f} nats/char after {result['train_seconds'] / 60:.2f} min, "
        f"{result['tokens_per_s']:,.0f} tokens/s")
    print(json.dumps(result), flush=True)
    return result


# ------------------------------------------------------------------ the parent: every run, then the report

def _show(path):
    path = pathlib.Path(path)
    try:
        return str(path.relative_to(ROOT))
    except ValueError:
        return str(path)


def child_command(args, spec, tox_dir):
    """(environment, argv, the copy-pasteable command from the repository root) of one run."""
    backend, kind, overrides = parse_run(spec)
    base = spec.split(":")[0] if kind == "reference" else ":".join(spec.split(":")[:2])
    config = resolve(args.corpus, kind, vars(args), overrides)
    raw = default_raw(args.corpus) if args.raw is None else args.raw
    env = {"D2LRNN_BACKEND": "numpy" if kind == "reference" else backend}
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TF_NUM_INTRAOP_THREADS",
                 "TF_NUM_INTEROP_THREADS"):
        env[name] = str(args.threads)
    python = tox_python(backend, tox_dir)
    argv = [str(python), str(ROOT / "bench" / "bench_lm.py"), "--single", base, "--corpus", str(args.corpus),
            "--minutes", f"{args.minutes:g}", "--eval-at", *[f"{m:g}" for m in eval_points(args.minutes,
                                                                                        args.eval_at)],
            "--raw" if raw else "--no-raw", "--threads", str(args.threads), "--eval-streams",
            str(args.eval_streams), "--eval-steps", str(args.eval_steps)]
    if args.max_tokens != -1:
        argv += ["--max-tokens", str(args.max_tokens)]
    for key, value in config.items():
        argv += [f"--{key.replace('_', '-')}", f"{value:g}" if isinstance(value, float) else str(value)]
    if base != spec:
        argv += ["--label", spec]
    shown = [_show(python), "bench/bench_lm.py", *argv[2:]]
    command = " ".join([*(f"{k}={v}" for k, v in env.items()), *map(shlex.quote, shown)])
    return env, argv, command


def run_all(args):
    tox_dir = pathlib.Path(args.tox).resolve()
    specs = list(args.runs)
    for spec in specs:
        backend, _, _ = parse_run(spec)
        if not tox_python(backend, tox_dir).exists():
            raise BenchError(f"run {spec!r} needs {_show(tox_python(backend, tox_dir))}: create it with "
                             f"`tox --notest -e {backend}`, or pass --tox DIR")
    start, results = time.perf_counter(), []
    expected = len(specs) * args.minutes
    print(f"[bench_lm] {len(specs)} runs of {args.minutes:g} min of training each on {args.corpus} (at least "
          f"{expected:g} min, plus start-up and evaluations), one after another", file=sys.stderr, flush=True)
    for i, spec in enumerate(specs, 1):
        env, argv, command = child_command(args, spec, tox_dir)
        print(f"[bench_lm] run {i}/{len(specs)}: {spec} ({_show(argv[0])}), "
              f"{(time.perf_counter() - start) / 60:.1f} min elapsed\n[bench_lm]   {command}",
              file=sys.stderr, flush=True)
        child_env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="2", **env)
        done = subprocess.run(argv, env=child_env, stdout=subprocess.PIPE, text=True, cwd=ROOT)
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        if done.returncode == 0 and lines:
            result = json.loads(lines[-1])
        else:
            result = {"run": spec, "error": f"exit status {done.returncode}"}
            print(f"[bench_lm] {spec} failed ({result['error']}); going on", file=sys.stderr, flush=True)
        result["command"] = command
        results.append(result)
    print(f"[bench_lm] all runs done in {(time.perf_counter() - start) / 60:.1f} min", file=sys.stderr,
          flush=True)
    return results


def machine():
    return {"cpu": cpu_name(), "cores": os.cpu_count(), "date": datetime.date.today().isoformat(),
            "python": platform.python_version()}


def _model_of(result):
    c = result["config"]
    if result["kind"] == "reference":
        what = (f"plain torch: Embedding({c['emb']}) + nn.LSTM {c['layers']}x{c['hidden']}, dropout "
                f"{c['dropout']:g}")
    else:
        named = (("dropout", "dropout"), ("input dropout", "input_dropout"),
                 ("output dropout", "output_dropout"), ("weight drop", "weight_drop"))
        drops = ", ".join(f"{name} {c[key]:g}" for name, key in named  # between layers: only with 2+
                          if c.get(key) and (key != "dropout" or c["layers"] > 1))
        kind = f"`d2lrnn train` {c['model']}" if result["kind"] == "train" else f"d2lrnn {result['kind']}"
        what = (f"{kind} {c['cell'].upper()} {c['layers']}x{c['hidden']} on {result['backend']}, init "
                f"{c.get('init', 'normal')}" + (f", {drops}" if drops else ""))
    optim = "AdamW" if c["weight_decay"] else "Adam"
    warm = f", warm-up {c['warmup']:g} s" if c["warmup"] else ""
    if result["kind"] == "train":
        warm = (f", warm-up {result['warmup_steps']} steps" if result.get("warmup_steps") else "") + \
            f", {c['epochs']} epochs"
        warm += f", EMA {c['ema']:g}" if c.get("ema") else ""
        warm += f", {c['precision']} products" if c.get("precision", "float32") != "float32" else ""
    wd = f" wd {c['weight_decay']:g}" if c["weight_decay"] else ""
    return f"{what}; {optim} {c['lr']:g}{wd} cosine{warm}; {c['batch']}x{c['num_steps']}"


def section_body(corpus, minutes, eval_at, results, command, info=None, plot=None, out=RESULTS):
    """The markdown of the ``lm-CORPUS`` section."""
    info = info or machine()
    points = eval_points(minutes, eval_at)
    ppl = corpus == "timemachine"
    ok = [r for r in results if "error" not in r]
    unit = "nats per character (perplexity)" if ppl else "nats per character"
    lines = [f"### Language-model benchmark: {corpus}, {minutes:g} minutes of training per run", "",
             f"Validation loss in {unit}, the mean over the whole validation text, after each run's training "
             "time (the training clock is paused while evaluating). Produced by bench/bench_lm.py.", ""]
    head = ["run", "model and training", *[f"{m:g} min" for m in points], "tokens/s", "tokens trained"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['run']} | failed ({r['error']}) |" + " |" * (len(head) - 2))
            continue
        cells = []
        epochs = r.get("epochs_curve")
        for point in marks_of(epochs, points) if epochs else r["curve"]:
            if point is None:
                cells.append("(no epoch yet)")
                continue
            nats = point[1]
            cells.append(f"{nats:.3f} ({math.exp(nats):.2f})" if ppl else f"{nats:.3f}")
            if epochs:
                cells[-1] += f" (epoch {epochs.index(point) + 1}, at {point[0]:.2f})"
        cells += [""] * (len(points) - len(cells))
        lines.append(f"| {r['run']} | {_model_of(r)} | " + " | ".join(cells)
                     + f" | {r['tokens_per_s']:,.0f} | {r['tokens']:,} |")
    lines.append("")
    if plot is not None:
        rel = os.path.relpath(pathlib.Path(plot).resolve(), pathlib.Path(out).resolve().parent)
        lines += [f"![validation loss against training minutes]({rel})", ""]
    trains = [r for r in ok if r["kind"] == "train"]
    if trains:
        lines += ["`d2lrnn train` rows: the command itself trains for its epochs (cosine decay over them) "
                  "and evaluates after every epoch, on its own validation batches (the validation text cut "
                  f"into {trains[0]['eval']['streams']} streams, `d2l.VAL_STREAMS`); each cell is the last "
                  "epoch finished by that time on the wall clock since training started, its evaluations and "
                  "checkpoint writes included (epoch, minutes).", ""]
    plain = [r for r in ok if r["kind"] != "train"]
    if plain:
        r = plain[0]
        text = "raw characters (case, punctuation, line breaks)" if r["raw"] else "the book's cleaned text"
        lines += [f"Data: {text}, {r['vocab_size'] - 1} symbols ({r['vocab_size']} tokens with `<unk>`); the "
                  f"first 90% ({r['train_size']:,} characters) trains, the last 10% ({r['val_size']:,}) is "
                  f"the validation text. Evaluation: {describe(r['eval'])}. The same cut for every run.", ""]
        frameworks = sorted({x["framework"] for x in ok})
        lines += [f"Frameworks: {', '.join(frameworks)}.", ""]
    lines += [f"Machine: {info['cpu']}, {info['cores']} cores; each run in its own process with "
              f"{ok[0]['threads'] if ok else 2} thread(s), one run at a time; {info['date']}.", "",
              "Commands (from the repository root). The whole benchmark:", "", f"    {command}", "",
              "Each row (prints its JSON line):", ""]
    for r in results:
        lines += [f"- {r['run']}: `{r['command']}`"]
    return "\n".join(lines) + "\n"


def plot_label(result):
    """A short legend entry: the run's backend and kind (its settings are in the table)."""
    if result["kind"] == "reference":
        return "reference: plain torch nn.LSTM"
    what = "d2lrnn train" if result["kind"] == "train" else f"d2lrnn {result['kind']}"
    model = f" {result['config'].get('model')}" if result["kind"] == "train" else ""
    init = result["config"].get("init", DEFAULTS["init"])
    label = f"{what}{model} {result['config']['cell'].upper()} on {result['backend']}"
    label += f", init {init}" if init != DEFAULTS["init"] else ""
    return label + (", per epoch" if result.get("epochs_curve") else "")


def plot_labels(results):
    """Each run's legend entry: :func:`plot_label`, with the model's size and epochs where two runs would
    share one, and the run's spec where even those do."""
    base = [None if "error" in r else plot_label(r) for r in results]  # a failed run draws nothing
    labels = list(base)
    for i, r in enumerate(results):
        if base[i] and base.count(base[i]) > 1 and r["kind"] != "reference":
            c = r["config"]
            epochs = f", {c['epochs']} epochs" if c.get("epochs") else ""
            labels[i] = f"{labels[i]} ({c['layers']}x{c['hidden']}{epochs})"
    return [label if not label or labels.count(label) == 1 else f"{label}: {r['run']}"
            for label, r in zip(labels, results)]


def plot_curves(corpus, results, path):
    """Validation loss against training minutes, one line per run, a marker at each evaluation."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for r, label in zip(results, plot_labels(results)):
        curve = r.get("epochs_curve") or r.get("curve")
        if "error" not in r and curve:
            ax.plot([p[0] for p in curve], [p[1] for p in curve], marker="." if "epochs_curve" in r else "o",
                    label=label)
    ax.set_xlabel("training minutes (evaluation time excluded; d2lrnn train: included)")
    ax.set_ylabel("validation loss (nats per character)")
    ax.set_title(f"{corpus}: whole-validation-text loss")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper right", fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


PLOT_SUFFIXES = (".png", ".svg")


def output_paths(args):
    """The section's file and the plot's, checked before any run starts: a missing folder found after
    the runs would lose their minutes of training."""
    out = pathlib.Path(args.out) if args.out else RESULTS
    name = f"lm_{args.corpus}.png"
    if args.plot:
        plot = pathlib.Path(args.plot)
        plot = plot / name if plot.is_dir() else plot  # a folder: the default file name in it
    else:
        plot = (RESULTS.parent if out.resolve() == RESULTS.resolve() else out.parent) / name
    for flag, path in (("--out", out), ("--plot", plot)):
        if not path.parent.is_dir():
            raise BenchError(f"{flag} {path}: the folder {path.parent} does not exist: create it, or pass "
                             f"a path in an existing folder")
    if plot.suffix not in PLOT_SUFFIXES:  # matplotlib would add ".png", and the section link the wrong file
        raise BenchError(f"--plot {plot}: name a .png or .svg file, or a folder for {name}")
    return out, plot


def report(args, results, command):
    out, plot = output_paths(args)
    try:
        plot_curves(args.corpus, results, plot)
    except ImportError as err:
        print(f"[bench_lm] no plot ({err})", file=sys.stderr)
        plot = None
    body = section_body(args.corpus, args.minutes, args.eval_at, results, command, plot=plot, out=out)
    write_section(f"lm-{args.corpus}", body, out)
    print(f"[bench_lm] wrote section lm-{args.corpus} of {out}" + (f" and {plot}" if plot else ""),
          file=sys.stderr)
    return body


def parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpus", default="tinyshakespeare", help="bundled corpus name or a UTF-8 text file")
    p.add_argument("--minutes", type=float, default=10.0, help="training minutes per run (default 10)")
    p.add_argument("--eval-at", type=float, nargs="+", default=None,
                   help="training minutes at which to evaluate (the end is always one)")
    p.add_argument("--runs", nargs="+", default=list(DEFAULT_RUNS),
                   help="BACKEND:KIND[:key=value,...] or reference[:key=value,...] (default: %(default)s)")
    p.add_argument("--raw", action=argparse.BooleanOptionalAction, default=None,
                   help="every character a token (default: on for tinyshakespeare only)")
    p.add_argument("--max-tokens", type=int, default=-1, help="only the first N tokens of the corpus")
    settings = p.add_argument_group("settings of every run (default: the corpus's configuration)")
    settings.add_argument("--emb", type=int, help="reference: embedding size")
    settings.add_argument("--hidden", type=int, help="hidden units")
    settings.add_argument("--layers", type=int, help="recurrent layers")
    settings.add_argument("--cell", choices=("rnn", "gru", "lstm"),
                          help="d2lrnn: cell (the reference is an LSTM)")
    settings.add_argument("--init", choices=("normal", "uniform"),
                          help="d2lrnn: starting weights (make_model's init; default uniform)")
    settings.add_argument("--dropout", type=float,
                          help="reference: after the embedding, between layers and before the output; "
                               "d2lrnn: between layers, and before the output unless --output-dropout")
    settings.add_argument("--input-dropout", type=float,
                          help="d2lrnn: whole input tokens dropped (default 0)")
    settings.add_argument("--output-dropout", type=float, help="d2lrnn: before the output layer")
    settings.add_argument("--lr", type=float, help="Adam's peak learning rate (cosine to 0 over the budget)")
    settings.add_argument("--weight-decay", type=float, help="decoupled weight decay (AdamW; default 0)")
    settings.add_argument("--warmup", type=float, help="seconds of linear warm-up (default 0)")
    settings.add_argument("--batch", type=int, help="sequences per minibatch")
    settings.add_argument("--num-steps", type=int, help="steps per minibatch")
    settings.add_argument("--clip", type=float, help="gradient norm clip (default 1)")
    settings.add_argument("--model", choices=KINDS[:2],
                          help="BACKEND:train: the model 'd2lrnn train' trains (default scratch)")
    settings.add_argument("--epochs", type=int,
                          help="BACKEND:train: epochs of 'd2lrnn train' (cosine decay over them; required)")
    settings.add_argument("--seed", type=int, help="seed (default 0)")
    settings.add_argument("--precision", choices=("float32", "bfloat16"),
                          help="BACKEND:train: the products' precision (default float32)")
    settings.add_argument("--weight-drop", type=float,
                          help="BACKEND:train: DropConnect on the recurrent weights (default 0)")
    settings.add_argument("--ema", type=float,
                          help="BACKEND:train: the decay of the averaged weights it validates (0: off)")
    p.add_argument("--threads", type=int, default=2, help="threads of each run (default 2)")
    p.add_argument("--eval-streams", type=int, default=STREAMS,
                   help="validation streams (default %(default)s)")
    p.add_argument("--eval-steps", type=int, default=NUM_STEPS, help="steps per evaluation chunk")
    p.add_argument("--out", help="write the section to this file instead of bench/RESULTS.md")
    p.add_argument("--plot", help="the plot's path, a .png or .svg file or a folder for lm_CORPUS.png "
                                  "(default: lm_CORPUS.png next to the results file)")
    p.add_argument("--tox", default=str(ROOT / ".tox"), help="where the .tox/BACKEND environments are")
    p.add_argument("--single", metavar="RUN", help="run one run in this process and print its JSON line")
    p.add_argument("--label", help=argparse.SUPPRESS)
    return p


def main(argv=None):
    args = parser().parse_args(argv)
    try:
        eval_points(args.minutes, args.eval_at)
        if args.single:
            single(args)
            return 0
        for spec in args.runs:
            parse_run(spec)
        output_paths(args)
        given = sys.argv[1:] if argv is None else argv
        command = " ".join([_show(sys.executable), "bench/bench_lm.py", *map(shlex.quote, given)])
        results = run_all(args)
        report(args, results, command)
    except BenchError as err:
        print(f"bench_lm: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
