"""tests/cpu_slot.py, which makes the envs of ``tox -p`` take turns for the cores: at most as many test
commands at a time as there are slots, a slot freed however its holder ends, the command's exit code
passed through."""

import os
import signal
import subprocess
import sys
import threading

import pytest

from tests import cpu_slot
from tests.conftest import HANG_GUARD_SECONDS, ROOT

pytestmark = pytest.mark.once  # no backend involved


@pytest.fixture(autouse=True)
def _in_the_numpy_env(monkeypatch):
    monkeypatch.setenv("TOX_ENV_NAME", "numpy")


def test_each_slot_has_one_holder_until_it_is_closed(tmp_path):
    first = cpu_slot.take_slot(str(tmp_path), 2)
    second = cpu_slot.take_slot(str(tmp_path), 2)
    assert sorted(os.listdir(tmp_path)) == ["slot-0", "slot-1"]
    assert cpu_slot.try_slot(str(tmp_path), 0) is None and cpu_slot.try_slot(str(tmp_path), 1) is None
    os.close(first)
    again = cpu_slot.try_slot(str(tmp_path), 0)
    assert again is not None
    assert cpu_slot.try_slot(str(tmp_path), 0) is None
    for fd in (second, again):
        os.close(fd)


def test_a_waiting_command_gets_the_slot_its_holder_gives_up(tmp_path, monkeypatch):
    held = cpu_slot.take_slot(str(tmp_path), 1)
    said, taken = [], []
    monkeypatch.setattr(cpu_slot, "POLL_SECONDS", 0.01)

    def give_up_the_slot(message, flush):  # called once the waiter has found every slot busy
        said.append(message)
        os.close(held)

    def wait_for_the_slot():
        taken.append(cpu_slot.take_slot(str(tmp_path), 1, say=give_up_the_slot))

    waiter = threading.Thread(target=wait_for_the_slot)
    waiter.start()
    waiter.join(timeout=60)  # a hang guard only: the waiter needs one more look after the slot is freed
    assert taken and taken[0] is not None
    assert said == ["cpu_slot: numpy waits for one of 1 slots, busy with other envs' tests "
                    "(D2LRNN_CPU_SLOTS=1)"]
    assert sorted(os.listdir(tmp_path)) == ["slot-0"]  # its waiting file is gone
    os.close(taken[0])


def test_a_waiter_listed_earlier_in_the_envlist_goes_first(tmp_path, monkeypatch):
    monkeypatch.setattr(cpu_slot, "POLL_SECONDS", 0.01)
    ahead = cpu_slot.lock_file(str(tmp_path / "waiting-0-1"), cpu_slot.fcntl.LOCK_EX)  # jax, waiting, alive
    said, taken = [], []

    def let_it_go(message, flush):  # the slot is free, yet the later env waits until jax stops waiting
        said.append(message)
        free = cpu_slot.try_slot(str(tmp_path), 0)
        assert free is not None
        os.close(free)
        os.close(ahead)

    waiter = threading.Thread(target=lambda: taken.append(cpu_slot.take_slot(str(tmp_path), 1, 5, let_it_go)))
    waiter.start()
    waiter.join(timeout=60)  # a hang guard only
    assert len(said) == 1 and taken and taken[0] is not None
    # jax's file, no longer held, was taken for a waiter that died and removed; so was the waiter's own
    assert sorted(os.listdir(tmp_path)) == ["slot-0"]
    os.close(taken[0])
    # A later rank, or the same rank and a younger pid, does not go first.
    marker = cpu_slot.lock_file(str(tmp_path / "waiting-5-99"), cpu_slot.fcntl.LOCK_EX)
    assert cpu_slot.waiting_ahead(str(tmp_path), 5, 98) is False
    assert cpu_slot.waiting_ahead(str(tmp_path), 5, 100) is True
    assert cpu_slot.waiting_ahead(str(tmp_path), 6, 1) is True
    os.close(marker)


def test_the_rank_is_the_envs_place_in_tox_ini(tmp_path):
    (tmp_path / "tox.ini").write_text("[tox]\nenvlist = jax, tensorflow,\n    numpy\n")
    ranks = {name: cpu_slot.env_rank(str(tmp_path / "tox.ini"), name) for name in ("jax", "numpy", "docs")}
    assert ranks == {"jax": 0, "numpy": 2, "docs": 3}
    assert cpu_slot.env_rank(str(tmp_path / "missing.ini"), "jax") == 0  # no list: everyone equal
    ours = cpu_slot.env_rank("tox.ini", "jax"), cpu_slot.env_rank("tox.ini", "numpy")
    assert ours[0] < ours[1]  # the project's own list puts the longest env first


def test_the_slot_is_freed_when_the_command_ends_and_its_exit_code_passes_through(tmp_path, monkeypatch):
    monkeypatch.setenv("D2LRNN_CPU_SLOTS_DIR", str(tmp_path))
    monkeypatch.setenv("D2LRNN_CPU_SLOTS", "1")
    assert cpu_slot.main([sys.executable, "-c", "raise SystemExit(3)"]) == 3
    killed = "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"
    assert cpu_slot.main([sys.executable, "-c", killed]) == 143  # 128 + SIGTERM, as a shell says it
    fd = cpu_slot.try_slot(str(tmp_path), 0)  # both runs gave the one slot back
    assert fd is not None
    os.close(fd)


def test_a_sigterm_to_the_runner_stops_the_command(tmp_path):
    started = tmp_path / "started"
    command = ("import pathlib, sys, time\npathlib.Path(sys.argv[1]).write_text('up')\n"
               "time.sleep(" + str(HANG_GUARD_SECONDS) + ")")
    env = dict(os.environ, D2LRNN_CPU_SLOTS_DIR=str(tmp_path / "slots"), D2LRNN_CPU_SLOTS="1")
    runner = subprocess.Popen([sys.executable, "-m", "tests.cpu_slot", sys.executable, "-c", command,
                               str(started)], env=env, cwd=ROOT)
    while not started.exists() and runner.poll() is None:  # the command is up (not a time limit)
        threading.Event().wait(0.01)
    runner.send_signal(signal.SIGTERM)
    assert runner.wait(timeout=HANG_GUARD_SECONDS) == 128 + signal.SIGTERM  # passed on, and back


def test_the_command_holds_the_slot_while_it_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("D2LRNN_CPU_SLOTS_DIR", str(tmp_path))
    monkeypatch.setenv("D2LRNN_CPU_SLOTS", "1")
    probe = ("import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR)\n"
             "try:\n    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
             "except BlockingIOError:\n    sys.exit(7)")
    assert cpu_slot.main([sys.executable, "-c", probe, str(tmp_path / "slot-0")]) == 7  # held by our main


def test_bad_slot_counts_and_a_planted_link_are_refused(tmp_path, monkeypatch):
    for value in ("0", "two", "-1"):
        monkeypatch.setenv("D2LRNN_CPU_SLOTS", value)
        with pytest.raises(SystemExit, match="is not a positive whole number"):
            cpu_slot.slot_count()
    monkeypatch.delenv("D2LRNN_CPU_SLOTS")
    assert cpu_slot.slot_count() == len(os.sched_getaffinity(0))
    victim = tmp_path / "victim"
    victim.write_text("keep")
    folder = tmp_path / "slots"
    folder.mkdir()
    (folder / "slot-0").symlink_to(victim)
    with pytest.raises(OSError):  # O_NOFOLLOW: a link someone put there is not opened
        cpu_slot.try_slot(str(folder), 0)
    assert victim.read_text() == "keep"


def test_a_run_after_the_others_waits_behind_every_envs_main_run(tmp_path, monkeypatch):
    monkeypatch.setenv("D2LRNN_CPU_SLOTS_DIR", str(tmp_path))
    monkeypatch.setenv("D2LRNN_CPU_SLOTS", "1")
    ranks = []
    monkeypatch.setattr(cpu_slot, "take_slot", lambda folder, slots, rank: ranks.append(rank))
    assert cpu_slot.main(["--after-others", sys.executable, "-c", "raise SystemExit(0)"]) == 0
    assert cpu_slot.main([sys.executable, "-c", "raise SystemExit(0)"]) == 0
    numpy = cpu_slot.env_rank()
    assert ranks == [numpy + cpu_slot.LATER, numpy] and cpu_slot.LATER > numpy
    with pytest.raises(SystemExit, match="usage"):
        cpu_slot.main(["--after-others"])


def test_without_a_slot_folder_the_command_runs_at_once(monkeypatch):
    monkeypatch.delenv("D2LRNN_CPU_SLOTS_DIR", raising=False)
    assert cpu_slot.main([sys.executable, "-c", "raise SystemExit(0)"]) == 0
