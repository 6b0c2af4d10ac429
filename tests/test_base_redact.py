"""crewbridge.base.redact: secrets out of what crew writes down (transcripts, --verbose, crew log show),
each kind in isolation, then in the transcript and the trace of a real run."""

from __future__ import annotations

import json
import os

import pytest

from crewbridge.base.redact import OVERLAP, Redactor
from crewcli import FakeModel, crew_env, run_crew, tool_block, write_config

ENV = {
    "ANTHROPIC_API_KEY": "s3cr3t-value-1234",
    "GITHUB_TOKEN": "tok-abcdef",
    "DB_PASSWORD": "hunter22",
    "SHORT_KEY": "dummy",
    "HOME": "/home/someone",
    "EDITOR": "vim-editor",
}
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("key sk-ant-api03-" + "A" * 40 + " end", "key [REDACTED:sk] end"),
        ("openai sk-proj-" + "b1" * 12, "openai [REDACTED:sk]"),
        ("aws AKIAIOSFODNN7EXAMPLE", "aws [REDACTED:aws]"),
        ("gh ghp_" + "a" * 36, "gh [REDACTED:github]"),
        ("pat github_pat_" + "1" * 40, "pat [REDACTED:github]"),
        ("slack xoxb-123456789012-abcdefghij", "slack [REDACTED:slack]"),
        ("google AIza" + "Z" * 35, "google [REDACTED:google]"),
        ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig", "Authorization: Bearer [REDACTED:bearer]"),
        (
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n-----END OPENSSH PRIVATE KEY-----\nafter",
            "[REDACTED:private-key]\nafter",
        ),
        ("cut -----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA", "cut [REDACTED:private-key]"),
        # credentials in a URL: the password goes, the user and the host stay
        (
            "db postgres://admin:hunter2pass@db.internal:5432/app",
            "db postgres://admin:[REDACTED:url-password]@db.internal:5432/app",
        ),
        (
            "git clone https://x-access-token:ghs_abc123@github.com/o/r",
            "git clone https://x-access-token:[REDACTED:url-password]@github.com/o/r",
        ),
        ("redis://:p4ss@localhost:6379/0", "redis://:[REDACTED:url-password]@localhost:6379/0"),
        # JWTs: three base64url segments, the first (and usually the second) a JSON object
        (f"session={JWT}; Path=/", "session=[REDACTED:jwt]; Path=/"),
        ("unsigned eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.", "unsigned [REDACTED:jwt]"),
        # AWS secret access keys: 40 characters of base64 named as one, or after a key id
        (f"aws_secret_access_key = {AWS_SECRET}", "aws_secret_access_key = [REDACTED:aws-secret]"),
        (f"export AWS_SECRET_ACCESS_KEY={AWS_SECRET}\n", "export AWS_SECRET_ACCESS_KEY=[REDACTED:aws-secret]\n"),
        (f'{{"SecretAccessKey": "{AWS_SECRET}", "x": 1}}', '{"SecretAccessKey": "[REDACTED:aws-secret]", "x": 1}'),
        (f"AKIAIOSFODNN7EXAMPLE,{AWS_SECRET}", "[REDACTED:aws],[REDACTED:aws-secret]"),
        (f"id AKIAIOSFODNN7EXAMPLE secret {AWS_SECRET} end", "id [REDACTED:aws] secret [REDACTED:aws-secret] end"),
    ],
)
def test_each_kind_of_key_is_redacted(text, expected):
    assert Redactor({}).text(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "the keyboard is a sketchy skeleton",
        "sk-short",
        "Bearer of bad news",
        "AKIA-not-a-key",
        "ordinary text with vim-editor in it",
        "-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----",
        "see https://example.com:8080/a@b and ssh://git@github.com/o/r.git",
        "mail user:pass@example.com",
        "commit 4b825dc642cb6eb9a060e54bf8d69288fbee4904 of " + "x" * 40,  # 40 characters, no key id near
        "the eyJ prefix alone, eyJhbGciOiJIUzI1NiJ9 one segment",
        "production runs in us-east-1",
    ],
)
def test_ordinary_text_is_left_alone(text):
    assert Redactor(ENV, provided={"DEPLOY_ENV": "production", "REGION": "us-east-1x"}).text(text) == text.replace(
        "us-east-1x", "[REDACTED:REGION]"
    )


def test_secret_named_variables_are_redacted_and_short_values_stay():
    redactor = Redactor(ENV)
    assert redactor.text("token tok-abcdef, pw hunter22, key s3cr3t-value-1234, dummy") == (
        "token [REDACTED:GITHUB_TOKEN], pw [REDACTED:DB_PASSWORD], key [REDACTED:ANTHROPIC_API_KEY], dummy"
    )
    assert redactor.text("/home/someone uses vim-editor") == "/home/someone uses vim-editor"  # not secret names


def test_every_value_a_provider_sets_is_redacted_whatever_its_name():
    redactor = Redactor(
        {},
        provided={
            "SERVICE_URL_PART": "zq7Rk2mWpL9x",
            "MODE": "production",
            "DEBUG": "1",
            "ENDPOINT": "https://llm.internal/v1",
        },
    )
    assert redactor.text("part zq7Rk2mWpL9x at https://llm.internal/v1 in production, DEBUG=1") == (
        "part [REDACTED:SERVICE_URL_PART] at [REDACTED:ENDPOINT] in production, DEBUG=1"
    )


def test_the_longest_secret_is_redacted_whole():
    redactor = Redactor({"A_KEY": "abcdefgh", "B_KEY": "abcdefgh-and-more"})
    assert redactor.text("abcdefgh-and-more") == "[REDACTED:B_KEY]"


def test_a_head_never_keeps_part_of_a_secret_across_the_cut():
    redactor = Redactor({"API_KEY": "s3cr3t-value-1234"})
    assert redactor.head("x" * 95 + "s3cr3t-value-1234" + "y" * OVERLAP, 100) == "x" * 95 + "[REDA"
    assert redactor.head("short", 100) == "short"


# --- in a real run: its transcript, crew log show, --verbose ---------------------------------------

SECRETS = {
    "provider env": "zq7Rk2mWpL9x",
    "url password": "hunter2pass",
    "jwt": JWT,
    "aws secret": AWS_SECRET,
}
FILE = (
    f"service part: {SECRETS['provider env']}\n"
    f"db: postgres://admin:{SECRETS['url password']}@db.internal:5432/app\n"
    f"jwt: {JWT}\n"
    f"aws_access_key_id = AKIAIOSFODNN7EXAMPLE\naws_secret_access_key = {AWS_SECRET}\n"
    "and ordinary text: https://example.com:8080/docs, production, user@example.com\n"
)


@pytest.mark.parametrize("kind", list(SECRETS))
@pytest.mark.slow
def test_no_secret_of_any_kind_is_in_a_runs_transcript_log_or_trace(kind, tmp_path):
    env = crew_env(tmp_path / "home")
    model = FakeModel(tmp_path / "bin")
    config = write_config(
        tmp_path / "crew.yaml",
        agents={"fake": {"provider": "fake"}},
        providers={"fake": {**model.provider(), "env": {"FAKE_SERVICE_URL_PART": SECRETS["provider env"]}}},
    )
    (tmp_path / "creds.txt").write_text(FILE)
    model.script(tool_block("crew:read_file", path="creds.txt"), f"The file says:\n{FILE}")  # quoted in context
    done = run_crew(
        ["query", "--verbose", "--config", str(config), "@fake what is in creds.txt?"], env=env, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert SECRETS[kind] in model.prompts[1]  # the model was given the file as it is
    [transcript] = (tmp_path / "home" / ".local" / "state" / "crewbridge" / "runs").glob("*.jsonl")
    shown = run_crew(["log", "show", "--json", "last"], env=env, cwd=tmp_path).stdout
    read = run_crew(["log", "show", "last"], env=env, cwd=tmp_path).stdout  # as a person reads it
    for written in (transcript.read_text(), shown, read, done.stderr):  # done.stderr: the --verbose trace
        assert SECRETS[kind] not in written
    [result] = [event for event in map(json.loads, shown.splitlines()) if event["kind"] == "result"]
    assert result["data"]["content"] == (
        "service part: [REDACTED:FAKE_SERVICE_URL_PART]\n"
        "db: postgres://admin:[REDACTED:url-password]@db.internal:5432/app\n"
        "jwt: [REDACTED:jwt]\n"
        "aws_access_key_id = [REDACTED:aws]\naws_secret_access_key = [REDACTED:aws-secret]\n"
        "and ordinary text: https://example.com:8080/docs, production, user@example.com\n"
    )
    assert "[REDACTED:" in done.stderr and os.fspath(tmp_path) in done.stderr  # the trace is there, redacted
