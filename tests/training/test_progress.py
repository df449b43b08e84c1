"""Progress in notebooks: one display line updated in place, rate-limited, and the tqdm bar in terminals."""

import IPython.display
import pytest

from d2lrnn.training import progress


class FakeHandle:
    """Stands in for IPython's DisplayHandle: records what each display and update showed."""

    def __init__(self, shown):
        self.shown = shown

    def update(self, obj, **kwargs):
        self.shown.append(("update", obj, kwargs))


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


@pytest.fixture
def shown(monkeypatch):
    """Pretend to run in a kernel; collect every display call and handle update."""
    calls = []

    def display(obj, **kwargs):
        calls.append(("display", obj, kwargs))
        return FakeHandle(calls)

    monkeypatch.setattr(progress, "in_notebook", lambda: True)
    monkeypatch.setattr(IPython.display, "display", display)
    return calls


@pytest.fixture
def clock():
    return FakeClock()


def _texts(calls):
    return [obj["text/plain"] for _, obj, _ in calls]


def _with_clock(clock, cls=progress.NotebookProgress):
    def make(**kwargs):
        return cls(clock=clock, **kwargs)

    return make


def test_notebook_bar_updates_one_display_and_ends_on_the_final_line(shown, monkeypatch):
    monkeypatch.setattr(progress, "NotebookProgress", _with_clock(FakeClock()))
    with progress.progress_bar(total=4, unit="batch", desc="train") as bar:
        for _ in range(4):
            bar.update(1)
        bar.set_postfix({"ppl": "5.21", "val_ppl": "6.05"}, refresh=False)
    kinds = [kind for kind, _, _ in shown]
    assert kinds[0] == "display" and kinds.count("display") == 1  # one output, updated in place
    assert shown[0][2] == {"raw": True, "display_id": True}
    assert _texts(shown)[0] == "train: 0/4 batches, 0.0 s"
    assert _texts(shown)[-1] == "train: 4/4 batches, 0.0 s, ppl 5.21, val_ppl 6.05"


def test_notebook_bar_redraws_at_most_every_min_interval(shown, clock):
    bar = progress.NotebookProgress(total=32, desc="train", unit="batch", clock=clock)
    for _ in range(32):  # 32 updates over 2 s, 1/16 s apart (exact in binary)
        clock.now += 0.0625
        bar.update(1)
    updates = [obj["text/plain"] for kind, obj, _ in shown if kind == "update"]
    assert len(updates) == 4  # every 0.5 s: at 0.5, 1.0, 1.5 and 2.0 s
    assert updates[0] == "train: 8/32 batches, 0.5 s"
    bar.set_postfix({"ppl": "9.87"}, refresh=False)
    assert len(shown) == 5  # no redraw for the postfix alone
    bar.close()
    assert _texts(shown)[-1] == "train: 32/32 batches, 2.0 s, ppl 9.87"


def test_notebook_bar_without_a_total_counts_up(shown, clock):
    bar = progress.NotebookProgress(desc=None, unit="batch", clock=clock)
    bar.update(1)
    clock.now += 1.5
    bar.close()
    assert _texts(shown)[-1] == "1 batch, 1.5 s"


def test_disabled_bar_shows_nothing(shown):
    with progress.progress_bar(total=3, disable=True) as bar:
        bar.update(1)
        bar.set_postfix({"ppl": "1"}, refresh=False)
    assert shown == []


def test_terminal_bar_is_tqdm_on_stderr(capsys, monkeypatch):
    monkeypatch.setattr(progress, "in_notebook", lambda: False)
    with progress.progress_bar(total=2, unit="batch", desc="train") as bar:
        bar.update(2)
        bar.set_postfix({"ppl": "3.00"}, refresh=False)
    out, err = capsys.readouterr()
    assert out == "" and "train" in err and "2/2" in err


def test_animator_draws_its_title_and_rate_limits_redraws(shown, clock):
    animator = progress.Animator(xlabel="epoch", legend=["train"], enabled=True, title="timemachine, numpy",
                                 clock=clock)
    assert animator.axes.get_title() == "timemachine, numpy"
    for epoch in range(1, 9):  # eight points 1/8 s apart: drawn at 0.5 s and 1.0 s, not each time
        clock.now += 0.125
        animator.add(epoch, [1.0 / epoch])
    redraws = [kind for kind, _, _ in shown]
    assert redraws == ["display", "update", "update"]
    clock.now += 0.125
    animator.add(9, [0.05])
    animator.close()  # the last point is drawn on close
    assert [kind for kind, _, _ in shown] == ["display", "update", "update", "update"]
    assert list(animator.axes.lines[0].get_xdata()) == list(range(1, 10))
    assert animator.axes.get_title() == "timemachine, numpy"


def test_animator_keeps_its_place_without_rendering_and_draws_empty_axes_if_no_point_comes(shown, clock):
    import matplotlib.figure

    animator = progress.Animator(xlabel="epoch", legend=["train"], enabled=True, clock=clock)
    # the plot's place in the output, taken before any text a progress bar prints: an empty output
    assert shown == [("display", {"text/plain": ""}, {"raw": True, "display_id": True})]
    animator.close()  # nothing was added: the empty axes, once
    assert [kind for kind, _, _ in shown] == ["display", "update"]
    assert isinstance(shown[1][1], matplotlib.figure.Figure)


def test_slow_frames_are_drawn_less_often_so_drawing_takes_a_tenth_of_the_time(shown, clock, monkeypatch):
    update = FakeHandle.update

    def slow_update(handle, obj, **kwargs):  # rendering a frame takes 0.3 s of the clock
        clock.now += 0.3
        update(handle, obj, **kwargs)

    monkeypatch.setattr(FakeHandle, "update", slow_update)
    animator = progress.Animator(legend=["train"], enabled=True, clock=clock)
    drawn_at = []
    for epoch in range(1, 41):  # a point every 0.25 s: 10 s of training
        clock.now += 0.25
        frames = len(shown)
        animator.add(epoch, [1.0 / epoch])
        if len(shown) > frames:
            drawn_at.append(epoch)
    # a 0.3 s frame is followed by at least 2.7 s without one (the 11th point of 0.25 s), not by 0.5 s
    assert drawn_at == [2, 13, 24, 35], drawn_at
    assert progress.PLOT_TIME_SHARE == 0.1
    animator.close()
    assert list(animator.axes.lines[0].get_xdata()) == list(range(1, 41))  # every point in the last frame


def test_animator_takes_the_books_arguments_in_the_books_order(shown, clock, monkeypatch):
    """The book's cells: ``d2l.Animator(xlabel=..., ylabel=..., legend=[...], xlim=[10, num_epochs])``,
    positional up to ``figsize`` as the book's signature orders them, and ``add(x, (y,))``; drawn in a
    notebook without asking."""
    monkeypatch.setattr(progress, "in_notebook", lambda: True)
    animator = progress.Animator("epoch", "perplexity", ["train"], [10, 500], None, "linear", "log",
                                 ("-", "m--"), 2, 1, (3.5, 2.5), clock=clock)
    assert animator.enabled and animator.fig.get_size_inches().tolist() == [3.5, 2.5]
    assert len(animator.fig.axes) == 2 and animator.axes is animator.fig.axes[0]  # 2 rows: draws on the 1st
    for epoch in (10, 20):
        clock.now += 1.0
        animator.add(epoch, (30.0 / epoch,))
    animator.close()
    assert list(animator.axes.lines[0].get_ydata()) == [3.0, 1.5]
    assert animator.axes.get_xlim() == (10, 500) and animator.axes.get_yscale() == "log"
    assert animator.axes.get_ylabel() == "perplexity"
