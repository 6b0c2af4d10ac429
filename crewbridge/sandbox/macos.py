"""macOS: `sandbox-exec -p PROFILE`, with a profile generated per process. Untested: crew's tests run
on Linux, where only the profile's text is checked.

The profile allows everything, then denies writing outside the writable folders (and the process's
own temp folder and the common devices), denies writing the protected files in them (a later rule
wins), denies reading and writing the hidden places (crewbridge.sandbox.hidden) but what beneath
them it works in or is shown, and with the network off denies network use (Unix sockets included);
through crew's proxy, it denies all of it but TCP to the proxy's port (and the carried ones) on
localhost. It gives no private /tmp and no PID namespace; sandbox-exec execs the program, so crew's
stop reaches it directly.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from crewbridge.sandbox.base import Confinement, Launch, private_temp, program

SANDBOX_EXEC = "/usr/bin/sandbox-exec"
DEVICES = ("/dev/null", "/dev/zero", "/dev/tty", "/dev/dtracehelper", "/dev/random", "/dev/urandom")


def profile(confinement: Confinement, temp: Path, ports: Sequence[int] = ()) -> str:
    """The sandbox profile (SBPL) for `confinement`, the process's temp folder being `temp`;
    `ports`: where crew's proxy (and the carried destinations) are, for a process that goes
    through it."""
    writable = [*confinement.writable, temp]
    lines = ["(version 1)", "(allow default)", "(deny file-write*)"]
    allowed = [f"(subpath {_quote(_real(p))})" for p in writable] + [f"(literal {_quote(d)})" for d in DEVICES]
    lines.append(f"(allow file-write* {' '.join(allowed)})")
    if confinement.hidden.places:  # then what beneath them it reads, and may write (a later rule wins)
        lines.append(f"(deny file-read* file-write* {' '.join(_place(p) for p in confinement.hidden.places)})")
        lines.append(f"(allow file-read* {' '.join(_place(p) for p in (*confinement.hidden.shown, *writable))})")
        lines.append(f"(allow file-write* {' '.join(allowed[: len(writable)])})")
    if confinement.read_only:
        kept = " ".join(f"(literal {_quote(_real(p))})" for p in confinement.read_only)
        lines.append(f"(deny file-write* {kept})")
    if not confinement.network or ports:
        lines.append("(deny network*)")
    for port in ports:
        lines.append(f'(allow network-outbound (remote tcp "localhost:{port}"))')
    return "\n".join(lines) + "\n"


def _place(path: Path) -> str:
    """A folder and all beneath it, or a file."""
    return f"({'subpath' if path.is_dir() else 'literal'} {_quote(_real(path))})"


def _real(path: Path) -> Path:
    """macOS profiles match resolved paths (/tmp is /private/tmp)."""
    return path.resolve()


def _quote(path: Path | str) -> str:
    return json.dumps(str(path))  # SBPL strings take the same escapes as JSON's for these


class SandboxExec:
    name = "sandbox-exec"
    unproven = False
    detail = SANDBOX_EXEC

    def holds_network(self) -> str | None:
        return None

    def launch(self, argv: list[str], env: dict[str, str], cwd: Path, confinement: Confinement) -> Launch:
        path = program(argv, env, cwd)
        temp = private_temp()
        gate = confinement.egress.gate(env) if confinement.network and confinement.egress is not None else None
        ports: list[int] = []
        if gate is not None:
            gate.open_here()
            env = gate.env(env)
            ports = [gate.port, *(port for _, port in gate.carried())]
        rules = profile(confinement, temp, ports)
        return Launch(
            [SANDBOX_EXEC, "-p", rules, path, *argv[1:]], {**env, "TMPDIR": str(temp)}, removed=[temp], gate=gate
        )
