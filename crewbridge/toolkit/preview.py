"""The change crew's write_file or edit_file asks for, before it runs: the diff a person approving
it judges (an editor's permission request), the same the finished call shows (its record's
`change`). From the call's input and the file as those tools read it (tools/files.py `planned`)."""

from __future__ import annotations

from typing import Any

from crewbridge.toolkit.registry import FileChange, ToolContext
from crewbridge.tools.files import planned

PATH_KEYS = ("file_path", "path", "notebook_path", "absolute_path", "dir_path")  # the CLIs' own tools' path inputs


def path_of(data: Any) -> str | None:
    """The file a call's input names, if it names one."""
    if not isinstance(data, dict):
        return None
    return next((data[key] for key in PATH_KEYS if isinstance(data.get(key), str)), None)


def asked_change(ctx: ToolContext, tool: str, data: Any) -> FileChange | None:
    """The change crew's `tool` (write_file, edit_file) asks for with input `data`; None for another
    tool, or where the change cannot be known before it runs (a path the tools refuse, an edit
    that would not apply, a file too large or not text)."""
    if not isinstance(data, dict) or not isinstance(data.get("path"), str):
        return None
    content, old, new = data.get("content"), data.get("old_string"), data.get("new_string")
    if tool == "write_file" and isinstance(content, str):
        return planned(ctx, data["path"], lambda text: content)
    if tool == "edit_file" and isinstance(old, str) and isinstance(new, str) and old:
        return planned(
            ctx, data["path"], lambda text: text.replace(old, new) if text and text.count(old) == 1 else None
        )
    return None
