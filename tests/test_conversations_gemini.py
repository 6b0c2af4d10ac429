"""Correcting Gemini's own session file after a stopped reply, so that `--resume` continues from
the reply cut exactly at its last tool block (the real CLI is in tests/e2e/test_live.py)."""

from __future__ import annotations

import json

from crewbridge.providers.gemini import session_file

from crewbridge.conversations.gemini import cut_reply

SID = "3b5d8fc2-55a4-4047-b6b6-6abeac75be29"
KEPT = 'Reading.\n```json\n{"type":"tool_use","name":"crew:read_file","input":{"path":"a"}}\n```\n'


def write_session(path, *records):
    """A session file as Gemini 0.61 writes it: metadata, context, then one record per message."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        {"sessionId": SID, "projectHash": "p", "startTime": "t", "lastUpdated": "t", "kind": "main"},
        {"$set": {"messages": [{"id": "ctx", "type": "user", "content": [{"text": "<session_context>"}]}]}},
        *records,
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def user(id_, text):
    return {"id": id_, "timestamp": "t", "type": "user", "content": [{"text": text}]}


def gemini(id_, text, **extra):
    return {"id": id_, "timestamp": "t", "type": "gemini", "content": text, **extra}


def history(path):
    """The messages Gemini loads from the file: records by id in order, `$set` messages replace
    them all, `{"$rewindTo": id}` drops that message and every later one."""
    messages: dict[str, dict] = {}
    for line in path.read_text().splitlines():
        record = json.loads(line)
        if "$rewindTo" in record:
            ids = list(messages)
            for id_ in ids[ids.index(record["$rewindTo"]) :]:
                del messages[id_]
        elif "$set" in record and "messages" in record["$set"]:
            messages = {m["id"]: m for m in record["$set"]["messages"]}
        elif "id" in record:
            messages[record["id"]] = record
    return [
        (m["type"], m["content"] if isinstance(m["content"], str) else "".join(p["text"] for p in m["content"]))
        for m in messages.values()
    ]


def test_a_reply_killed_before_gemini_stored_it_is_added_cut_at_the_block(tmp_path):
    path = write_session(tmp_path / "s.jsonl", user("u1", "read a"))
    assert cut_reply(path, "read a", KEPT)
    assert history(path) == [("user", "<session_context>"), ("user", "read a"), ("gemini", KEPT)]


def test_a_reply_stored_whole_with_its_tail_is_replaced_by_the_cut(tmp_path):
    path = write_session(
        tmp_path / "s.jsonl", user("u1", "read a"), gemini("g1", KEPT + "It says 7."), {"$set": {"lastUpdated": "t2"}}
    )
    assert cut_reply(path, "read a", KEPT)
    assert history(path)[-2:] == [("user", "read a"), ("gemini", KEPT)]
    assert json.loads(path.read_text().splitlines()[-2]) == {"$rewindTo": "g1"}


def test_earlier_turns_stay_as_they_were(tmp_path):
    path = write_session(tmp_path / "s.jsonl", user("u1", "read a"), gemini("g1", KEPT), user("u2", "the result\n"))
    assert cut_reply(path, "the result\n", "Again.\n")
    assert history(path)[1:] == [("user", "read a"), ("gemini", KEPT), ("user", "the result\n"), ("gemini", "Again.\n")]


def test_a_reply_that_used_geminis_own_tools_is_left_alone(tmp_path):
    path = write_session(
        tmp_path / "s.jsonl",
        user("u1", "read a"),
        gemini("g1", "Looking.", toolCalls=[{"name": "read_file", "result": []}]),
    )
    before = path.read_text()
    assert not cut_reply(path, "read a", KEPT)
    assert path.read_text() == before


def test_a_file_that_does_not_end_with_the_message_is_left_alone(tmp_path):
    path = write_session(tmp_path / "s.jsonl", user("u1", "an older message"), gemini("g1", "old answer"))
    before = path.read_text()
    assert not cut_reply(path, "read a", KEPT)
    assert path.read_text() == before


def test_the_session_file_is_found_by_its_full_id_under_gemini_home(tmp_path):
    chats = tmp_path / ".gemini" / "tmp" / "work" / "chats"
    path = write_session(chats / f"session-2026-11-22T05-49-{SID[:8]}.jsonl")
    other = chats / f"session-2026-11-22T05-50-{SID[:8]}.jsonl"  # same prefix, another session
    other.write_text(json.dumps({"sessionId": SID[:8] + "-other", "projectHash": "p"}) + "\n")
    assert session_file({"HOME": str(tmp_path)}, SID) == path
    assert session_file({"HOME": "/nowhere", "GEMINI_CLI_HOME": str(tmp_path)}, SID) == path
    assert session_file({"HOME": str(tmp_path)}, "ffffffff-0000") is None
    assert session_file({"HOME": str(tmp_path)}, None) is None
