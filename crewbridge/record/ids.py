"""A run's id, made without loading the record's types (a worktree's branch names it before the
run's CLIs start)."""

from __future__ import annotations

import os
import time


def new_run_id() -> str:
    """The start time to the second, then its milliseconds in 3 hex digits (so runs of one second
    sort too: `last` and --continue take the newest) and 3 random ones."""
    moment = time.time()
    # os.urandom rather than secrets, which takes 7 ms to import (at every crew start)
    return (
        time.strftime("%Y%m%d-%H%M%S-", time.gmtime(moment)) + f"{int(moment % 1 * 1000):03x}" + os.urandom(2).hex()[:3]
    )
