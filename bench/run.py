"""Run the training benchmark on every installed backend and write bench/RESULTS.md.

    tox --notest            # once: creates .tox/<backend> environments
    python bench/run.py     # about 35 minutes on 2 cores (--skip-memory: about 16)

For each cell (RNN, GRU, LSTM) and backend it times d2lrnn's from-scratch model, d2lrnn's concise
model (the framework's layer through d2lrnn) and the reference: the same training written as each
framework's documentation teaches, with its fused layer and optimizer and no d2lrnn code
(``bench/reference.py``). Every d2lrnn row is reported as a ratio to its framework's reference.

Each (backend, cell, model) runs in a fresh process of that backend's tox environment, so that peak RSS
belongs to one training run. The processes of one (backend, cell) start together, each warming up
alone, and then take turns: one block of steps (about ``--block-seconds``) in each, then the next
block in each, ``--blocks`` times, only one of them running at any moment. These machines are shared
and their speed drifts by tens of percent within minutes; a ratio to the plain loop is therefore the
median over blocks of a block's tokens/s over the reference's block beside it in time, so that drift
between minutes cancels out and a burst of contention in one block does not decide the ratio.
Tokens/s is a row's best block (its speed on the uncontended machine; the slowest block is shown
beside it). Ratios compare numbers from this one run. Then ``bench/bench_memory.py`` measures how the
command line's memory and start-up grow with the corpus, and the default backend's scratch RNN is
timed at other hidden sizes and sequence lengths.
"""

import argparse
import datetime
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench._common import cpu_name, installed_python, scratch_gradient  # noqa: E402
from bench.results import other_sections, write_section  # noqa: E402

BACKENDS = ("numpy", "torch", "tensorflow", "mxnet", "jax", "paddle")
CELLS = ("rnn", "gru", "lstm")
CELL_NAMES = {"rnn": "RNN", "gru": "GRU", "lstm": "LSTM"}
LAYERS = {"torch": {"rnn": "torch.nn.RNN", "gru": "torch.nn.GRU", "lstm": "torch.nn.LSTM"},
          "tensorflow": {"rnn": "keras SimpleRNN", "gru": "keras GRU", "lstm": "keras LSTM"},
          "mxnet": {"rnn": "gluon.rnn.RNN", "gru": "gluon.rnn.GRU", "lstm": "gluon.rnn.LSTM"},
          "jax": {"rnn": "flax SimpleCell", "gru": "flax GRUCell", "lstm": "flax OptimizedLSTMCell"},
          "paddle": {"rnn": "paddle.nn.SimpleRNN", "gru": "paddle.nn.GRU", "lstm": "paddle.nn.LSTM"}}
REFERENCE_LOOP = {"torch": "{layer} + nn.Linear, clip_grad_norm_, optim.SGD",
                  "tensorflow": "{layer} + Dense, tf.function step, clip_by_global_norm, SGD",
                  "mxnet": "{layer} + Dense hybridized, clip_global_norm, Trainer sgd",
                  "jax": "nn.RNN({layer}) + nn.Dense, jax.jit step, optax clip_by_global_norm + sgd",
                  "paddle": "{layer} + nn.Linear, optimizer.SGD with ClipGradByGlobalNorm"}


def measure(backend, model, cell, seconds, hidden=512, num_steps=35):
    env = dict(os.environ, D2LRNN_BACKEND=backend, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="2")
    which = ["--framework", backend] if model == "reference" else ["--model", model]
    out = subprocess.run([installed_python(backend), str(ROOT / "bench" / "bench_train.py"), *which,
                          "--cell", cell, "--hidden", str(hidden), "--num-steps", str(num_steps),
                          "--seconds", str(seconds)],
                         capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


class _Row:
    """One row's process, ``bench_train.py --serve``: started and warmed up alone, then timing one block
    of steps at a time on request; ``stop`` ends it with the row's JSON (peak RSS, ceiling)."""

    def __init__(self, backend, model, cell, hidden=512, num_steps=35):
        env = dict(os.environ, D2LRNN_BACKEND=backend, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="2")
        which = ["--framework", backend] if model == "reference" else ["--model", model]
        self.name = f"{backend} {cell} {model}"
        self._stderr = tempfile.TemporaryFile("w+")  # a pipe could fill up and stall the child
        self._process = subprocess.Popen(
            [installed_python(backend), str(ROOT / "bench" / "bench_train.py"), *which, "--serve",
             "--cell", cell, "--hidden", str(hidden), "--num-steps", str(num_steps)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, text=True, env=env)
        self._reply()  # ready: warmed up

    def block(self, seconds):
        """One block of about ``seconds`` of steps (the child keeps its time for the row's JSON)."""
        self._ask(f"block {seconds:g}")

    def stop(self):
        row = self._ask("stop")
        self._process.wait()
        return row

    def kill(self):
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait()

    def _ask(self, line):
        self._process.stdin.write(line + "\n")
        self._process.stdin.flush()
        return self._reply()

    def _reply(self):
        for line in self._process.stdout:  # a framework may print lines of its own: the JSON one answers
            if line.startswith("{"):
                return json.loads(line)
        self._stderr.seek(0)
        raise RuntimeError(f"{self.name}: bench_train.py exited with {self._process.wait()}:\n"
                           f"{self._stderr.read()[-3000:]}")


#: Seconds between one process's block and the next's: the threads of the one that just ran stop
#: spinning first (Intel's OpenMP, in MXNet and Paddle, spins for 200 ms after a parallel region).
HANDOFF_SECONDS = 0.3


def measure_paired(backend, cell, models, blocks, block_seconds):
    """The rows of ``models`` of one (backend, cell), timed in alternating blocks (see the module's text):
    each row's JSON with ``block_tokens_per_sec`` (its blocks in order; block i of every row ran in the
    same turn) and ``slowest_round`` (its slowest block)."""
    rows = []
    try:
        for model in models:  # one at a time: each warms up, and compiles, alone
            print(f"  starting {backend} {cell} {model} ...", file=sys.stderr, flush=True)
            rows.append(_Row(backend, model, cell))
        for b in range(blocks):
            for row in rows[b % len(rows):] + rows[:b % len(rows)]:  # who goes first rotates
                time.sleep(HANDOFF_SECONDS)
                row.block(block_seconds)
        return [_stopped(row) for row in rows]
    finally:
        for row in rows:
            row.kill()


def _stopped(row):
    result = row.stop()
    result["slowest_round"] = min(result["block_tokens_per_sec"])
    return result


def paired_ratio(row, reference):
    """The median over blocks of ``row``'s tokens/s over the reference's in the same turn."""
    pairs = zip(row["block_tokens_per_sec"], reference["block_tokens_per_sec"])
    return statistics.median(a / b for a, b in pairs)


def layer_of(row):
    backend, model, cell = row["backend"], row["model"], row["cell"]
    if model == "scratch":
        return f"from scratch ({scratch_gradient(backend)})"
    if model == "concise":
        return LAYERS[backend][cell] if backend in LAYERS else "scratch recurrence (NumPy has no layer)"
    return "plain loop: " + REFERENCE_LOOP[backend].format(layer=LAYERS[backend][cell])


def vs_reference(rows):
    """{(backend, cell, model): d2lrnn's tokens/s over the same framework's reference}: the median of the
    paired blocks' ratios where the rows ran in alternating blocks, else the rows' best tokens/s."""
    ref = {(x["backend"], x["cell"]): x for x in rows if x["model"] == "reference"}
    out = {}
    for x in rows:
        reference = ref.get((x["backend"], x["cell"]))
        if x["model"] == "reference" or reference is None:
            continue
        paired = x.get("block_tokens_per_sec") and reference.get("block_tokens_per_sec")
        out[x["backend"], x["cell"], x["model"]] = (paired_ratio(x, reference) if paired
                                                     else x["tokens_per_sec"] / reference["tokens_per_sec"])
    return out


def machine_ceiling(rows):
    """``(GFLOP/s, backend)``: the best float32 2048x2048 product any framework did in this run, the
    machine's measured ceiling (None where no row measured one)."""
    measured = [(x["matmul_gflops"], x["backend"]) for x in rows if x.get("matmul_gflops")]
    return max(measured) if measured else None


def targets(rows):
    """(description, measured, met) for each target of issues 12 and 15 (and the earlier ones that still
    apply)."""
    ratios, out = vs_reference(rows), []
    for cell in ("rnn", "lstm"):  # issue 15: JAX's jitted scratch model against every other backend's
        scratch = {x["backend"]: x["tokens_per_sec"] for x in rows
                   if x["cell"] == cell and x["model"] == "scratch"}
        others = {b: v for b, v in scratch.items() if b != "jax"}
        if "jax" in scratch and others:
            fastest = max(others, key=others.get)
            share = scratch["jax"] / others[fastest]
            out.append((f"jax {CELL_NAMES[cell]}: jitted scratch >= 0.8x the fastest other backend's scratch "
                        f"({fastest})", f"{share:.2f}x", share >= 0.8))
    for model, goal in (("scratch", 1.0), ("concise", 0.95)):
        for (backend, cell, m), value in ratios.items():
            if m == model:
                out.append((f"{backend} {CELL_NAMES[cell]}: {model} >= {goal:.2f}x {LAYERS[backend][cell]} "
                            "plain loop", f"{value:.2f}x", value >= goal))
    for cell in ("rnn", "lstm"):
        mine = [x for x in rows if x["cell"] == cell and x["model"] != "reference"]
        if mine:
            best = max(mine, key=lambda x: x["gflops_model"] / x["matmul_gflops"])
            share = best["gflops_model"] / best["matmul_gflops"]
            out.append((f"{CELL_NAMES[cell]}: fastest d2lrnn row ({best['backend']} {best['model']}) >= 50% "
                        "of the matmul ceiling measured in its process "
                        f"({best['matmul_gflops']:.0f} GFLOP/s)",
                        f"{share:.0%}", share >= 0.5))
    machine, mine = machine_ceiling(rows), [x for x in rows if x["model"] != "reference"]
    if machine and mine:
        best = max(mine, key=lambda x: x["gflops_model"])
        share = best["gflops_model"] / machine[0]
        name = f"{best['backend']} {CELL_NAMES[best['cell']]} {best['model']}"
        out.append((f"fastest d2lrnn row ({name}) >= 70% of the machine's best measured matmul "
                    f"({machine[0]:.0f} GFLOP/s, {machine[1]}; issue 33)",
                    f"{share:.0%}", share >= 0.7))
    plain = {(x["backend"], x["cell"]): x["peak_rss_mb"] for x in rows if x["model"] == "reference"}
    for backend in dict.fromkeys(b for b, _ in plain):  # issue 33: memory against the plain loop's
        mine = [(x["peak_rss_mb"] / plain[backend, x["cell"]], x) for x in rows if x["backend"] == backend
                and x["model"] != "reference" and (backend, x["cell"]) in plain]
        if mine:
            ratio, worst = max(mine, key=lambda pair: pair[0])
            out.append((f"{backend}: every d2lrnn row's peak RSS <= 1.2x its plain loop's (issue 33)",
                        f"max {ratio:.2f}x ({CELL_NAMES[worst['cell']]} {worst['model']}, "
                        f"{worst['peak_rss_mb']:.0f} MB)", ratio <= 1.2))
    book = [x for x in rows if x["cell"] == "rnn" and x["model"] != "reference"]
    if book:
        worst = max(book, key=lambda x: x["peak_rss_mb"])
        out.append(("peak RSS < 512 MB for every backend's training run of the book's model (RNN)",
                    f"max {worst['peak_rss_mb']:.0f} MB ({worst['backend']} {worst['model']})",
                    worst["peak_rss_mb"] < 512))
        data = max(book, key=lambda x: x["data_epoch_seconds"] / x["train_epoch_seconds"])
        share = data["data_epoch_seconds"] / data["train_epoch_seconds"]
        out.append(("one epoch of batches < 5% of a training epoch (worst RNN pair; issue 4)",
                    f"{share:.2%} ({data['backend']} {data['model']})", share < 0.05))
    return out


def table(rows):
    ratios = vs_reference(rows)
    lines = ["| cell | backend | model | layer | tokens/s | slowest block | vs plain loop | model GFLOP/s "
             "| matmul ceiling | % of ceiling | % of machine | peak RSS (MB) | train epoch (s) "
             "| first step (s) |",
             "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    machine = machine_ceiling(rows)
    for x in rows:
        key = (x["backend"], x["cell"], x["model"])
        ratio = f"{ratios[key]:.2f}x" if key in ratios else "-"
        if x["model"] == "reference":
            ratio = "1 (reference)"
        ceiling = share = "-"
        if x["matmul_gflops"]:
            ceiling, share = f"{x['matmul_gflops']:.0f}", f"{x['gflops_model'] / x['matmul_gflops']:.0%}"
        of_machine = f"{x['gflops_model'] / machine[0]:.0%}" if machine else "-"
        lines.append(f"| {CELL_NAMES[x['cell']]} | {x['backend']} | {x['model']} | {layer_of(x)} | "
                     f"{x['tokens_per_sec']:,.0f} | {x['slowest_round']:,.0f} | {ratio} | "
                     f"{x['gflops_model']:.1f} | {ceiling} | {share} | {of_machine} | "
                     f"{x['peak_rss_mb']:.0f} | "
                     f"{x['train_epoch_seconds']:.2f} | {x['first_step_seconds']:.2f} |")
    return "\n".join(lines)


def scaling(backend, seconds):
    """The default backend's scratch RNN at other hidden sizes and sequence lengths (one round each)."""
    rows = []
    for hidden, num_steps in ((128, 35), (256, 35), (512, 35), (1024, 35), (512, 140), (512, 560)):
        print(f"scaling: {backend} hidden {hidden}, {num_steps} steps ...", file=sys.stderr, flush=True)
        rows.append(measure(backend, "scratch", "rnn", seconds, hidden, num_steps))
    lines = ["| hidden | steps | tokens/s | model GFLOP/s | % of ceiling | peak RSS (MB) |",
             "|---:|---:|---:|---:|---:|---:|"]
    for x in rows:
        lines.append(f"| {x['hidden']} | {x['num_steps']} | {x['tokens_per_sec']:,.0f} | "
                     f"{x['gflops_model']:.1f} | "
                     f"{x['gflops_model'] / x['matmul_gflops']:.0%} | {x['peak_rss_mb']:.0f} |")
    return rows, "\n".join(lines)


def corpus_scaling(backend, sizes):
    """bench/bench_memory.py's table for texts of ``sizes`` MB, in the backend's environment."""
    env = dict(os.environ, D2LRNN_BACKEND=backend, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="2")
    out = subprocess.run([installed_python(backend), str(ROOT / "bench" / "bench_memory.py"), "--json",
                          "--sizes", *map(str, sizes)], capture_output=True, text=True, env=env, check=True)
    sys.path.insert(0, str(ROOT / "bench"))
    from bench_memory import table as memory_table

    rows = json.loads(out.stdout.strip().splitlines()[-1])
    return rows, memory_table(rows)


def main(argv=None):
    parser = argparse.ArgumentParser(description="Benchmark training on every installed backend.")
    parser.add_argument("--blocks", type=int, default=8, help="alternating blocks of steps per row")
    parser.add_argument("--block-seconds", type=float, default=1.5, help="seconds of steps per block")
    parser.add_argument("--seconds", type=float, default=5.0,
                        help="timed seconds per run of the hidden-size and sequence-length table")
    parser.add_argument("--backends", nargs="*", default=list(BACKENDS))
    parser.add_argument("--cells", nargs="*", default=list(CELLS), choices=CELLS)
    parser.add_argument("--memory-sizes", type=float, nargs="*", default=[16, 64, 100],
                        help="text sizes (MB) for the corpus scaling table")
    parser.add_argument("--skip-memory", action="store_true", help="no corpus or hidden-size scaling tables")
    parser.add_argument("--section", metavar="NAME",
                        help="write the report as section NAME of bench/RESULTS.md, keeping the rest of the "
                             "file (a run of some backends beside the full run's tables)")
    args = parser.parse_args(argv)
    groups = []
    for cell in args.cells:
        for backend in args.backends:
            if installed_python(backend) is None:
                print(f"skipping {backend}: no .tox/{backend} (run tox --notest first)", file=sys.stderr)
                continue
            models = ("scratch", "concise") + (("reference",) if backend in LAYERS else ())
            groups.append((backend, cell, models))
    started = time.perf_counter()
    rows = []
    for i, (backend, cell, models) in enumerate(groups):
        print(f"{i + 1}/{len(groups)}: {backend} {cell}, {args.blocks} blocks of {args.block_seconds:g} s "
              f"in each of {', '.join(models)}", file=sys.stderr, flush=True)
        rows += measure_paired(backend, cell, models, args.blocks, args.block_seconds)
    report = [
        "# Benchmark results",
        "",
        f"Measured {datetime.date.today().isoformat()} on {cpu_name()} ({os.cpu_count()} cores), "
        "by `python bench/run.py`: character language model on The Time Machine, vocabulary 28, "
        "512 hidden units, batch 32, 35 steps, float32, CPU, 2 threads, sequential partitioning, "
        "clipping at 1, SGD with learning rate 1. Every (backend, cell, model) ran in a fresh process. The "
        "processes of one (backend, cell) started together, each warming up alone (3 steps), and then "
        f"took turns, one running at a time: {args.blocks} blocks of about {args.block_seconds:g} s of "
        "steps in each, a block's tokens/s being the median of its steps'. *tokens/s* is the row's best "
        "block, *slowest block* its slowest (the machine is shared and its speed drifts by tens of "
        "percent within minutes).",
        "",
        "The reference (`bench/reference.py`) is the training a user of each framework writes without "
        "d2lrnn: the framework's fused layer, a dense output layer, mean cross-entropy, its global-norm "
        "clipping and SGD, with the framework's default initialization and no d2lrnn code in the step "
        "(d2lrnn only loads the batches beforehand, and its malloc setting is off in that process). "
        "*vs plain loop* is the median over the blocks of the row's tokens/s over the reference's block "
        "of the same turn: blocks seconds apart, which the machine's drift over minutes does not tell "
        "apart. The scratch "
        "GRU computes the book's form (reset gate before the recurrent product); the frameworks' layers "
        "and d2lrnn's concise GRU compute the cuDNN form (after it), which costs the same products.",
        "",
        table(rows),
        "",
        "Model GFLOP/s counts 6 FLOPs per weight per token (each gate's W_x and W_h, and W_hq; 2 forward,"
        " 4 backward). The matmul ceiling is the float32 GFLOP/s of a 2048x2048 product on the row's "
        "framework, measured twice in the same process just after its training window (the better of the "
        "two; after its peak RSS is read), so that the share compares numbers from the same minutes of "
        "this shared machine. *% of machine* is the row's model GFLOP/s over the best ceiling of any "
        "framework in the run: the machine's best measured float32 product (frameworks reach different "
        "shares of the same cores, and which is fastest depends on the machine). Peak RSS is the "
        "process's maximum resident memory, framework included. *First step* is the wall time of the "
        "first training step, left out of tokens/s: on tensorflow and jax it is mostly tracing and "
        "compiling the step (jax compiles the scratch models' 35 unrolled steps, forward and backward, "
        "into one XLA program), elsewhere the first call's allocations.",
    ]
    ok = targets(rows)
    if not args.skip_memory:
        default = "numpy" if installed_python("numpy") else args.backends[0]
        corpus_rows, corpus_table = corpus_scaling(default, args.memory_sizes)
        sizes_rows, sizes_table = scaling(default, args.seconds)
        big = [r for r in corpus_rows if r["bytes_per_char"] is not None]
        for r in big:
            ok.append((f"{r['corpus']}: <= 10 bytes of peak memory per character above the footprint",
                       f"{r['bytes_per_char']:.1f}", r["bytes_per_char"] <= 10))
        for r in big:
            if r["megabytes"] >= 100:
                ok.append((f"{r['corpus']}: one epoch of a small model in < 2 GB",
                           f"{r['peak_rss_mb']:.0f} MB", r["peak_rss_mb"] < 2048))
            if r["megabytes"] >= 64:
                ok.append((f"{r['corpus']}: the progress bar within 5 s of start", f"{r['bar']:.1f} s",
                           r["bar"] < 5))
            share = (r["baselines"] - r["summary"]) / (r["done"] - r["bar"])
            ok.append((f"{r['corpus']}: n-gram baselines a small fraction (< 10%) of the epoch",
                       f"{share:.1%}", share < 0.1))
        report += [
            "",
            f"## Corpus size ({default}, `d2lrnn train --epochs 1 --hidden 16`, one fresh process each)",
            "",
            corpus_table,
            "",
            "The footprint is the same command on the Time Machine: interpreter, framework, model, "
            "plotting. *Above footprint* is (peak RSS - footprint) / characters. Times are from the "
            "process's start to the moment each line of output arrived. The n-gram baselines are "
            "fitted on at most 500,000 training characters and scored on at most 200,000 validation "
            "characters (`d2lrnn.data.ngram.baseline_sample`), so they cost the same at any size.",
            "",
            f"## Hidden size and sequence length ({default}, from-scratch RNN, batch 32, one round each)",
            "",
            sizes_table,
        ]
    report += ["", "## Targets (issues 12 and 15)", "", "| target | measured | met |", "|---|---|---|"]
    report += [f"| {t} | {m} | {'yes' if good else '**no**'} |" for t, m, good in ok]
    report += ["", f"The whole run took {(time.perf_counter() - started) / 60:.0f} minutes."]
    text = "\n".join(report) + "\n"
    print(text)
    if args.section:
        title = f"## Training speed: {', '.join(args.backends)} (`bench/run.py --section {args.section}`)"
        write_section(args.section, "\n".join([title] + report[1:]) + "\n")
        return
    kept = other_sections(ROOT / "bench" / "RESULTS.md")  # bench/bench_lm.py's curves, for one
    (ROOT / "bench" / "RESULTS.md").write_text(text + ("\n" + kept if kept else ""))


if __name__ == "__main__":
    main()
