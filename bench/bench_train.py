"""Training throughput and peak memory of one model on the active backend, as one JSON line.

    D2LRNN_BACKEND=torch python bench/bench_train.py --model scratch

The book's configuration: vocabulary 28 (Time Machine characters), 512 hidden units, batch 32,
35 steps, float32 on the CPU with 2 threads, sequential partitioning, clipping at 1, SGD.
Run in a fresh process per model so the peak RSS belongs to that training run. Also measures
the float32 GFLOP/s of a 2048 x 2048 matmul on the same backend just before and after training
(the machine's ceiling, the better of the two) and the
time of one epoch of data batches (for the data pipeline's share of an epoch).
"""

import argparse
import json
import os
import platform
import resource
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "2")
os.environ.setdefault("MKL_NUM_THREADS", "2")
os.environ.setdefault("TF_NUM_INTRAOP_THREADS", "2")
os.environ.setdefault("TF_NUM_INTEROP_THREADS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

import d2lrnn as d2l  # noqa: E402
from bench.bench_data import time_data_epoch  # noqa: E402
from d2lrnn import ops  # noqa: E402

VOCAB, HIDDEN, BATCH, STEPS = 28, 512, 32, 35


def flops_per_token(vocab=VOCAB, hidden=HIDDEN):
    """Training FLOPs per token: 6 per weight (2 forward, 4 backward) for W_xh, W_hh, W_hq."""
    return 6 * (vocab * hidden + hidden * hidden + hidden * vocab)


def matmul_gflops(n=2048, repeats=5):
    """Best float32 GFLOP/s of an n x n matmul on the active backend."""
    r = np.random.default_rng(0)
    A = ops.from_numpy(r.standard_normal((n, n)).astype(np.float32))
    B = ops.from_numpy(r.standard_normal((n, n)).astype(np.float32))
    ops.to_numpy(ops.matmul(A, B))
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        ops.to_numpy(ops.sum(ops.matmul(A, B)))  # sum: sync without copying the result out
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best / 1e9


def train_throughput(model, seconds=20.0, warmup=3):
    """Tokens/s of SGD steps on Time Machine batches (median over ~``seconds`` of steps)."""
    d2l.manual_seed(0)
    train_iter, _, vocab = d2l.load_data_lm("timemachine", BATCH, STEPS, False, seed=0,
                                            val_fraction=0.1)
    assert len(vocab) == VOCAB
    net = d2l.make_model(model, len(vocab), HIDDEN)
    step = d2l.make_train_step(net, 1.0, 1.0)
    batches = list(train_iter)
    state, times, i = net.begin_state(BATCH), [], 0
    deadline = time.perf_counter() + seconds
    while i < warmup or time.perf_counter() < deadline:
        X, Y = batches[i % len(batches)]
        start = time.perf_counter()
        l, net.params, state = step(net.params, X, Y, state)
        float(ops.to_numpy(l))  # the training loop syncs on the loss every step too
        if i >= warmup:
            times.append(time.perf_counter() - start)
        i += 1
    per_batch = float(np.median(times))
    return BATCH * STEPS / per_batch, per_batch * len(batches), len(times)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=["scratch", "concise"], default="scratch")
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args(argv)
    ops.set_num_threads(2)
    ceiling_before = matmul_gflops()  # and again after: the same minutes of this shared machine
    tokens_per_sec, epoch_seconds, steps = train_throughput(args.model, args.seconds)
    result = {
        "backend": d2l.backend_name(),
        "model": args.model,
        "tokens_per_sec": tokens_per_sec,
        "steps_timed": steps,
        "train_epoch_seconds": epoch_seconds,
        "data_epoch_seconds": time_data_epoch(BATCH, STEPS, False),
        "gflops_model": tokens_per_sec * flops_per_token() / 1e9,
        "matmul_gflops": max(ceiling_before, matmul_gflops()),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
