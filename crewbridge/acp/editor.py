"""The editor as one of crew's approval channels (`session/request_permission`: allow once, allow
always, reject) and as where the file tools read a file's text (`fs/read_text_file`, only when the
client offered it). crew never asks the editor to write (`fs/write_text_file`): the editor would
look the name up again, and a folder on it may have been swapped for a symlink meanwhile; crew
writes through the folder it resolved (tools/files.py, docs/acp.md)."""

from __future__ import annotations

import concurrent.futures
import threading
import time
from typing import TYPE_CHECKING, Any, Protocol

from acp import RequestError
from acp.schema import PermissionOption

from crewbridge.system.approval import Answer, Question, Verdict
from crewbridge.toolkit.registry import ToolFailure

if TYPE_CHECKING:
    from crewbridge.acp.wire import Courier

OPTIONS = [
    PermissionOption(option_id="allow_once", name="Allow once", kind="allow_once"),
    PermissionOption(option_id="allow_always", name="Allow always", kind="allow_always"),
    PermissionOption(option_id="reject", name="Reject", kind="reject_once"),
]
VERDICTS: dict[str, Verdict] = {"allow_once": "yes", "allow_always": "always", "reject": "no"}
FILE_WAIT = 30.0  # seconds the editor has to read a file


class Session(Protocol):
    """What the editor's channel and files need of their ACP session (crewbridge.acp.session)."""

    id: str
    client: Any  # the SDK's connection to the editor
    courier: Courier
    closed: bool

    def asked(self, question: Question) -> Any:
        """The tool call (ToolCallUpdate) a permission request is about, shown if it was not yet."""


class EditorChannel:
    """Asks the editor of one ACP session. "Allow always" holds for the rest of that session: the
    tool is not asked about again (a command crew could not check apart: that is asked every time)."""

    source = "editor"

    def __init__(self, session: Session) -> None:
        self.session = session
        self.always: set[str] = set()  # tools allowed for the rest of the session
        self._lock = threading.Lock()
        self._asking: concurrent.futures.Future[Any] | None = None
        self._withdrawn = False

    def available(self) -> bool:
        return not self.session.closed

    def ask(self, question: Question, deadline: float | None) -> Verdict | None:
        if question.tool in self.always and not question.note:
            return "always"
        call = self.session.asked(question)
        future = self.session.courier.request(
            lambda: self.session.client.request_permission(session_id=self.session.id, tool_call=call, options=OPTIONS)
        )
        with self._lock:
            if self._withdrawn:
                future.cancel()
            self._asking = future
        try:
            answer = future.result(None if deadline is None else max(deadline - time.monotonic(), 0))
        except (concurrent.futures.TimeoutError, concurrent.futures.CancelledError, RequestError, ConnectionError):
            future.cancel()
            return None
        finally:
            with self._lock:
                self._asking = None
        outcome = answer.outcome
        verdict = VERDICTS.get(getattr(outcome, "option_id", ""))  # None: cancelled by the client
        if verdict == "always":
            self.always.add(question.tool)
        return verdict

    def withdraw(self) -> None:
        with self._lock:
            self._withdrawn = True
            if self._asking is not None:
                self._asking.cancel()

    def reopen(self) -> None:
        with self._lock:
            self._withdrawn = False

    def settled(self, question: Question, answer: Answer) -> None:
        with self._lock:
            if self._asking is not None:
                self._asking.cancel()


class EditorFiles:
    """The file tools' text (crewbridge.toolkit.registry.Files) from the editor's buffers."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def read_text(self, path: str) -> str:
        future = self.session.courier.request(
            lambda: self.session.client.read_text_file(session_id=self.session.id, path=path)
        )
        try:
            return str(future.result(FILE_WAIT).content)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise ToolFailure(f"the editor did not read '{path}' within {FILE_WAIT:g}s; try again") from None
        except RequestError as exc:
            raise ToolFailure(f"the editor could not read '{path}': {exc}") from None
        except (ConnectionError, concurrent.futures.CancelledError):
            raise ToolFailure(f"the editor is gone; '{path}' was not read") from None
