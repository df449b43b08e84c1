"""Training, once for every task: the loop with its hooks (:mod:`.loop`), the compiled step
(:mod:`.step`), optimizers and schedules (:mod:`.optim`), the divergence guard (:mod:`.guard`), timing
and running sums (:mod:`.metrics`), progress bars and live plots (:mod:`.progress`), and what a run
writes: the checkpoint container (:mod:`.checkpoint`), run folders (:mod:`.runs`) and atomic writes
(:mod:`.atomic`)."""

from .guard import DivergenceGuard, quiet_numerics
from .loop import EarlyStopping, Task, fit, run_epoch
from .metrics import Accumulator, Timer, format_perplexity, perplexity
from .optim import SGD, Adam, Schedule, get_optimizer, sgd
from .progress import Animator, progress_bar
from .step import Updater, check_clip, clip_by_global_norm

__all__ = ["Task", "fit", "run_epoch", "EarlyStopping", "Updater", "clip_by_global_norm", "check_clip",
           "DivergenceGuard", "quiet_numerics", "Timer", "Accumulator", "perplexity", "format_perplexity",
           "SGD", "Adam", "Schedule", "get_optimizer", "sgd", "Animator", "progress_bar"]
