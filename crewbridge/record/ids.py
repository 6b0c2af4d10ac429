"""A run's id, made without loading the record's types (a worktree's branch names it before the
run's CLIs start)."""

from __future__ import annotations

import itertools
import os
import time

# The last 3 hex digits: a random start (os.urandom rather than secrets, which takes 7 ms to import
# at every crew start), counted up for each id this process makes, so that runs a process starts in
# one millisecond (a batch's, an MCP server's asks) never share an id, as random digits alone would
# (400 ids in one millisecond share about 20).
_SUFFIX = itertools.count(int.from_bytes(os.urandom(2), "big"))


def new_run_id() -> str:
    """The start time to the second, then its milliseconds in 3 hex digits (so runs of one second
    sort too: `last` and --continue take the newest) and 3 digits unique in this process."""
    moment = time.time()
    return (
        time.strftime("%Y%m%d-%H%M%S-", time.gmtime(moment))
        + f"{int(moment % 1 * 1000):03x}"
        + f"{next(_SUFFIX) % 4096:03x}"
    )
