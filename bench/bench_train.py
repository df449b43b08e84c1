"""Training throughput and peak memory of one model on the active backend, as one JSON line.

    D2LRNN_BACKEND=torch python bench/bench_train.py --model scratch --cell lstm
    python bench/bench_train.py --framework torch --cell lstm     # the plain torch loop

The book's configuration: vocabulary 28 (Time Machine characters), 512 hidden units, batch 32,
35 steps, float32 on the CPU with 2 threads, sequential partitioning, clipping at 1, SGD.
``--model`` is d2lrnn's from-scratch model or its concise model (the framework's layer through
d2lrnn); ``--framework`` times the reference instead: the plain framework loop of
``bench/reference.py``, with no d2lrnn code in its steps and malloc left as the framework has it
(d2lrnn, on NumPy, only loads the batches before). Run in a fresh process
per model so the peak RSS belongs to that training run (read as training ends). For d2lrnn's models it
then measures the float32 GFLOP/s of a 2048 x 2048 matmul on the same backend twice (the machine's
ceiling, the better of the two; after the peak is read, so that its operands are not counted as the
training's memory, which the plain loop's process never holds) and the time of one epoch of data
batches (for the data pipeline's share of an epoch). The first step is timed on its own as well: on
TensorFlow and JAX it includes tracing and compiling the step, which the median of the later steps
leaves out.
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
os.environ.setdefault("TF_NUM_INTEROP_THREADS", "2")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=true intra_op_parallelism_threads=2")
os.environ.setdefault("D2LRNN_JAX_CACHE", "off")  # the first step compiles: no programs from earlier runs
if "--framework" in " ".join(sys.argv):  # the reference: d2lrnn (on NumPy) only loads the batches
    os.environ["D2LRNN_BACKEND"], os.environ["D2LRNN_MALLOC"] = "numpy", "default"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

import d2lrnn as d2l  # noqa: E402
from bench.bench_data import time_data_epoch  # noqa: E402
from bench.blocks import serve_blocks, timed_block, warm_up  # noqa: E402
from d2lrnn import ops  # noqa: E402
from d2lrnn.training.loop import placed  # noqa: E402

VOCAB, HIDDEN, BATCH, STEPS = 28, 512, 32, 35
GATES = {"rnn": 1, "gru": 3, "lstm": 4}


def flops_per_token(vocab=VOCAB, hidden=HIDDEN, cell="rnn"):
    """Training FLOPs per token: 6 per weight (2 forward, 4 backward) for each gate's W_x and W_h
    and for W_hq."""
    return 6 * (GATES[cell] * (vocab * hidden + hidden * hidden) + hidden * vocab)


def matmul_gflops(n=2048, repeats=5, device=None):
    """Best float32 GFLOP/s of an n x n matmul on the active backend (on ``device``)."""
    r = np.random.default_rng(0)
    A = ops.from_numpy(r.standard_normal((n, n)).astype(np.float32), device)
    B = ops.from_numpy(r.standard_normal((n, n)).astype(np.float32), device)
    ops.to_numpy(ops.matmul(A, B))
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        ops.to_numpy(ops.sum(ops.matmul(A, B)))  # sum: sync without copying the result out
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best / 1e9


def _time_steps(step, batches, seconds, warmup):
    """Median seconds per ``step(batch)`` over about ``seconds`` after ``warmup`` steps, the count, and
    the seconds of the first step (compilation included where the step is compiled)."""
    first, i = warm_up(step, batches, warmup)
    times = timed_block(step, batches, i, seconds, at_least=3)
    return float(np.median(times)), len(times), first


def _batches(steps):
    train_iter, _, vocab = d2l.load_data_lm("timemachine", BATCH, steps, False, seed=0, val_fraction=0.1)
    assert len(vocab) == VOCAB
    return train_iter, [(ops.to_numpy(X), ops.to_numpy(Y)) for X, Y in train_iter]


def lm_training(model, cell, hidden, train_iter, device=None):
    """d2lrnn's book-sized model and its SGD step on ``device``: (net, updater, minibatches there,
    ``step(batch)`` -> the loss), the state carried from batch to batch (sequential partitioning)."""
    net = d2l.make_model(model, VOCAB, hidden, device, cell=cell)
    updater = d2l.make_train_step(net, 1.0, 1.0, device=device)
    batches = [placed(batch, device) for batch in train_iter]
    state = [net.begin_state(BATCH, device)]

    def step(batch):
        l, net.params, state[0] = updater(net.params, *batch, state[0])
        return l

    return net, updater, batches, step


def training_step(model, cell="rnn", hidden=HIDDEN, steps=STEPS, framework=None, device=None, gpu=False):
    """``(step, batches, epoch_batches)``: one SGD step on a batch, returning once the loss is read back,
    the batches it trains on (Time Machine, sequential) and their number per epoch. ``model``
    'reference' is ``framework``'s plain loop; ``device``: where d2lrnn's model and minibatches live;
    ``gpu``: the reference on the first GPU."""
    d2l.manual_seed(0)
    train_iter, numpy_batches = _batches(steps)
    if model == "reference":
        from bench.reference import make_reference

        ref = make_reference(framework, cell, VOCAB, hidden, BATCH, gpu=gpu)
        return ref.step, [ref.to_batch(X, Y) for X, Y in numpy_batches], len(numpy_batches)  # step: a sync
    _, _, batches, train_step = lm_training(model, cell, hidden, train_iter, device)

    def step(batch):
        float(ops.to_numpy(train_step(batch)))  # the training loop syncs on the loss every step too

    return step, batches, len(numpy_batches)


def train_throughput(model, cell="rnn", hidden=HIDDEN, steps=STEPS, seconds=20.0, warmup=3, framework=None,
                     device=None, gpu=False):
    """Tokens/s of SGD steps on Time Machine batches (median over ~``seconds`` of steps), seconds per
    epoch, steps timed and the first step's seconds (see :func:`training_step` for the arguments)."""
    step, batches, epoch_batches = training_step(model, cell, hidden, steps, framework, device, gpu)
    per_batch, n, first = _time_steps(step, batches, seconds, warmup)
    return BATCH * steps / per_batch, per_batch * epoch_batches, n, first


def set_framework_threads(name, n):
    """The framework's own thread settings, as a user of the plain framework would make them."""
    if name == "torch":
        import torch

        torch.set_num_threads(n)
    elif name == "tensorflow":
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(n)
        tf.config.threading.set_inter_op_parallelism_threads(n)
    # Paddle reads OMP_NUM_THREADS (set above) as it loads: the setting its documentation gives users.


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=["scratch", "concise"], default="scratch")
    parser.add_argument("--framework", choices=["torch", "tensorflow", "mxnet", "jax", "paddle"],
                        help="time this framework's plain loop (bench/reference.py), not d2lrnn")
    parser.add_argument("--cell", choices=list(GATES), default="rnn")
    parser.add_argument("--hidden", type=int, default=HIDDEN)
    parser.add_argument("--num-steps", type=int, default=STEPS)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--serve", action="store_true",
                        help="time blocks of steps on request (see serve_blocks; bench/run.py pairs rows so)")
    parser.add_argument("--gpu", action="store_true",
                        help="train on the first GPU (torch and jax; bench/gpu_check.py runs these)")
    args = parser.parse_args(argv)
    reference = args.framework is not None
    if args.gpu and not reference and d2l.num_gpus() == 0:
        parser.error(f"--gpu: {d2l.backend_name()} sees no GPU here; leave --gpu out to train on the CPU")
    device = d2l.try_gpu() if args.gpu and not reference else None
    if reference:
        args.model = "reference"
        set_framework_threads(args.framework, 2)
    else:
        ops.set_num_threads(2)
    if args.serve:
        step, batches, epoch_batches = training_step(args.model, args.cell, args.hidden, args.num_steps,
                                                     args.framework, device, args.gpu)
        first_step, medians, steps = serve_blocks(step, batches)
        blocks = [BATCH * args.num_steps / m for m in medians]
        tokens_per_sec, epoch_seconds = max(blocks), min(medians) * epoch_batches  # the best block
    else:
        tokens_per_sec, epoch_seconds, steps, first_step = train_throughput(
            args.model, args.cell, args.hidden, args.num_steps, args.seconds, framework=args.framework,
            device=device, gpu=args.gpu)
    # The training's peak, read before anything else allocates: the ceiling's 2048 x 2048 operands added
    # ~90 MB to TensorFlow's peak when it was measured before training, which the plain loop never does.
    peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    # Twice, the better of the two, right after training: the same minutes of this machine.
    ceiling = None if reference else max(matmul_gflops(device=device), matmul_gflops(device=device))
    result = {
        "backend": args.framework or d2l.backend_name(),
        "model": args.model,
        "cell": args.cell,
        "hidden": args.hidden,
        "num_steps": args.num_steps,
        "tokens_per_sec": tokens_per_sec,
        "steps_timed": steps,
        "block_tokens_per_sec": blocks if args.serve else None,
        "first_step_seconds": first_step,
        "train_epoch_seconds": epoch_seconds,
        "data_epoch_seconds": None if reference else time_data_epoch(BATCH, args.num_steps, False),
        "gflops_model": tokens_per_sec * flops_per_token(VOCAB, args.hidden, args.cell) / 1e9,
        "matmul_gflops": ceiling,
        "device": "gpu" if args.gpu else "cpu",
        "peak_rss_mb": peak_rss_mb,
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
