"""Language models: the models, their training and evaluation, generation, truncated backpropagation
through time, and checkpoints."""

from .checkpoint import checkpoint_info, checkpoint_writer, load_checkpoint, save_checkpoint
from .generate import next_token, predict
from .loss import lm_loss
from .model import RNNModel, RNNModelScratch, StackedRNNModelScratch, make_model
from .train import (
    LanguageModelTask,
    Updater,
    check_causal,
    evaluate_perplexity,
    make_eval_step,
    make_train_step,
    train_epoch_lm,
    train_lm,
)
from .truncation import FullBPTT, RandomizedTruncation, RegularTruncation, state_gradient_norms

__all__ = ["RNNModel", "RNNModelScratch", "StackedRNNModelScratch", "make_model", "lm_loss", "Updater",
           "LanguageModelTask", "check_causal", "make_train_step", "make_eval_step", "train_epoch_lm",
           "train_lm", "evaluate_perplexity", "predict", "next_token", "FullBPTT", "RegularTruncation",
           "RandomizedTruncation", "state_gradient_norms", "save_checkpoint", "load_checkpoint",
           "checkpoint_info", "checkpoint_writer"]
