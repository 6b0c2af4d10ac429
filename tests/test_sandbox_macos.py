"""macOS's sandbox-exec profile, as text (it cannot run here: docs/sandbox.md says it is untested)."""

from __future__ import annotations

from pathlib import Path

from crewbridge.sandbox import Confinement
from crewbridge.sandbox.hidden import Hidden
from crewbridge.sandbox.macos import profile


def test_the_profile_denies_writing_but_where_allowed_then_the_protected_files():
    rules = profile(
        Confinement(writable=(Path("/work/p"),), read_only=(Path("/work/p/settings.json"),)), Path("/var/t")
    )
    lines = rules.splitlines()
    assert lines[:3] == ["(version 1)", "(allow default)", "(deny file-write*)"]
    assert lines[3].startswith('(allow file-write* (subpath "/work/p") (subpath "/var/t") (literal "/dev/null")')
    assert lines[4] == '(deny file-write* (literal "/work/p/settings.json"))'  # a later rule wins
    assert lines[5] == "(deny network*)"


def test_network_on_leaves_it_alone_and_odd_paths_are_quoted():
    rules = profile(Confinement(writable=(Path('/w/a "b"\\c'),), network=True), Path("/t"))
    assert '(subpath "/w/a \\"b\\"\\\\c")' in rules
    assert "network" not in rules


def test_hidden_places_are_denied_then_what_it_works_in_beneath_them_allowed_again(tmp_path):
    ssh, state = tmp_path / ".ssh", tmp_path / "state"
    (state / "work").mkdir(parents=True)
    ssh.mkdir()
    netrc = tmp_path / ".netrc"
    netrc.write_text("")
    hidden = Hidden(places=(ssh, netrc, state), shown=(state / "work" / "a.json",))
    confinement = Confinement(writable=(state / "work",), read_only=(state / "work" / "kept",), hidden=hidden)
    (tmp_path / "t").mkdir()
    lines = profile(confinement, tmp_path / "t").splitlines()
    real = tmp_path.resolve()
    assert (
        lines[4]
        == f'(deny file-read* file-write* (subpath "{real}/.ssh") (literal "{real}/.netrc") (subpath "{real}/state"))'
    )
    assert (
        lines[5]
        == f'(allow file-read* (literal "{real}/state/work/a.json") (subpath "{real}/state/work") (subpath "{real}/t"))'
    )
    assert lines[6] == f'(allow file-write* (subpath "{real}/state/work") (subpath "{real}/t"))'
    assert lines[7] == f'(deny file-write* (literal "{real}/state/work/kept"))'  # still last but the network


def test_through_crews_proxy_only_tcp_to_its_port_and_the_carried_ones_on_localhost_is_left():
    rules = profile(Confinement(network=True), Path("/t"), ports=[41234, 8080]).splitlines()
    assert rules[-3:] == [
        "(deny network*)",
        '(allow network-outbound (remote tcp "localhost:41234"))',
        '(allow network-outbound (remote tcp "localhost:8080"))',
    ]
