"""bench/run.py's report: each row's share of its own process's product and of the machine's best one,
and the targets drawn from them (hand-made rows)."""

import pytest

from bench import run

pytestmark = pytest.mark.once  # the report's arithmetic, the same on every backend


def row(backend, model, gflops_model, matmul_gflops, cell="lstm", tokens_per_sec=1000.0):
    return {"backend": backend, "model": model, "cell": cell, "gflops_model": gflops_model,
            "matmul_gflops": matmul_gflops, "tokens_per_sec": tokens_per_sec, "slowest_round": tokens_per_sec,
            "peak_rss_mb": 300.0, "train_epoch_seconds": 5.0, "first_step_seconds": 0.1,
            "data_epoch_seconds": None}


ROWS = [row("torch", "scratch", 200.0, 350.0), row("torch", "reference", 240.0, None),
        row("jax", "scratch", 150.0, 220.0), row("jax", "reference", 180.0, None)]


def test_the_machine_ceiling_is_the_best_product_of_any_framework_in_the_run():
    assert run.machine_ceiling(ROWS) == (350.0, "torch")
    assert run.machine_ceiling([row("torch", "reference", 1.0, None)]) is None


def test_each_row_shows_its_share_of_its_own_ceiling_and_of_the_machine():
    lines = run.table(ROWS).splitlines()
    assert "| % of ceiling | % of machine |" in lines[0]
    jax_scratch = next(line for line in lines if "| jax | scratch |" in line)
    assert "| 220 | 68% | 43% |" in jax_scratch  # 150 / 220 and 150 / 350
    reference = next(line for line in lines if "| torch | reference |" in line)
    assert "| - | - | 69% |" in reference  # 240 / 350: a plain loop's share of the machine too


def test_the_seventy_percent_target_reads_the_fastest_d2lrnn_row():
    (description, measured, met), = [t for t in run.targets(ROWS) if "machine's best" in t[0]]
    assert "torch LSTM scratch" in description and "350 GFLOP/s, torch" in description
    assert (measured, met) == ("57%", False)  # 200 / 350
    faster = ROWS + [row("torch", "concise", 250.0, 340.0)]
    (_, measured, met), = [t for t in run.targets(faster) if "machine's best" in t[0]]
    assert (measured, met) == ("71%", True)


def test_the_memory_target_reads_each_backends_worst_row_over_its_own_cells_plain_loop():
    rows = [dict(row("torch", "reference", 1.0, None), peak_rss_mb=400.0),
            dict(row("torch", "scratch", 1.0, 300.0), peak_rss_mb=470.0),
            dict(row("torch", "concise", 1.0, 300.0), peak_rss_mb=490.0),
            dict(row("torch", "reference", 1.0, None, cell="gru"), peak_rss_mb=300.0),
            dict(row("torch", "concise", 1.0, 300.0, cell="gru"), peak_rss_mb=390.0),  # 1.30x: the worst
            dict(row("jax", "reference", 1.0, None), peak_rss_mb=500.0),
            dict(row("jax", "scratch", 1.0, 300.0), peak_rss_mb=600.0)]  # exactly 1.2x: met
    memory = {t[0].split(":")[0]: t[1:] for t in run.targets(rows) if "peak RSS <= 1.2x" in t[0]}
    assert memory == {"torch": ("max 1.30x (GRU concise, 390 MB)", False),
                      "jax": ("max 1.20x (LSTM scratch, 600 MB)", True)}


def test_a_ratio_is_the_median_of_the_blocks_ratios_to_the_reference_beside_them():
    # The machine slows down in the middle turns: best against best (130 / 100) would compare the
    # reference's fast minute with the row's; turn by turn the row is 0.8x, 0.9x, 0.8x, 1.2x, 0.8x.
    reference = dict(row("torch", "reference", 1.0, None), block_tokens_per_sec=[100, 50, 50, 50, 125])
    scratch = dict(row("torch", "scratch", 1.0, 300.0), block_tokens_per_sec=[80, 45, 40, 60, 100])
    assert run.vs_reference([scratch, reference]) == {("torch", "lstm", "scratch"): pytest.approx(0.8)}
    even = dict(scratch, block_tokens_per_sec=[80, 45, 40, 60])
    assert run.paired_ratio(even, reference) == pytest.approx((0.8 + 0.9) / 2)


def test_rows_without_blocks_compare_their_best_tokens_per_second():
    rows = [row("torch", "scratch", 1.0, 300.0, tokens_per_sec=900.0), row("torch", "reference", 1.0, None)]
    assert run.vs_reference(rows) == {("torch", "lstm", "scratch"): pytest.approx(0.9)}


class FakeRow:
    """A stand-in for a row's process: records the turns it is given."""

    turns = []

    def __init__(self, backend, model, cell):
        self.model, self.blocks = model, []

    def block(self, seconds):
        FakeRow.turns.append(self.model)
        self.blocks.append(100.0 + len(FakeRow.turns))
        return self.blocks[-1]

    def stop(self):
        return {"model": self.model, "block_tokens_per_sec": self.blocks}

    def kill(self):
        pass


def test_the_rows_of_a_backend_and_cell_take_turns_block_by_block_and_who_goes_first_rotates(monkeypatch):
    monkeypatch.setattr(run, "_Row", FakeRow)
    monkeypatch.setattr(run, "HANDOFF_SECONDS", 0.0)
    FakeRow.turns = []
    models = ("scratch", "concise", "reference")
    rows = run.measure_paired("torch", "lstm", models, blocks=4, block_seconds=1.0)
    assert FakeRow.turns == ["scratch", "concise", "reference", "concise", "reference", "scratch",
                             "reference", "scratch", "concise", "scratch", "concise", "reference"]
    assert [r["model"] for r in rows] == ["scratch", "concise", "reference"]
    assert rows[0]["block_tokens_per_sec"] == [101.0, 106.0, 108.0, 110.0]
    assert rows[0]["slowest_round"] == 101.0
