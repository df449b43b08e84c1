"""Run a command holding one of the machine's CPU slots: ``python -m tests.cpu_slot COMMAND [ARGS...]``.

``tox -p`` starts every env at once, so on a 2-core machine six test suites would share two cores. Each
would keep its own working set (XLA, TensorFlow, torch, ...) and lose it to the others at every switch:
the same tests took 7% more CPU time three envs to two cores than two to two, and the whole command about a
fifth more six to two. The envs still build side by side (that is mostly waiting on pip); their tests run
only as many at a time as there are cores, each in a slot: a file under ``D2LRNN_CPU_SLOTS_DIR``
(tox.ini points it into the tox work dir) locked with ``flock`` for as long as the command runs. The
kernel drops the lock when the process ends, however it ends, so a crashed or killed run leaves no slot
taken. A machine with at least as many cores as envs never waits.

``D2LRNN_CPU_SLOTS`` overrides the number of slots; without ``D2LRNN_CPU_SLOTS_DIR`` the command runs at
once.
"""

import fcntl
import os
import signal
import subprocess
import sys
import time

POLL_SECONDS = 0.5  # how often a waiting env looks for a free slot: the wait is minutes, the look free


def slot_count():
    """``D2LRNN_CPU_SLOTS``, or the number of cores this process may run on."""
    value = os.environ.get("D2LRNN_CPU_SLOTS", "")
    if value:
        if not value.isdigit() or int(value) < 1:
            raise SystemExit(f"D2LRNN_CPU_SLOTS={value!r} is not a positive whole number: set it to one, "
                             "or unset it to use the number of cores")
        return int(value)
    return len(os.sched_getaffinity(0))


def try_slot(folder, index):
    """An open descriptor holding slot ``index``'s lock, or None when another process holds it."""
    fd = os.open(os.path.join(folder, f"slot-{index}"), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def take_slot(folder, slots, say=print):
    """Wait for a free slot in ``folder`` and return its locked descriptor (keep it open to keep it)."""
    os.makedirs(folder, mode=0o700, exist_ok=True)
    said = False
    while True:
        for index in range(slots):
            fd = try_slot(folder, index)
            if fd is not None:
                return fd
        if not said:
            say(f"cpu_slot: all {slots} slots busy with other envs' tests; waiting for one "
                f"(D2LRNN_CPU_SLOTS={slots})", flush=True)
            said = True
        time.sleep(POLL_SECONDS)


def run(argv):
    """Run ``argv`` to its end and return its exit code; SIGINT and SIGTERM sent to us are passed on to it."""
    child = subprocess.Popen(argv)

    def pass_on(signum, frame):
        child.send_signal(signum)

    before = {signum: signal.signal(signum, pass_on) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        code = child.wait()
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)
    return 128 - code if code < 0 else code  # killed by signal N: the shell's 128 + N


def main(argv):
    """Run ``argv`` in a slot; return its exit code."""
    if not argv:
        raise SystemExit("usage: python -m tests.cpu_slot COMMAND [ARGS...]")
    folder = os.environ.get("D2LRNN_CPU_SLOTS_DIR")
    try:
        slot = take_slot(folder, slot_count()) if folder else None
    except KeyboardInterrupt:
        return 130
    try:
        return run(argv)
    finally:
        if slot is not None:
            os.close(slot)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
