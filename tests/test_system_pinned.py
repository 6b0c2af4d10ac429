"""crewbridge.system.pinned: the scripts a crew.yaml names run as they were when it was loaded, from crew's
private copy; one changed since is refused; a swap while crew copies it is caught."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from crewbridge.system import pinned
from crewbridge.system.pinned import Pins, ScriptChanged


def script(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def test_only_relative_words_naming_files_are_pinned(tmp_path):
    script(tmp_path / "hook.sh", "#!/bin/sh\necho trusted\n")
    (tmp_path / "folder").mkdir()
    pins = Pins.read(["python3", "./hook.sh", "{path}", "/bin/sh", "folder", "missing.py"], tmp_path)
    assert list(pins.pins) == ["./hook.sh"]
    assert pins.path("python3") == "python3" and pins.path("{path}") == "{path}"


def test_an_unchanged_script_runs_from_a_private_copy_of_what_was_loaded(tmp_path):
    hook = script(tmp_path / "hook.sh", "#!/bin/sh\necho trusted\n")
    pins = Pins.read(["./hook.sh"], tmp_path)
    copy = Path(pins.path("./hook.sh"))
    assert copy.name == "hook.sh" and copy.parent.parent.name.startswith("crew-scripts-")
    assert copy.read_bytes() == hook.read_bytes() and os.access(copy, os.X_OK)
    assert oct(copy.parent.parent.stat().st_mode & 0o777) == "0o700"
    assert subprocess.run([str(copy)], capture_output=True, text=True).stdout == "trusted\n"
    assert pins.path("./hook.sh") == str(copy)  # made once


def test_a_script_changed_since_it_was_loaded_is_refused(tmp_path):
    hook = script(tmp_path / "hook.sh", "#!/bin/sh\necho trusted\n")
    pins = Pins.read(["./hook.sh"], tmp_path)
    copy = pins.path("./hook.sh")
    hook.write_text("#!/bin/sh\necho planted\n")
    with pytest.raises(ScriptChanged, match=r"^\./hook\.sh changed since crew.yaml was loaded"):
        pins.path("./hook.sh")
    with pytest.raises(ScriptChanged):
        pins.check()
    assert Path(copy).read_text() == "#!/bin/sh\necho trusted\n"  # the copy never takes the change


def test_a_script_written_back_as_it_was_runs(tmp_path):
    hook = script(tmp_path / "hook.sh", "#!/bin/sh\necho trusted\n")
    pins = Pins.read(["./hook.sh"], tmp_path)
    hook.write_text("#!/bin/sh\necho trusted\n")  # its change time moved: read again, same bytes
    assert Path(pins.path("./hook.sh")).read_text() == "#!/bin/sh\necho trusted\n"


def test_a_script_swapped_while_crew_copies_it_is_refused(tmp_path, monkeypatch):
    hook = script(tmp_path / "hook.sh", "#!/bin/sh\necho trusted\n")
    pins = Pins.read(["./hook.sh"], tmp_path)
    copyfile = pinned.shutil.copyfile

    def swapped(source, target):  # the check passed; a process swaps the file before the copy
        hook.write_text("#!/bin/sh\necho planted\n")
        return copyfile(source, target)

    monkeypatch.setattr(pinned.shutil, "copyfile", swapped)
    with pytest.raises(ScriptChanged, match="changed while crew copied it"):
        pins.path("./hook.sh")


def test_the_copy_finds_its_neighbours_as_the_script_did(tmp_path):
    script(tmp_path / "hooks" / "lib.sh", "greeting=hello\n")
    script(tmp_path / "hooks" / "check.sh", '#!/bin/sh\n. "$(dirname "$0")/lib.sh"\necho $greeting\n')
    pins = Pins.read(["hooks/check.sh"], tmp_path)
    done = subprocess.run([pins.path("hooks/check.sh")], capture_output=True, text=True)
    assert done.stdout == "hello\n", done.stderr


def test_a_linked_script_finds_what_lies_around_it_as_it_did(tmp_path):
    """A `node_modules/.bin`-style link: the copy lies where its target does, with `..` and the
    folders beside it reachable (they stay links to the originals)."""
    script(tmp_path / "pkg" / "lib" / "common.sh", "greeting=hello\n")
    script(tmp_path / "pkg" / "bin" / "run.sh", '#!/bin/sh\n. "$(dirname "$0")/../lib/common.sh"\necho $greeting\n')
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "run").symlink_to("../pkg/bin/run.sh")
    pins = Pins.read(["bin/run"], tmp_path)
    copy = Path(pins.path("bin/run"))
    assert copy.parts[-3:] == ("pkg", "bin", "run.sh") and not copy.is_symlink()
    done = subprocess.run([str(copy)], capture_output=True, text=True)
    assert done.stdout == "hello\n", done.stderr
    assert (copy.parent.parent / "lib").is_symlink()
