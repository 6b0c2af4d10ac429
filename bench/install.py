"""README step 1's cost: `pip install .` against `pip install '.[acp,batch]'` (the extras `crew acp`,
`crew acp check` and `crew batch` need), each into a fresh venv with an empty pip cache, as a first
install is; runs alternate, medians are printed, with each venv's size on disk. The packages come
from wherever this machine's pip is configured to take them (its index, find-links).

    .venv/bin/python -m bench.install [--runs N]"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import REPO, median, spread

KINDS = {"plain: pip install .": ".", "with the extras: pip install '.[acp,batch]'": ".[acp,batch]"}


def install(target: str) -> tuple[float, int]:
    """Seconds to make a venv and install `target` from this checkout into it (as step 1 does), with an
    empty pip cache; and the venv's size in bytes."""
    with tempfile.TemporaryDirectory(prefix="crew-install-") as scratch:
        venv, cache = Path(scratch) / "venv", Path(scratch) / "cache"
        env = {**os.environ, "PIP_CACHE_DIR": str(cache), "PIP_NO_INPUT": "1"}
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        done = subprocess.run(
            [str(venv / "bin/pip"), "install", "-q", target], cwd=REPO, env=env, capture_output=True, text=True
        )
        if done.returncode != 0:
            raise SystemExit(f"bench install: pip install {target} failed:\n{done.stderr}")
        took = time.perf_counter() - start
        size = sum(path.stat().st_size for path in venv.rglob("*") if path.is_file() and not path.is_symlink())
        return took, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    runs = parser.parse_args().runs
    taken: dict[str, list[tuple[float, int]]] = {name: [] for name in KINDS}
    for _ in range(runs):
        for name, target in KINDS.items():
            taken[name].append(install(target))
    plain, extras = (median([t for t, _ in taken[name]]) for name in KINDS)
    for name, values in taken.items():
        times = [t for t, _ in values]
        size = median([s for _, s in values]) / 1e6
        print(f"{name:46} {median(times):6.1f} s  ({spread(times, ' s')})  {size:5.0f} MB")
    print(f"{'ratio':46} {extras / plain:6.2f}x    (n={runs}, load {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
