"""d2lrnn on a GPU machine: the training benchmark's rows on the GPU, and the readers' paths run there.

    python bench/gpu_check.py --out DIR [--book BOOK] [--seconds 3] [--skip-bench] [--skip-smoke]

Made for a machine lent for a few minutes (PyTorch and JAX with CUDA installed, nothing to fetch), so
one call does everything and writes as it goes:

* ``DIR/gpu_bench.jsonl``: ``bench/bench_train.py --gpu`` for torch and JAX, RNN, GRU and LSTM, each of
  d2lrnn's from-scratch and concise models and the plain framework loop (``bench/reference.py`` on the
  GPU), one fresh process per row, one after another so no row shares the GPU with another;
* ``DIR/gpu_smoke.txt``: every chapter notebook of ``chapters/`` in quick mode on torch and JAX (their
  code cells in one namespace, as a kernel runs them; ``d2l.try_gpu()`` is the GPU there), the command
  line's four commands with ``--device gpu``, and, with
  ``--book`` (a folder holding the book's ``d2l-zh`` and ``d2l-en`` chapters), the book checker's torch
  and jax columns of both editions with shortened epochs (``bench/book_check.py``): what a reader who
  trains on a GPU runs. These go in parallel, after the benchmark.

``python bench/gpu_check.py --table DIR/gpu_bench.jsonl`` prints its rows as the markdown table of
``bench/RESULTS.md`` ("On a GPU"): tokens/s, and each d2lrnn row over the plain loop of its backend
and cell in the same file.
"""

import argparse
import importlib.util
import json
import os
import pathlib
import re
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # d2lrnn and bench from this checkout, in this process too
BACKENDS = ("torch", "jax")
CELLS = ("rnn", "gru", "lstm")
MODELS = ("reference", "scratch", "concise")


def bench_rows(out, seconds, backends=BACKENDS, models=MODELS, eager_rows=False):
    """One ``bench_train.py --gpu`` process per backend, cell and model, each line appended to the file
    (``eager_rows``: torch's d2lrnn models again with CUDA graphs off, as models 'scratch-eager' and
    'concise-eager')."""
    path = out / "gpu_bench.jsonl"
    for backend in backends:
        eager = eager_rows and backend == "torch"
        extra = [f"{m}-eager" for m in models if m != "reference"] if eager else []
        for cell in CELLS:
            for model in [*models, *extra]:
                which = ["--framework", backend] if model == "reference" else ["--model", model.split("-")[0]]
                cmd = [sys.executable, str(ROOT / "bench" / "bench_train.py"), "--gpu", "--cell", cell,
                       "--seconds", str(seconds), *which]
                env = dict(os.environ, D2LRNN_BACKEND=backend)
                if model.endswith("-eager"):
                    env["D2LRNN_CUDA_GRAPHS"] = "0"
                start = time.perf_counter()
                try:
                    run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
                    lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
                    row = json.loads(lines[-1]) if run.returncode == 0 and lines else {
                        "error": (run.stderr or run.stdout).strip().splitlines()[-3:]}
                except subprocess.TimeoutExpired:
                    row = {"error": "timed out after 60 s"}
                row.update(backend=backend, cell=cell, model=model, wall=time.perf_counter() - start)
                with open(path, "a") as f:
                    f.write(json.dumps(row) + "\n")
                print(json.dumps(row), flush=True)


def table(rows):
    """The markdown table of ``gpu_bench.jsonl``'s rows: per backend and cell, the plain loop's tokens/s
    and each d2lrnn model's, with its ratio to that plain loop (a failed row says so); with rows of CUDA
    graphs off ('scratch-eager', 'concise-eager'), columns for those too."""
    by_key = {(r["backend"], r["cell"], r["model"]): r for r in rows}
    models = ["scratch", "concise"] + [m for m in ("scratch-eager", "concise-eager")
                                       if any(r["model"] == m for r in rows)]
    head = "".join(f" {m} tokens/s | {m} / plain |" for m in models)
    lines = ["| backend | cell | plain loop tokens/s |" + head, "|---|---|---:|" + "---:|---:|" * len(models)]
    for backend in dict.fromkeys(r["backend"] for r in rows):
        for cell in CELLS:
            reference = by_key.get((backend, cell, "reference"))
            plain = (reference or {}).get("tokens_per_sec")
            cells = [f"{plain:,.0f}" if plain else "failed" if reference else "not run"]
            for model in models:
                row = by_key.get((backend, cell, model))
                if row is None or "error" in row:
                    cells += ["failed" if row else "not run", "—"]
                else:
                    ratio = f"{row['tokens_per_sec'] / plain:.2f}x" if plain else "—"
                    cells += [f"{row['tokens_per_sec']:,.0f}", ratio]
            lines.append(f"| {backend} | {cell.upper()} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _graphed(updater):
    """The CUDA-graph wrapper inside a d2lrnn updater (None if its step is not one)."""
    step = getattr(updater, "_step", None)
    return step if hasattr(step, "captures") else None


def _lm_case(model, cell, device):
    """The training benchmark's language model on ``device``: (net, updater, minibatches, step(batch))."""
    from bench.bench_train import HIDDEN, STEPS, _batches, lm_training

    return lm_training(model, cell, HIDDEN, _batches(STEPS)[0], device)


def _seq2seq_case(device):
    """The book's seq2seq model (no dropout: its masks come from each call's own draws) on ``device``."""
    import d2lrnn as d2l
    from d2lrnn.seq2seq import make_seq2seq
    from d2lrnn.seq2seq.train import make_seq2seq_updater
    from d2lrnn.training.loop import placed

    train_iter, src_vocab, tgt_vocab = d2l.load_data_nmt(64, 10)
    net = make_seq2seq(len(src_vocab), len(tgt_vocab), 32, 32, 2, 0.0, device=device)
    updater = make_seq2seq_updater(net, tgt_vocab, lr=0.005, clip=1.0, device=device)
    batches = [placed(batch, device) for batch in train_iter]

    def step(batch):
        l, net.params, _ = updater(net.params, *batch)
        return l

    return net, updater, batches, step


def graphs_check(out, steps=12, timed=60):
    """torch on the GPU: d2lrnn's training steps replayed as CUDA graphs against the same steps run
    eagerly (``D2LRNN_CUDA_GRAPHS=0``), from the same seed in one process: the losses and final parameters
    (their largest difference) and the median milliseconds a step, then an uncapturable function's
    fallback. Written to ``DIR/gpu_graphs.jsonl`` and printed."""
    os.environ["D2LRNN_BACKEND"] = "torch"
    import numpy as np
    import torch

    import d2lrnn as d2l
    from d2lrnn import ops

    device = d2l.try_gpu()
    cases = [("scratch", "rnn"), ("scratch", "gru"), ("scratch", "lstm"), ("concise", "rnn"),
             ("concise", "lstm"), ("seq2seq", "gru")]
    path = out / "gpu_graphs.jsonl"
    for model, cell in cases:
        runs = {}
        for mode in ("eager", "graphs"):
            os.environ["D2LRNN_CUDA_GRAPHS"] = "0" if mode == "eager" else "1"
            d2l.manual_seed(0)
            try:
                net, updater, batches, step = _seq2seq_case(device) if model == "seq2seq" \
                    else _lm_case(model, cell, device)
                losses = [float(ops.to_numpy(step(batches[i % len(batches)]))) for i in range(steps)]
                params = [np.asarray(ops.to_numpy(p)) for p in net.params]
                times = []
                for i in range(timed):
                    if torch.cuda.is_available():
                        torch.cuda.synchronize()
                    start = time.perf_counter()
                    float(ops.to_numpy(step(batches[i % len(batches)])))
                    times.append(time.perf_counter() - start)
                graphed = _graphed(updater)
                runs[mode] = dict(losses=losses, params=params, ms=1e3 * float(np.median(times)),
                                  captures=graphed.captures if graphed else None,
                                  eager_fallback=graphed.eager if graphed else None)
            except Exception as e:  # noqa: BLE001 -- report and go on to the next case
                runs[mode] = dict(error=f"{type(e).__name__}: {e}"[:300])
        row = dict(model=model, cell=cell)
        for mode, run in runs.items():
            row.update({f"{mode}_{k}": v for k, v in run.items() if k not in ("losses", "params")})
        if all("losses" in run for run in runs.values()):
            eager, graphs = runs["eager"], runs["graphs"]
            row["loss_max_diff"] = float(np.max(np.abs(np.subtract(eager["losses"], graphs["losses"]))))
            row["param_max_diff"] = max(float(np.max(np.abs(a - b))) for a, b in zip(eager["params"],
                                                                                     graphs["params"]))
            row["first_loss"], row["last_loss"] = graphs["losses"][0], graphs["losses"][-1]
            row["speedup"] = eager["ms"] / graphs["ms"]
        with open(path, "a") as f:
            f.write(json.dumps(row) + "\n")
        print(json.dumps(row), flush=True)
    os.environ["D2LRNN_CUDA_GRAPHS"] = "1"
    step = ops.compile(lambda x: x * float(ops.to_numpy(ops.sum(x))))  # reads a value on the host
    x = ops.ones((3,), device=device)
    values = [ops.to_numpy(step(x)).tolist() for _ in range(4)]
    row = dict(check="uncapturable function", values=values, eager=getattr(step, "eager", None),
               after=ops.to_numpy(ops.sum(ops.ones((4,), device=device) * 2)).tolist())
    with open(path, "a") as f:
        f.write(json.dumps(row) + "\n")
    print(json.dumps(row), flush=True)


def chapter_code(path):
    """A chapter's code cells as one program, IPython's ``%`` lines left out."""
    blocks = re.findall(r"^```python\n(.*?)^```", path.read_text(), flags=re.S | re.M)
    return "\n".join(line for block in blocks for line in block.splitlines() if not line.startswith("%"))


def run_chapter(path):
    """Run one chapter's cells here (a child process of the smoke run) and say where its model trained."""
    try:
        import IPython.display  # noqa: F401
    except ImportError:  # no IPython on the GPU machine: its display becomes a print
        import types

        module = types.ModuleType("IPython.display")
        module.Markdown = str
        module.display = print
        ipython = types.ModuleType("IPython")
        ipython.get_ipython, ipython.version_info, ipython.display = lambda: None, (9, 0), module
        sys.modules["IPython"] = ipython
        sys.modules["IPython.display"] = module
    namespace = {"__name__": "__main__"}
    exec(compile(chapter_code(pathlib.Path(path)), path, "exec"), namespace)
    devices = sorted({str(getattr(p, "device", None) or getattr(p, "devices", lambda: None)())
                      for value in namespace.values() for p in (getattr(value, "params", None) or [])[:1]})
    print(f"params on: {', '.join(devices) or 'no model with .params'}")


def smoke(out, book, deadline):
    """The chapters and, with ``book``, the book checker's columns, in parallel, each writing its own log
    as it goes (what finished is there if the machine's time runs out); then the logs in one file."""
    # Several processes share the GPU here: JAX must not take 75% of its memory in each as it starts.
    os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    commands = {}
    for backend in BACKENDS:
        commands[f"chapters-{backend}"] = ["bash", "-c", " ; ".join(
            f"echo '== {p.name}'; timeout 300 {sys.executable} {__file__} --chapter {p} 2>&1 | tail -12"
            for p in sorted((ROOT / "chapters").glob("*.md")))]
    for backend in BACKENDS:  # the command line on the GPU: train, generate, translate-train, translate
        run, lm, mt = f"{sys.executable} -m d2lrnn", f"lm-{backend}", f"mt-{backend}"
        commands[f"cli-{backend}"] = ["bash", "-c", " && ".join([
            f"{run} train --backend {backend} --device gpu --epochs 2 --max-tokens 20000 --no-progress "
            f"--out {lm}", f"{run} generate --checkpoint {lm} --device gpu",
            f"{run} translate-train --backend {backend} --device gpu --epochs 2 --num-examples 2000 "
            f"--no-progress --out {mt}",
            f"{run} translate 'go .' 'he is calm .' --checkpoint {mt} --device gpu"])]
    if book is not None:
        for edition in ("d2l-zh", "d2l-en"):
            commands[f"book-{edition}"] = [
                sys.executable, str(ROOT / "bench" / "book_check.py"), "--edition", edition,
                "--book", str((book / edition).resolve()), "--columns", *BACKENDS, "--timeout", "300",
                "--epochs", "500=5", "300=5", "100=3", "50=3", "30=3",
                *[f"--python={b}={sys.executable}" for b in BACKENDS]]
    jobs = {}
    for name, cmd in commands.items():
        backend = name.rsplit("-", 1)[-1]
        env = dict(os.environ, D2LRNN_QUICK="1", MPLBACKEND="Agg",
                   PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
        if backend in BACKENDS:
            env["D2LRNN_BACKEND"] = backend
        log = open(logs / f"{name}.txt", "w")
        jobs[name] = (subprocess.Popen(cmd, env=env, cwd=logs, stdout=log, stderr=subprocess.STDOUT), log)
    with open(out / "gpu_smoke.txt", "w") as f:
        for name, (job, log) in jobs.items():
            try:
                code = job.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                job.kill()
                code = "killed at the deadline"
            log.close()
            text = (logs / f"{name}.txt").read_text()
            f.write(f"#### {name} (exit {code})\n{text}\n")
            print(f"#### {name} (exit {code})\n{text[-4000:]}", flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path)
    parser.add_argument("--book", type=pathlib.Path, help="a folder holding the book's d2l-zh and d2l-en")
    parser.add_argument("--seconds", type=float, default=3.0, help="timed seconds per benchmark row")
    parser.add_argument("--skip-bench", action="store_true")
    parser.add_argument("--bench-backends", nargs="+", choices=BACKENDS, default=BACKENDS)
    parser.add_argument("--bench-models", nargs="+", choices=MODELS, default=MODELS)
    parser.add_argument("--skip-smoke", action="store_true")
    parser.add_argument("--graphs", action="store_true",
                        help="first, torch's CUDA graphs against eager steps")
    parser.add_argument("--eager-rows", action="store_true",
                        help="also torch's scratch and concise rows with D2LRNN_CUDA_GRAPHS=0")
    parser.add_argument("--minutes", type=float, default=8.5, help="the smoke runs stop at this many minutes")
    parser.add_argument("--table", type=pathlib.Path, metavar="JSONL", help="print that file as a table")
    parser.add_argument("--chapter", help=argparse.SUPPRESS)  # the smoke run's child: one chapter
    parser.add_argument("--graphs-only", action="store_true", help=argparse.SUPPRESS)  # its own process
    args = parser.parse_args(argv)
    if args.chapter:
        return run_chapter(args.chapter)
    if args.graphs_only:
        args.out.mkdir(parents=True, exist_ok=True)
        return graphs_check(args.out)
    if args.table:
        rows = [json.loads(line) for line in args.table.read_text().splitlines() if line.strip()]
        return print(table(rows))
    if args.out is None:
        parser.error("--out DIR: where the results go")
    args.out.mkdir(parents=True, exist_ok=True)
    # The plain loops load their batches through d2lrnn's NumPy backend, which needs HIPS autograd (a GPU
    # image has PyTorch and JAX, not that); every child process imports d2lrnn from this checkout.
    plain_loops = "reference" in args.bench_models and not args.skip_bench
    if plain_loops and importlib.util.find_spec("autograd") is None:
        parser.error("HIPS autograd is not installed here and the plain loops need it (d2lrnn's NumPy "
                     "backend loads their batches): install its wheel, or leave the plain loops out with "
                     "--bench-models scratch concise")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    deadline = time.monotonic() + 60 * args.minutes
    if args.graphs:
        subprocess.run([sys.executable, __file__, "--out", str(args.out), "--graphs-only"], timeout=300)
    if not args.skip_bench:
        bench_rows(args.out, args.seconds, args.bench_backends, args.bench_models, args.eager_rows)
    if not args.skip_smoke:
        smoke(args.out, args.book, deadline)


if __name__ == "__main__":
    main()
