"""How much memory there is, and how much a model takes: checked before anything is allocated, so that a
setting or a checkpoint too large for the machine is one line, not an out-of-memory kill."""

import os

GB = 2**30

# What training takes, in float32 numbers, fitted by least squares to the peak memory of the first steps
# (tracemalloc, numpy backend) of 54 language models (every cell, 1-3 layers, 64-1,536 units, batches of
# 8-128 x 10-100 steps, SGD and Adam, vocabularies of 28 and 2,720 characters): the estimate is within
# 0.75-1.3 of each measurement, and of five encoder-decoders' within 0.93-1.36 (issue 32). The old
# estimate, 4 numbers per parameter, was 4 to 60 times too low.
#: Numbers per parameter: the parameters, their gradients, the update's temporaries (Adam: its two
#: running averages and theirs).
PARAM_COPIES = {"sgd": 4.5, "adam": 7.4}
#: Numbers kept per hidden unit, time step and sequence for the backward pass, by cell.
STATE_NUMBERS = {"rnn": 4.2, "gru": 12.4, "lstm": 17.6}
#: Numbers per output logit (one per vocabulary entry, time step and sequence).
LOGIT_NUMBERS = 3.9


def physical_memory():
    """The machine's physical memory in bytes, or None where the system does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def training_bytes(num_params, optimizer, cell, unit_steps, logits):
    """Bytes a training step takes: ``num_params`` parameters under ``optimizer`` ('sgd', 'adam'),
    ``unit_steps`` hidden units times time steps times sequences of a batch (summed over layers, and over
    encoder and decoder) of ``cell``, and ``logits`` output numbers per batch (steps x sequences x
    vocabulary)."""
    numbers = PARAM_COPIES.get(optimizer, PARAM_COPIES["adam"]) * num_params + \
        STATE_NUMBERS.get(cell, STATE_NUMBERS["lstm"]) * unit_steps + LOGIT_NUMBERS * logits
    return int(4 * numbers)


def size_text(nbytes):
    """``nbytes`` for a message: ``1.5 GB``, ``35 MB``, ``1,088 bytes``."""
    if nbytes >= 0.1 * GB:
        return f"{nbytes / GB:.1f} GB"
    if nbytes >= 2**20:
        return f"{nbytes / 2**20:.0f} MB"
    return f"{nbytes:,} bytes"
