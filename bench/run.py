"""Run the training benchmark on every installed backend and write bench/RESULTS.md.

    tox --notest            # once: creates .tox/<backend> environments
    python bench/run.py     # about 5 minutes on 2 cores

Each (backend, model) pair runs in a fresh process of that backend's tox environment, one
after the other, so timings do not compete and peak RSS belongs to one training run. The
pairs are measured in several interleaved rounds and each keeps its best round: these
machines are shared, their speed drifts by tens of percent within minutes, and the best of
interleaved rounds compares backends at the machine's uncontended speed rather than at
whatever it was doing when their turn came. Ratios compare numbers from this one run.
"""

import argparse
import datetime
import json
import os
import pathlib
import platform
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
BACKENDS = ("numpy", "torch", "tensorflow", "mxnet")
LAYERS = {"numpy": "scratch recurrence", "torch": "torch.nn.RNN", "tensorflow": "keras SimpleRNN",
          "mxnet": "gluon.rnn.RNN"}


def python_for(backend):
    exe = ROOT / ".tox" / backend / "bin" / "python"
    return str(exe) if exe.exists() else None


def measure(backend, model, seconds):
    env = dict(os.environ, D2LRNN_BACKEND=backend, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="2")
    out = subprocess.run([python_for(backend), str(ROOT / "bench" / "bench_train.py"), "--model", model,
                          "--seconds", str(seconds)], capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def best_of(rounds):
    """One row from several rounds of the same pair: the fastest round, with the spread kept."""
    best = dict(max(rounds, key=lambda x: x["tokens_per_sec"]))  # with its own process's ceiling
    best["peak_rss_mb"] = max(x["peak_rss_mb"] for x in rounds)
    best["data_epoch_seconds"] = min(x["data_epoch_seconds"] for x in rounds)
    best["slowest_round"] = min(x["tokens_per_sec"] for x in rounds)
    return best


def cpu_name():
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def targets(rows):
    """(description, measured, met) for each target of issue 4."""
    r = {(x["backend"], x["model"]): x for x in rows}
    tps = {k: v["tokens_per_sec"] for k, v in r.items()}
    out = []

    def ratio(a, b, goal, text):
        if a in tps and b in tps:
            value = tps[a] / tps[b]
            out.append((text, f"{value:.2f}x", value >= goal))

    ratio(("torch", "scratch"), ("torch", "concise"), 1.0, "torch: scratch >= 1.0x torch.nn.RNN")
    ratio(("tensorflow", "scratch"), ("tensorflow", "concise"), 1.0,
          "TensorFlow: scratch >= 1.0x keras SimpleRNN (both tf.function)")
    ratio(("mxnet", "scratch"), ("mxnet", "concise"), 0.4, "MXNet: scratch >= 0.4x gluon.rnn.RNN")
    ratio(("numpy", "scratch"), ("torch", "scratch"), 0.7, "numpy: scratch >= 0.7x torch scratch")
    if rows:
        best = max(rows, key=lambda x: x["gflops_model"])
        share = best["gflops_model"] / best["matmul_gflops"]
        highest = max(x["matmul_gflops"] for x in rows)
        out.append((f"fastest ({best['backend']} {best['model']}) >= 40% of the matmul ceiling "
                    f"({best['matmul_gflops']:.0f} GFLOP/s, same process; the run's highest is "
                    f"{highest:.0f})", f"{share:.0%} ({best['gflops_model'] / highest:.0%} of the "
                    "run's highest)", share >= 0.4))
        worst = max(rows, key=lambda x: x["peak_rss_mb"])
        out.append(("peak RSS < 1 GB on every backend", f"max {worst['peak_rss_mb']:.0f} MB "
                    f"({worst['backend']} {worst['model']})", worst["peak_rss_mb"] < 1024))
        data = max(rows, key=lambda x: x["data_epoch_seconds"] / x["train_epoch_seconds"])
        share = data["data_epoch_seconds"] / data["train_epoch_seconds"]
        out.append(("one epoch of batches < 5% of a training epoch (worst pair)",
                    f"{share:.2%} ({data['backend']} {data['model']})", share < 0.05))
    return out


def table(rows):
    lines = ["| backend | model | layer | tokens/s | slowest round | model GFLOP/s | matmul ceiling "
             "| % of ceiling | peak RSS (MB) | train epoch (s) | data epoch (s) |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for x in rows:
        layer = "from scratch (hand-written BPTT)" if x["model"] == "scratch" else LAYERS[x["backend"]]
        lines.append(f"| {x['backend']} | {x['model']} | {layer} | {x['tokens_per_sec']:,.0f} | "
                     f"{x['slowest_round']:,.0f} | "
                     f"{x['gflops_model']:.1f} | {x['matmul_gflops']:.0f} | "
                     f"{x['gflops_model'] / x['matmul_gflops']:.0%} | "
                     f"{x['peak_rss_mb']:.0f} | {x['train_epoch_seconds']:.2f} | "
                     f"{x['data_epoch_seconds']:.3f} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description="Benchmark training on every installed backend.")
    parser.add_argument("--seconds", type=float, default=6.0, help="timed seconds per model and round")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; each pair keeps its best")
    parser.add_argument("--backends", nargs="*", default=list(BACKENDS))
    args = parser.parse_args(argv)
    pairs = []
    for backend in args.backends:
        if python_for(backend) is None:
            print(f"skipping {backend}: no .tox/{backend} (run tox --notest first)", file=sys.stderr)
            continue
        pairs += [(backend, "scratch"), (backend, "concise")]
    results = {pair: [] for pair in pairs}
    for r in range(args.rounds):
        for backend, model in pairs:
            print(f"round {r + 1}/{args.rounds}: {backend} {model} ...", file=sys.stderr, flush=True)
            results[backend, model].append(measure(backend, model, args.seconds))
    rows = [best_of(results[pair]) for pair in pairs]
    report = [
        "# Benchmark results",
        "",
        f"Measured {datetime.date.today().isoformat()} on {cpu_name()} ({os.cpu_count()} cores), "
        "by `python bench/run.py`: character RNN language model on The Time Machine, vocabulary 28, "
        "512 hidden units, batch 32, 35 steps, float32, CPU, 2 threads, sequential partitioning, "
        "clipping at 1, SGD. Every pair ran in a fresh process in each of "
        f"{args.rounds} interleaved rounds; a round's tokens/s is the median over about "
        f"{args.seconds:.0f} s of steps after 3 warm-up steps, and the table keeps each pair's "
        "best round (the slowest is shown next to it: the machine is shared and its speed drifts).",
        "",
        table(rows),
        "",
        "Model GFLOP/s counts 6 FLOPs per weight per token (W_xh, W_hh, W_hq; 2 forward, 4 backward). "
        "The matmul ceiling is the float32 GFLOP/s of a 2048x2048 product on the row's framework, "
        "measured in the same process just before and just after its training window (the better "
        "of the two), so that the share compares numbers from the same minutes of this shared "
        "machine; the fastest row's share against the run's highest ceiling is given too.",
        "",
        "## Targets (issue 4)",
        "",
        "| target | measured | met |",
        "|---|---|---|",
    ] + [f"| {t} | {m} | {'yes' if ok else '**no**'} |" for t, m, ok in targets(rows)]
    text = "\n".join(report) + "\n"
    print(text)
    (ROOT / "bench" / "RESULTS.md").write_text(text)


if __name__ == "__main__":
    main()
