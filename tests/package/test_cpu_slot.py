"""tests/cpu_slot.py, which makes the envs of ``tox -p`` take turns for the cores: at most as many test
commands at a time as there are slots, a slot freed however its holder ends, the command's exit code
passed through."""

import os
import sys
import threading

import pytest

from tests import cpu_slot

pytestmark = pytest.mark.once  # no backend involved


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
        taken.append(cpu_slot.take_slot(str(tmp_path), 1, give_up_the_slot))

    waiter = threading.Thread(target=wait_for_the_slot)
    waiter.start()
    waiter.join(timeout=60)  # a hang guard only: the waiter needs one more look after the slot is freed
    assert taken and taken[0] is not None
    assert said == ["cpu_slot: all 1 slots busy with other envs' tests; waiting for one (D2LRNN_CPU_SLOTS=1)"]
    os.close(taken[0])


def test_the_slot_is_freed_when_the_command_ends_and_its_exit_code_passes_through(tmp_path, monkeypatch):
    monkeypatch.setenv("D2LRNN_CPU_SLOTS_DIR", str(tmp_path))
    monkeypatch.setenv("D2LRNN_CPU_SLOTS", "1")
    assert cpu_slot.main([sys.executable, "-c", "raise SystemExit(3)"]) == 3
    killed = "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"
    assert cpu_slot.main([sys.executable, "-c", killed]) == 143  # 128 + SIGTERM, as a shell says it
    fd = cpu_slot.try_slot(str(tmp_path), 0)  # both runs gave the one slot back
    assert fd is not None
    os.close(fd)


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


def test_without_a_slot_folder_the_command_runs_at_once(monkeypatch):
    monkeypatch.delenv("D2LRNN_CPU_SLOTS_DIR", raising=False)
    assert cpu_slot.main([sys.executable, "-c", "raise SystemExit(0)"]) == 0
