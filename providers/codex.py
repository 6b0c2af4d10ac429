"""Codex CLI: `codex exec --json -`, prompt on stdin; `exec resume ID` continues."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from crewbridge.providers.base import JsonLineDecoder, Provider, Turn, cli_home

from crewbridge.events import Done, Event, Failure, MessageEnd, Notice, Session, Text, Usage


class CodexDecoder(JsonLineDecoder):
    """exec --json events → assistant text (one agent_message item per message; no deltas)."""

    def event(self, obj: dict[str, Any]) -> list[Event]:
        kind = obj.get("type")
        if kind == "thread.started":
            return [Session(obj.get("thread_id"))]
        if kind in ("item.started", "item.updated", "item.completed"):
            item = obj["item"]
            if item.get("type") == "agent_message":
                return [Text(item.get("text") or ""), MessageEnd()] if kind == "item.completed" else []
            return [Notice("native_" + str(item.get("type")))]
        if kind == "turn.completed":
            usage = obj.get("usage") or {}
            # the thread's totals so far: on a resumed thread they include the earlier turns
            totals = Usage(
                usage.get("input_tokens") or 0,
                usage.get("output_tokens") or 0,
                cached_tokens=usage.get("cached_input_tokens") or 0,
                cumulative=True,
            )
            return [totals, Done()]
        if kind == "turn.failed":
            err = obj.get("error") or {}
            return [Failure(str(err.get("message") or err)), Done()]
        if kind == "error":
            return [Failure(str(obj.get("message") or obj))]
        return [Notice("unknown", str(kind))]


class CodexProvider(Provider):
    name = "codex"
    binary = "codex"
    install_hint = "npm install -g @openai/codex"
    live = "crewbridge.providers.live_codex:CodexLiveConversation"
    native_via = "dynamic tools on its app-server thread"

    def argv(self, turn: Turn) -> list[str]:
        sandbox = "read-only" if turn.mode == "query" else "workspace-write"
        argv = [self.binary, "exec", "--json", "--skip-git-repo-check", "--sandbox", sandbox]
        if turn.model:
            argv += ["--model", turn.model]
        argv += turn.options
        if turn.session_id:
            argv += ["resume", turn.session_id]
        return [*argv, "-"]

    def decoder(self) -> CodexDecoder:
        return CodexDecoder()

    def has_session(self, session_id: str, env: Mapping[str, str], cwd: Path) -> bool:
        # $CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl
        sessions = cli_home(env, "CODEX_HOME", ".codex") / "sessions"
        return any(sessions.glob(f"*/*/*/rollout-*-{session_id}.jsonl"))

    def commands(self) -> list[list[str]]:
        return [*super().commands(), [self.binary, "app-server"]]  # the live conversation
