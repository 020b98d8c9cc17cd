"""Per-block random streams: one seed per fit, one generator per (purpose, epoch, block, ...).

A fit turns its ``random_state`` into one integer with :func:`seed_from`, once, on the client;
every block task then derives its own generator with :func:`block_rng` from that seed and the
indices that identify its work. A generator therefore depends on what it is used for, never on
which worker runs the task or in which order, which keeps fits reproducible.
"""
from __future__ import annotations

import hashlib
import numbers

import numpy as np

__all__ = ["seed_from", "block_rng"]


def seed_from(random_state) -> int:
    """Turn a ``random_state`` (None, int, RandomState, Generator) into one integer seed.

    Call it once at the start of a fit and derive everything from the result, so that all blocks
    of that fit agree. ``None`` draws fresh entropy (the fit is then not reproducible, as in
    scikit-learn).
    """
    if random_state is None:
        return int(np.random.SeedSequence().entropy % (2**63))
    if isinstance(random_state, (numbers.Integral, np.integer)):
        if random_state < 0:
            raise ValueError(f"random_state must be a non-negative integer, got {random_state}")
        return int(random_state)
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(0, 2**31 - 1))
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(0, 2**63 - 1))
    raise TypeError(
        f"random_state must be None, an int, a numpy RandomState or Generator; got "
        f"{type(random_state).__name__}")


def _purpose_id(purpose: str) -> int:
    # A stable hash: Python's hash() of a str changes between processes.
    return int.from_bytes(hashlib.sha256(purpose.encode()).digest()[:4], "little")


def block_rng(seed: int, purpose: str, *indices: int) -> np.random.Generator:
    """The generator of one (purpose, epoch, block, ...) derived from ``seed``.

    Examples
    --------
    >>> a = block_rng(0, "shuffle", 3, 1).random()
    >>> b = block_rng(0, "shuffle", 3, 1).random()
    >>> a == b, a == block_rng(0, "shuffle", 3, 2).random()
    (True, False)
    """
    entropy = [int(seed), _purpose_id(purpose), *(int(i) for i in indices)]
    return np.random.default_rng(np.random.SeedSequence(entropy))
