"""Run a command holding one of the machine's CPU slots: ``python -m tests.cpu_slot COMMAND [ARGS...]``.

``tox -p`` starts every env at once, so on a 2-core machine six test suites would share two cores. Each
would keep its own working set (XLA, TensorFlow, torch, ...) and lose it to the others at every switch:
the same tests took 7% more CPU time three envs to two cores than two to two, and `.ci/run` from a fresh
clone 1,512 CPU-s all at once against 1,338 and 1,375 taking turns (2026-11-28). The envs still build
side by side; their tests run only as many at a time as there are cores, each in a slot: a file under
``D2LRNN_CPU_SLOTS_DIR`` (tox.ini points it into the tox work dir) locked with ``flock`` for as long as
the command runs. The kernel drops the lock when the process ends, however it ends, so a crashed or
killed run leaves no slot taken. A machine with at least as many cores as envs never waits.

When several envs wait, the one listed first in tox.ini's ``envlist`` (longest first) goes first, and a
run marked ``--after-others`` after all of them, so the short runs fill in at the end instead of a long
one running alone there. A waiter says so with a file it holds locked while it waits
(``waiting-RANK-PID``), so one that died waiting blocks no one.

``D2LRNN_CPU_SLOTS`` overrides the number of slots; without ``D2LRNN_CPU_SLOTS_DIR`` the command runs at
once.
"""

import configparser
import fcntl
import os
import signal
import subprocess
import sys
import time

POLL_SECONDS = 0.5  # how often a waiting env looks for a free slot: the wait is minutes, the look free
LATER = 1000  # added to the rank of a run that waits behind every env's main run (--after-others)


def slot_count():
    """``D2LRNN_CPU_SLOTS``, or the number of cores this process may run on."""
    value = os.environ.get("D2LRNN_CPU_SLOTS", "")
    if value:
        if not value.isdigit() or int(value) < 1:
            raise SystemExit(f"D2LRNN_CPU_SLOTS={value!r} is not a positive whole number: set it to one, "
                             "or unset it to use the number of cores")
        return int(value)
    return len(os.sched_getaffinity(0))


def env_rank(tox_ini="tox.ini", env_name=None):
    """The position of this tox env (``TOX_ENV_NAME``) in ``tox_ini``'s envlist; after every listed env
    when it is not listed or there is no tox.ini."""
    env_name = env_name or os.environ.get("TOX_ENV_NAME", "")
    config = configparser.ConfigParser(interpolation=None)
    config.read(tox_ini)
    listed = config.get("tox", "envlist", fallback="").replace("\n", ",").split(",")
    envlist = [name.strip() for name in listed if name.strip()]
    return envlist.index(env_name) if env_name in envlist else len(envlist)


def lock_file(path, mode):
    """An open descriptor of ``path`` locked with ``mode`` (never through a link), or None when taken."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, mode | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def try_slot(folder, index):
    """An open descriptor holding slot ``index``'s lock, or None when another process holds it."""
    return lock_file(os.path.join(folder, f"slot-{index}"), fcntl.LOCK_EX)


def waiting_ahead(folder, rank, pid):
    """Whether a live waiter in ``folder`` goes before (rank, pid): a lower rank, or the same and an older
    pid. A waiting file nobody holds is left over from a waiter that died, and is removed."""
    for name in os.listdir(folder):
        parts = name.split("-")
        if len(parts) != 3 or parts[0] != "waiting" or not (parts[1].isdigit() and parts[2].isdigit()):
            continue
        if (int(parts[1]), int(parts[2])) >= (rank, pid):
            continue
        probe = lock_file(os.path.join(folder, name), fcntl.LOCK_EX)
        if probe is None:
            return True  # its waiter holds it
        os.unlink(os.path.join(folder, name))
        os.close(probe)
    return False


def take_slot(folder, slots, rank=0, say=print):
    """Wait for a free slot in ``folder``, behind the waiters that go before ``rank``, and return the
    slot's locked descriptor (keep it open to keep the slot)."""
    os.makedirs(folder, mode=0o700, exist_ok=True)
    pid = os.getpid()
    waiting = os.path.join(folder, f"waiting-{rank}-{pid}")
    marker = lock_file(waiting, fcntl.LOCK_EX)
    try:
        said = False
        while True:
            if not waiting_ahead(folder, rank, pid):
                for index in range(slots):
                    fd = try_slot(folder, index)
                    if fd is not None:
                        return fd
            if not said:
                say(f"cpu_slot: {os.environ.get('TOX_ENV_NAME', 'this command')} waits for one of {slots} "
                    f"slots, busy with other envs' tests (D2LRNN_CPU_SLOTS={slots})", flush=True)
                said = True
            time.sleep(POLL_SECONDS)
    finally:
        try:
            os.unlink(waiting)
        except FileNotFoundError:  # a waiter probed it between our creating and locking it: no matter
            pass
        if marker is not None:
            os.close(marker)


def run(argv):
    """Run ``argv`` to its end and return its exit code. A SIGTERM sent to us (tox's way of stopping a
    command that outlived Ctrl-C) is passed on to it. SIGINT is not: Ctrl-C at a terminal reaches the
    command itself, as it is in our process group, and a second copy would cut short its own handling."""
    child = subprocess.Popen(argv)

    def pass_on(signum, frame):
        child.send_signal(signum)

    def wait_for_the_command(signum, frame):
        pass

    before = {signal.SIGINT: signal.signal(signal.SIGINT, wait_for_the_command),
              signal.SIGTERM: signal.signal(signal.SIGTERM, pass_on)}
    try:
        code = child.wait()
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)
    return 128 - code if code < 0 else code  # killed by signal N: the shell's 128 + N


def main(argv):
    """Run ``argv`` in a slot; return its exit code. ``--after-others`` first: wait behind every env's
    main run (for a short second run, such as TensorFlow's on Keras 2: the last jobs should be short)."""
    after_others = argv[:1] == ["--after-others"]
    argv = argv[1:] if after_others else argv
    if not argv:
        raise SystemExit("usage: python -m tests.cpu_slot [--after-others] COMMAND [ARGS...]")
    folder = os.environ.get("D2LRNN_CPU_SLOTS_DIR")
    rank = env_rank() + (LATER if after_others else 0)
    try:
        slot = take_slot(folder, slot_count(), rank) if folder else None
    except KeyboardInterrupt:
        return 130
    try:
        return run(argv)
    finally:
        if slot is not None:
            os.close(slot)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
