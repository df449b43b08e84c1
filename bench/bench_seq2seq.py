"""Seq2seq training throughput: target tokens per second of the chapter's encoder-decoder on every backend,
d2lrnn's scratch and concise models against each framework's plain training loop, on the same batches.

    tox --notest                          # once: creates .tox/<backend> environments
    python bench/bench_seq2seq.py         # about 10 minutes on 2 idle cores; writes the seq2seq-speed section
    python bench/bench_seq2seq.py --backends torch                  # the torch rows only
    python bench/bench_seq2seq.py --backends torch --models scratch reference --steps 20 --rounds 1 --profile
                                          # where the time goes (torch.profiler; cProfile elsewhere)

The model (issue 14): embedding 256, 256 hidden units, 2 GRU layers (the reset-after form of cuDNN,
d2lrnn's seq2seq default), dropout 0.2 between layers, the context concatenated to the decoder's
input at every step; teacher forcing, the masked cross-entropy per valid target token, Adam at lr
0.002, gradients clipped to global norm 1; batch 64, 10 steps, all English-French training pairs
(``d2l.load_data_nmt_split``, seed 0: the same batches on every backend), float32, CPU, 2 threads.

Rows (``--models``):

- ``scratch``: ``d2l.make_seq2seq(..., rnn='scratch')``, the GRU from scratch (hand-written BPTT),
  trained by ``d2lrnn.seq2seq.make_seq2seq_updater`` (what ``d2l.train_seq2seq`` runs);
- ``concise``: ``rnn='concise'``, the framework's own GRU layer through d2lrnn (on NumPy, which has
  none, the scratch recurrence);
- ``reference``: ``bench/seq2seq_reference.py``, the same model and training written with the
  framework alone (``nn.Embedding`` + ``nn.GRU`` + ``nn.Linear``, ``torch.optim.Adam``,
  ``clip_grad_norm_`` on torch; Keras and Gluon likewise), with no d2lrnn code in its step: d2lrnn
  (on NumPy, its malloc setting off) only loads the batches beforehand.

Every row trains on the same sequence of full batches (the first epoch's, in order): ``--warmup``
steps, then ``--steps`` timed steps, each ending with the loss read back as a float (the sync a
training loop makes). Tokens/s is the timed steps' target tokens (the sum of ``Y_valid_len``, each
sentence's words and ``<eos>``) over their wall time. Each (backend, model) runs in a fresh
process of that backend's tox environment (``--single``, one JSON line), one after the other, in
``--rounds`` interleaved rounds; the table keeps each one's best round (the machine is shared and
its speed drifts) and compares every d2lrnn row with its framework's reference from the same run.

At the end the table is printed and written into the ``seq2seq-speed`` section of bench/RESULTS.md
(``--out`` for another file; the file's other sections are kept), with the target lines: issue 14's,
the torch scratch model at >= 1.0x the plain torch loop, and issue 33's, each backend's faster d2lrnn model
at >= 0.5x the fastest backend's tokens/s and every d2lrnn row's peak RSS within 1.2x its plain loop's.
"""

import argparse
import datetime
import json
import os
import pathlib
import resource
import shlex
import subprocess
import sys
import time

if __name__ == "__main__":  # before NumPy or a framework starts its thread pools
    _threads = sys.argv[sys.argv.index("--threads") + 1] if "--threads" in sys.argv[:-1] else "2"
    for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS"):
        os.environ.setdefault(_var, _threads)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._common import cpu_name, installed_python, scratch_gradient  # noqa: E402
from bench.results import RESULTS, write_section  # noqa: E402
from bench.seq2seq_reference import FRAMEWORKS, LOOPS  # noqa: E402

SECTION = "seq2seq-speed"
BACKENDS = ("numpy", "torch", "tensorflow", "mxnet", "jax", "paddle")
MODELS = ("scratch", "concise", "reference")
#: The configuration flags and their defaults (the issue's): name -> (type, default, help).
CONFIG = {
    "embed_size": (int, 256, "embedding size"),
    "num_hiddens": (int, 256, "hidden units per GRU layer"),
    "num_layers": (int, 2, "GRU layers in the encoder and in the decoder"),
    "dropout": (float, 0.2, "dropout between GRU layers"),
    "batch_size": (int, 64, "sentence pairs per batch"),
    "num_steps": (int, 10, "tokens per sentence (truncated or padded)"),
    "lr": (float, 0.002, "Adam's learning rate"),
    "clip": (float, 1.0, "global gradient norm"),
    "warmup": (int, 10, "untimed steps first (compilation, allocator warm-up)"),
    "steps": (int, 100, "timed steps per round"),
    "num_examples": (int, None, "the first N sentence pairs of the file (default: all)"),
}
RECURRENCE = {"scratch": "d2lrnn GRU from scratch ({gradient})",
              "concise": {"numpy": "d2lrnn GRU from scratch (NumPy has no layer)",
                          "torch": "torch.nn.GRU through d2lrnn", "tensorflow": "keras GRU through d2lrnn",
                          "mxnet": "gluon.rnn.GRU through d2lrnn", "jax": "flax GRUCell through d2lrnn",
                          "paddle": "paddle.nn.GRU through d2lrnn"}}
#: Issue 33: each backend at least half the fastest backend's tokens/s; peak RSS within 1.2x the plain loop's.
MIN_SHARE, MAX_MEMORY = 0.5, 1.2
TARGET = "torch scratch >= 1.0x the plain torch nn.Embedding + nn.GRU + nn.Linear loop"


def defaults():
    return {name: default for name, (_, default, _) in CONFIG.items()}


def config_args(config):
    """``config`` as command-line flags (the ones that differ from the defaults)."""
    args = []
    for name, value in config.items():
        if value != CONFIG[name][1]:
            args += ["--" + name.replace("_", "-"), str(value)]
    return args


# ------------------------------------------------------------------ one (backend, model) in this process


def load_batches(config):
    """The full batches of the first training epoch as NumPy arrays ``(X, X_valid_len, Y, Y_valid_len)``,
    with the data's sizes (identical on every backend for the seed)."""
    import d2lrnn as d2l
    from d2lrnn import ops

    d2l.manual_seed(0)
    train_iter, _, src_vocab, tgt_vocab = d2l.load_data_nmt_split(config["batch_size"], config["num_steps"],
                                                                  config["num_examples"], seed=0)
    batches = [tuple(ops.to_numpy(a) for a in batch) for batch in train_iter]
    full = [b for b in batches if len(b[0]) == config["batch_size"]]  # one shape: no retracing
    if not full:
        raise SystemExit(f"no full batch of {config['batch_size']} pairs: use a smaller --batch-size")
    info = {"train_pairs": train_iter.num_pairs, "src_vocab": len(src_vocab), "tgt_vocab": len(tgt_vocab),
            "bos": tgt_vocab["<bos>"]}
    return full, info, tgt_vocab


def time_steps(step, batches, tokens, warmup, steps):
    """Run ``warmup`` then ``steps`` timed calls of ``step`` over ``batches`` in order (cycling);
    returns (seconds of each timed step, target tokens they trained, warm-up seconds, losses)."""
    losses, times, count = [], [], 0
    start = time.perf_counter()
    for i in range(warmup):
        losses.append(step(batches[i % len(batches)]))
    warm = time.perf_counter() - start
    for i in range(warmup, warmup + steps):
        start = time.perf_counter()
        losses.append(step(batches[i % len(batches)]))
        times.append(time.perf_counter() - start)
        count += tokens[i % len(batches)]
    return times, count, warm, losses


def d2lrnn_step(model, config, info, tgt_vocab):
    """d2lrnn's training step for ``model`` ('scratch' or 'concise') on the active backend, and the
    conversion of a NumPy batch to its tensors."""
    import d2lrnn as d2l
    from d2lrnn import ops
    from d2lrnn.seq2seq import make_seq2seq_updater

    d2l.manual_seed(0)
    net = d2l.make_seq2seq(info["src_vocab"], info["tgt_vocab"], config["embed_size"], config["num_hiddens"],
                           config["num_layers"], config["dropout"], rnn=model)
    updater = make_seq2seq_updater(net, tgt_vocab, config["lr"], config["clip"])

    def step(batch):
        loss, net.params, _ = updater(net.params, *batch)
        return float(ops.to_numpy(loss))  # the sync train_seq2seq makes every step

    return step, lambda batch: tuple(ops.from_numpy(a) for a in batch)


def profile_steps(step, batches, backend, count, top=25):
    """The operations that take the time of ``count`` more steps: torch.profiler's table on torch
    (self CPU time per ATen op), cProfile's (time per Python function) elsewhere."""
    if backend == "torch":
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for i in range(count):
                step(batches[i % len(batches)])
        return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=top)
    import cProfile
    import io
    import pstats

    profiler = cProfile.Profile()
    profiler.enable()
    for i in range(count):
        step(batches[i % len(batches)])
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(top)
    return out.getvalue()


def measure(model, config, framework=None, profile=False):
    """One row in this process: ``model`` 'scratch'/'concise' on the active d2lrnn backend, or
    'reference': ``framework``'s plain loop. ``profile``: then profile as many steps again and
    print where their time goes (to stderr)."""
    batches, info, tgt_vocab = load_batches(config)
    if model == "reference":
        from bench.seq2seq_reference import make_seq2seq_reference

        ref = make_seq2seq_reference(framework, info["src_vocab"], info["tgt_vocab"], config["embed_size"],
                                     config["num_hiddens"], config["num_layers"], config["dropout"],
                                     info["bos"], config["lr"], config["clip"])
        step, convert, backend = ref.step, lambda batch: ref.to_batch(*batch), framework
    else:
        import d2lrnn as d2l

        step, convert = d2lrnn_step(model, config, info, tgt_vocab)
        backend = d2l.backend_name()
    needed = min(len(batches), config["warmup"] + config["steps"])
    tensors = [convert(b) for b in batches[:needed]]  # untimed
    tokens = [int(b[3].sum()) for b in batches[:needed]]
    times, count, warm, losses = time_steps(step, tensors, tokens, config["warmup"], config["steps"])
    seconds = sum(times)
    if profile:
        print(f"{backend} {model}: {config['steps']} steps profiled\n"
              f"{profile_steps(step, tensors, backend, config['steps'])}", file=sys.stderr)
    return {
        "backend": backend,
        "model": model,
        "tokens_per_sec": count / seconds,
        "ms_per_step": 1000 * sorted(times)[len(times) // 2],
        "steps_timed": len(times),
        "tokens_timed": count,
        "warmup_seconds": warm,
        "first_loss": losses[0],
        "last_loss": losses[-1],
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        **info,
        "config": config,
    }


def set_threads(model, backend, n):
    """The thread settings of the process's framework, before it runs anything."""
    if model != "reference":
        from d2lrnn import ops

        ops.set_num_threads(n)
    elif backend == "torch":
        import torch

        torch.set_num_threads(n)
    elif backend == "tensorflow":
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(n)
        tf.config.threading.set_inter_op_parallelism_threads(n)
    # MXNet reads OMP_NUM_THREADS at start-up


# ------------------------------------------------------------------ the driver


def child_env(backend, model, threads):
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads),
               TF_NUM_INTRAOP_THREADS=str(threads), TF_NUM_INTEROP_THREADS=str(threads),
               TF_CPP_MIN_LOG_LEVEL="2", D2LRNN_BACKEND=backend)
    if model == "reference":  # d2lrnn (on NumPy) only loads the batches; malloc as the framework has it
        env.update(D2LRNN_BACKEND="numpy", D2LRNN_MALLOC="default")
    return env


def run_child(python, backend, model, config, threads, profile=False):
    """One row measured in a fresh process of ``python``."""
    command = [python, str(pathlib.Path(__file__).resolve()), "--single", model, "--backend", backend,
               "--threads", str(threads), *config_args(config), *(["--profile"] if profile else [])]
    out = subprocess.run(command, capture_output=True, text=True, env=child_env(backend, model, threads))
    if out.returncode != 0:
        raise SystemExit(f"{backend} {model} failed (exit {out.returncode}):\n{out.stderr[-3000:]}")
    if profile:
        print(out.stderr[out.stderr.find(f"{backend} {model}: "):], file=sys.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


def best_of(rounds):
    """One row from several rounds of the same pair: the fastest round, with the slowest kept."""
    best = dict(max(rounds, key=lambda x: x["tokens_per_sec"]))
    best["slowest_round"] = min(x["tokens_per_sec"] for x in rounds)
    best["rounds"] = len(rounds)
    best["peak_rss_mb"] = max(x["peak_rss_mb"] for x in rounds)
    return best


def over_reference(rows, key):
    """``{(backend, model): row[key] over the same framework's reference's}`` for d2lrnn's rows."""
    ref = {x["backend"]: x[key] for x in rows if x["model"] == "reference"}
    return {(x["backend"], x["model"]): x[key] / ref[x["backend"]]
            for x in rows if x["model"] != "reference" and x["backend"] in ref}


def vs_reference(rows):
    """``{(backend, model): tokens/s over the same framework's reference}`` for d2lrnn's rows."""
    return over_reference(rows, "tokens_per_sec")


def recurrence(row):
    if row["model"] == "reference":
        return LOOPS[row["backend"]]
    if row["model"] == "scratch":
        return RECURRENCE["scratch"].format(gradient=scratch_gradient(row["backend"]))
    return RECURRENCE["concise"][row["backend"]]


def table(rows):
    ratios = vs_reference(rows)
    lines = ["| backend | model | recurrence computed by | tokens/s | slowest round | ms/step (median) "
             "| vs reference | warm-up (s) | loss first -> last | peak RSS (MB) |",
             "|---|---|---|---:|---:|---:|---:|---:|---|---:|"]
    for x in rows:
        key = (x["backend"], x["model"])
        ratio = f"{ratios[key]:.2f}x" if key in ratios else "-"
        if x["model"] == "reference":
            ratio = "1 (reference)"
        lines.append(f"| {x['backend']} | {x['model']} | {recurrence(x)} | {x['tokens_per_sec']:,.0f} | "
                     f"{x.get('slowest_round', x['tokens_per_sec']):,.0f} | {x['ms_per_step']:.1f} | "
                     f"{ratio} | "
                     f"{x['warmup_seconds']:.1f} | {x['first_loss']:.2f} -> {x['last_loss']:.2f} | "
                     f"{x['peak_rss_mb']:.0f} |")
    return "\n".join(lines)


def target(rows):
    """(the issue's target, the measured ratio as text, met: True/False, or None when not measured)."""
    ratio = vs_reference(rows).get(("torch", "scratch"))
    if ratio is None:
        return TARGET, "not measured", None
    return TARGET, f"{ratio:.2f}x", ratio >= 1.0


def target_line(rows):
    text, measured, met = target(rows)
    return f"{text}: {measured}" + ("" if met is None else " yes" if met else " no")


def across_backends(rows):
    """Issue 33's speed line: each backend's faster d2lrnn model (scratch or concise, the user's choice of
    flag) within 2x of the fastest backend's; ``(text, met)``, met None when fewer than two backends ran."""
    best = {}
    for x in rows:
        if x["model"] != "reference" and x["tokens_per_sec"] > best.get(x["backend"], (0, ""))[0]:
            best[x["backend"]] = (x["tokens_per_sec"], x["model"])
    if len(best) < 2:
        return "fewer than two backends measured", None
    fastest = max(best, key=lambda b: best[b][0])
    shares = {b: best[b][0] / best[fastest][0] for b in best}
    text = ", ".join(f"{b} {shares[b]:.2f} ({best[b][1]})" for b in sorted(best, key=shares.get))
    return f"each backend's faster model over {fastest}'s {best[fastest][0]:,.0f} tokens/s: {text}", \
        min(shares.values()) >= MIN_SHARE


def issue_33_lines(rows):
    """The seq2seq lines of issue 33: speed across backends within 2x, peak memory within 1.2x of the plain
    loop's, each with 'yes', 'no' or nothing where not measured."""
    speed, met = across_backends(rows)
    lines = [f"Target (issue 33): every backend within 2x of the fastest: {speed}"
             + ("" if met is None else " yes" if met else " no")]
    ratios = over_reference(rows, "peak_rss_mb")
    if ratios:
        worst = max(ratios, key=ratios.get)
        text = ", ".join(f"{b} {m} {r:.2f}x" for (b, m), r in sorted(ratios.items()))
        lines.append(f"Target (issue 33): peak RSS <= {MAX_MEMORY}x the plain loop's: {text}; worst "
                     f"{' '.join(worst)} " + ("yes" if ratios[worst] <= MAX_MEMORY else "no"))
    return lines


def report(rows, config, rounds, threads, command, minutes=None):
    """The ``seq2seq-speed`` section's text."""
    first = rows[0]
    c = config
    pairs = "all English-French training pairs" if c["num_examples"] is None else \
        f"the first {c['num_examples']} English-French pairs"
    lines = [
        "## Seq2seq training speed (issue 14)",
        "",
        f"Measured {datetime.date.today().isoformat()} on {cpu_name()} ({os.cpu_count()} cores), by "
        f"`{command}`: the chapter's encoder-decoder trained on {pairs} ({first['train_pairs']:,} training "
        f"pairs, source vocabulary {first['src_vocab']:,}, target vocabulary {first['tgt_vocab']:,}), "
        f"embedding {c['embed_size']}, {c['num_hiddens']} hidden units, {c['num_layers']} GRU layers "
        f"(reset-after form), dropout {c['dropout']:g} between them, the context concatenated to the "
        f"decoder's input at every step, teacher forcing, cross-entropy per valid target token, Adam at "
        f"lr {c['lr']:g}, clipping at {c['clip']:g}, batch {c['batch_size']}, {c['num_steps']} steps, "
        f"float32, CPU, {threads} threads.",
        "",
        f"Every (backend, model) ran in a fresh process in each of {rounds} interleaved rounds: "
        f"{c['warmup']} warm-up steps, then {c['steps']} timed steps over the same batches for every row "
        "(the first epoch's full batches, in order), each step ending with the loss read back. "
        "Tokens/s is target tokens (the sum of `Y_valid_len`: words and `<eos>`) over the timed steps' "
        "wall time; the table keeps each row's best round and shows its slowest. *vs reference* is the "
        "row's tokens/s over its framework's plain loop (`bench/seq2seq_reference.py`: the same model "
        "and training written with the framework alone, no d2lrnn code in its step) from this run. "
        "The loss column is the row's first and last step (dropout on; the references start from "
        "their framework's initialization, d2lrnn from its own).",
        "",
        table(rows),
        "",
        f"Target (issue 14): {target_line(rows)}",
    ]
    for line in issue_33_lines(rows):
        lines += ["", line]
    if minutes is not None:
        lines += ["", f"The whole run took {minutes:.0f} minutes."]
    return "\n".join(lines) + "\n"


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, (kind, default, text) in CONFIG.items():
        parser.add_argument("--" + name.replace("_", "-"), type=kind, default=default,
                            help=f"{text} (default {default})")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; each row keeps its best")
    parser.add_argument("--backends", nargs="*", default=list(BACKENDS), choices=BACKENDS)
    parser.add_argument("--models", nargs="*", default=list(MODELS), choices=MODELS)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--python", help="the interpreter of every row (default: .tox/BACKEND/bin/python)")
    parser.add_argument("--out", type=pathlib.Path, default=RESULTS,
                        help="the file whose seq2seq-speed section is written (default bench/RESULTS.md)")
    parser.add_argument("--no-write", action="store_true", help="print the section without writing it")
    parser.add_argument("--profile", action="store_true",
                        help="after timing, profile --steps more steps of each row and print where the time "
                             "goes (torch.profiler on torch, cProfile elsewhere); nothing is written")
    parser.add_argument("--single", choices=MODELS, help=argparse.SUPPRESS)  # a child: one row, one JSON line
    parser.add_argument("--backend", choices=BACKENDS, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    config = {name: getattr(args, name) for name in CONFIG}
    if args.single:
        set_threads(args.single, args.backend, args.threads)
        print(json.dumps(measure(args.single, config, framework=args.backend, profile=args.profile)))
        return None
    pairs = []
    for backend in args.backends:
        python = args.python or installed_python(backend)
        if python is None:
            print(f"skipping {backend}: no .tox/{backend} (run tox --notest first)", file=sys.stderr)
            continue
        pairs += [(backend, model, python) for model in args.models
                  if model != "reference" or backend in FRAMEWORKS]
    if not pairs:
        raise SystemExit("nothing to measure: no backend environment with the models asked for")
    started = time.perf_counter()
    results = {(b, m): [] for b, m, _ in pairs}
    for r in range(args.rounds):
        for backend, model, python in pairs:
            print(f"round {r + 1}/{args.rounds}: {backend} {model} ...", file=sys.stderr, flush=True)
            row = run_child(python, backend, model, config, args.threads, args.profile)
            print(f"    {row['tokens_per_sec']:,.0f} tokens/s", file=sys.stderr, flush=True)
            results[backend, model].append(row)
    rows = [best_of(results[b, m]) for b, m, _ in pairs]
    command = shlex.join(["python", "bench/bench_seq2seq.py", *argv])
    text = report(rows, config, args.rounds, args.threads, command, (time.perf_counter() - started) / 60)
    print(text)
    if not (args.no_write or args.profile):  # a profiling run is for reading, not for the record
        write_section(SECTION, text, args.out)
        print(f"wrote the {SECTION} section of {args.out}", file=sys.stderr)
    return rows


if __name__ == "__main__":
    main()
