"""The environment of everything crew starts (the CLIs, run_command and command tools, hooks, the CLIs
an MCP ask starts, git): crew's own secrets are left out of it.

A secret crew reads for itself (the bearer token of `crew mcp --http`, of `crew ui`) is no business
of the programs it runs: a model could read it from its CLI's environment, or from a command's, and
reach the server that token guards. The one list is here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

MCP_TOKEN = "CREW_MCP_TOKEN"  # the bearer token of `crew mcp --http`
UI_TOKEN = "CREW_UI_TOKEN"  # the bearer token of `crew ui`
SECRETS = (MCP_TOKEN, UI_TOKEN)
# And any later one of crew's own that says what it is by its name.
_SECRET_NAME = re.compile(r"CREW_\w*_(TOKEN|SECRET|PASSWORD|KEY)")


def without_secrets(env: Mapping[str, str]) -> dict[str, str]:
    """`env` without crew's own secrets."""
    return {name: value for name, value in env.items() if name not in SECRETS and not _SECRET_NAME.fullmatch(name)}
