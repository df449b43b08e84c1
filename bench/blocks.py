"""Timing training steps in blocks, for ``bench_train.py`` and the paired rows of ``bench/run.py``."""

import json
import sys
import time

import numpy as np


def warm_up(step, batches, warmup):
    """The seconds of the first of ``warmup`` untimed steps, and the index of the next batch."""
    start = time.perf_counter()
    step(batches[0])
    first = time.perf_counter() - start
    for i in range(1, warmup):
        step(batches[i % len(batches)])
    return first, max(warmup, 1)


def timed_block(step, batches, i, seconds, at_least=2):
    """The seconds of each step run from batch ``i`` on for about ``seconds`` (at least ``at_least``)."""
    times = []
    deadline = time.perf_counter() + seconds
    while len(times) < at_least or time.perf_counter() < deadline:
        start = time.perf_counter()
        step(batches[(i + len(times)) % len(batches)])
        times.append(time.perf_counter() - start)
    return times


def serve_blocks(step, batches, warmup=3, commands=None, replies=None):
    """Paired timing (``bench/run.py``): warm up, say ``ready`` with the first step's seconds, then for
    each line ``block SECONDS`` run steps for about that long and reply with their seconds per step (the
    median) and count, one JSON line each, until the line ``stop``. The caller alternates such blocks
    between the processes it compares, so that each block of one has a block of the other beside it in
    time. Returns the first step's seconds, every block's median seconds per step, and the steps timed."""
    commands, replies = commands or sys.stdin, replies or sys.stdout
    first, i = warm_up(step, batches, warmup)
    print(json.dumps({"ready": True, "first_step_seconds": first}), file=replies, flush=True)
    medians, steps = [], 0
    for line in commands:
        words = line.split()
        if words[:1] == ["stop"]:
            break
        if words[:1] != ["block"] or len(words) != 2:
            raise SystemExit(f"bench_train --serve: expected 'block SECONDS' or 'stop', got {line.strip()!r}")
        times = timed_block(step, batches, i, float(words[1]))
        i, steps = i + len(times), steps + len(times)
        medians.append(float(np.median(times)))
        print(json.dumps({"seconds_per_step": medians[-1], "steps": len(times)}), file=replies, flush=True)
    return first, medians, steps
