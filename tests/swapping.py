"""A process that swaps two names by renameat2(RENAME_EXCHANGE) in a loop, as an agent's shell can
(a folder and a symlink to outside, exchanged while crew resolves a path beneath the folder)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SWAPPER = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
first, second = map(os.fsencode, sys.argv[1:3])
def swap():
    if libc.renameat2(-100, first, -100, second, 2) != 0:  # AT_FDCWD, RENAME_EXCHANGE
        raise OSError(ctypes.get_errno(), "renameat2")
swap()
print("swapping", flush=True)
while True:
    swap()
"""


@contextmanager
def swapped(first: Path, second: Path) -> Iterator[None]:
    """`first` and `second` exchanged in a loop by another process while the block runs; once it
    ends, the two put back as they were."""
    swapper = subprocess.Popen(
        [sys.executable, "-c", SWAPPER, str(first), str(second)],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert swapper.stdout is not None and swapper.stdout.readline() == "swapping\n"
        yield
    finally:
        os.killpg(swapper.pid, signal.SIGKILL)
        swapper.wait()
    if first.is_symlink():  # stopped between two swaps: put them back
        os.rename(first, Path(f"{first}.tmp"))
        os.rename(second, first)
        os.rename(Path(f"{first}.tmp"), second)
