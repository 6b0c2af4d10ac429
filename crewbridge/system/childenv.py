"""The environment of everything crew starts (the CLIs, run_command and command tools, hooks, the CLIs
an MCP ask starts, git): no secret of the user's or of crew's reaches it unless named. The one rule
is here.

A process crew starts inherits crew's environment without

- every `CREW_*` setting: crew's own tokens (`crew mcp --http`'s, `crew ui`'s), its batch
  database's URL, the switches of its own tests. What crew means a child to have it sets for that
  child by name (a hook's CREW_HOOK_EVENT, the ask depth of an asked CLI, the values of an editor's
  MCP servers), and those pass (`passed`);
- every variable whose name says it holds a secret (`*TOKEN*`, `*SECRET*`, `*PASSWORD*`,
  `*PASSWD*`, `*PASSPHRASE*`, `*CREDENTIAL*`, `*PRIVATE_KEY*`, `*API_KEY*`, `*APIKEY*`, names ending
  `_KEY` or `_PWD`, case aside) or is a vendor's well-known key that does not (VENDOR);
- the way to the user's keys: SSH_AUTH_SOCK (the ssh agent signs as the user), GPG_AGENT_INFO,
  KRB5CCNAME (a Kerberos ticket);
- every variable whose value is a URL with a password in it (`postgresql://user:PASSWORD@host/db`),
  whatever its name, but the proxies (PROXIES), which a CLI needs to reach its model.

The names a process needs pass all the same: a CLI's own documented credentials (its provider
declares them: claude gets ANTHROPIC_API_KEY, not OPENAI_API_KEY), the variables crew sets for it,
and those crew.yaml's `env: pass:` names. `crew doctor` lists what is withheld, by name.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping

MCP_TOKEN = "CREW_MCP_TOKEN"  # the bearer token of `crew mcp --http`
UI_TOKEN = "CREW_UI_TOKEN"  # the bearer token of `crew ui`
SECRETS = (MCP_TOKEN, UI_TOKEN)  # crew's own, read by crew itself: never passed, whatever is named

CREW = "CREW_"
_SECRET_NAME = re.compile(
    r".*(TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIAL|PRIVATE_KEY|API_KEY|APIKEY).*|.*(_KEY|_PWD)", re.IGNORECASE
)
# Keys and ways to keys whose names do not say so.
VENDOR = frozenset({"AWS_ACCESS_KEY_ID", "SSH_AUTH_SOCK", "GPG_AGENT_INFO", "KRB5CCNAME"})
PROXIES = frozenset(
    name for kind in ("http", "https", "all", "ftp") for name in (f"{kind}_proxy", f"{kind.upper()}_PROXY")
)
# What crew's own git needs to reach a forge for the user (crew batch's clone, fetch and push): the
# ssh agent, and the tokens gh's credential helper reads. No other git crew runs gets them.
FORGE = ("SSH_AUTH_SOCK", "GH_TOKEN", "GITHUB_TOKEN", "GH_ENTERPRISE_TOKEN", "GITHUB_ENTERPRISE_TOKEN")
# A URL with a password: scheme://user:password@ (an empty user too: redis://:password@host).
_URL_PASSWORD = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/@:\s]*:[^/@\s]+@")


def withheld(name: str, value: str) -> bool:
    """Whether the rule keeps variable `name` (set to `value`) from what crew starts, unless named."""
    if name.startswith(CREW) or name in VENDOR or _SECRET_NAME.fullmatch(name):
        return True
    return name not in PROXIES and _URL_PASSWORD.search(value) is not None


def without_secrets(env: Mapping[str, str], passed: Collection[str] = ()) -> dict[str, str]:
    """`env` as a process crew starts gets it: without what the rule withholds, but the names in
    `passed` (never crew's own SECRETS)."""
    return {
        name: value
        for name, value in env.items()
        if name not in SECRETS and (name in passed or not withheld(name, value))
    }


def withheld_names(env: Mapping[str, str], passed: Collection[str] = ()) -> list[str]:
    """The names of `env` a process crew starts does not get (crew doctor), sorted."""
    kept = without_secrets(env, passed)
    return sorted(name for name in env if name not in kept)
