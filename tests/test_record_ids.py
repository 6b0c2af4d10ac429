"""A run's id (crewbridge.record.ids): its start time, so ids sort by it, and unique."""

import subprocess
import sys
import threading

import pytest

from crewbridge.record import ids as module
from crewbridge.record.transcript import RUN_ID


def test_runs_started_in_one_second_sort_by_their_start(monkeypatch):
    moments = iter([1_700_000_000.999, 1_700_000_000.5, 1_700_000_000.001])
    monkeypatch.setattr(module.time, "time", lambda: next(moments))
    ids = [module.new_run_id() for _ in range(3)]
    assert [i[:16] for i in ids] == ["20231114-221320-"] * 3
    assert sorted(ids) == ids[::-1]  # .001 < .5 < .999
    assert all(RUN_ID.match(i) for i in ids)  # what find_run and the index take for a run


def test_run_ids_made_at_once_on_many_threads_are_unique():
    made: list[str] = []

    def make() -> None:
        made.extend(module.new_run_id() for _ in range(50))

    threads = [threading.Thread(target=make) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(made) == len(set(made)) == 400


def test_ids_of_one_millisecond_are_unique(monkeypatch):
    monkeypatch.setattr(module.time, "time", lambda: 1_700_000_000.25)
    assert len({module.new_run_id() for _ in range(4096)}) == 4096


@pytest.mark.slow
def test_the_ids_of_several_processes_start_apart():
    other = subprocess.run(
        [sys.executable, "-c", "from crewbridge.record.ids import new_run_id; print(new_run_id()[-3:])"],
        capture_output=True,
        text=True,
        check=True,
    )
    firsts = {other.stdout.strip()}
    for _ in range(3):  # a process's digits start at random: four processes hardly start alike
        firsts.add(subprocess.run(other.args, capture_output=True, text=True, check=True).stdout.strip())
    assert len(firsts) > 1
