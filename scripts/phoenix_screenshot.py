"""docs/observability.md's screenshot: one run of crew over the real claude and codex (pinned, in
node_modules/.bin) against the tests' mock model server, claude's own telemetry on, traced into an
Arize Phoenix (.venv-phoenix, as scripts/test makes it) started here on 127.0.0.1, and that trace
in Phoenix's UI in Debian's Chromium.

    PATH="$PWD/node_modules/.bin:$PATH" .venv/bin/python scripts/phoenix_screenshot.py [OUT_FILE]
"""

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from browser import chromium
from clienv import cli_env
from crewcli import CREW, tool_block
from mockserver import MockServer, reply
from phoenix import Phoenix, binary

REPO = Path(__file__).resolve().parent.parent
out = Path(sys.argv[1] if len(sys.argv) > 1 else REPO / "docs" / "observability-phoenix.png")
base = Path(tempfile.mkdtemp(prefix="crew-phoenix-shot-"))
work = base / "project"
work.mkdir()
(work / "notes.txt").write_text("deploy window: Tuesday 14:00 UTC\nowner: dana\n")
U = dict(input_tokens=1850, cached_tokens=1200, output_tokens=45)
program = binary()
if program is None:
    sys.exit("Phoenix is not installed in .venv-phoenix; ./scripts/test makes it")
phoenix = Phoenix(program).start()
try:
    with MockServer() as claude_mock, MockServer() as codex_mock:
        env = {**cli_env("claude", claude_mock.url, base / "home"), **cli_env("codex", codex_mock.url, base / "home")}
        env = {k: v for k, v in env.items() if k != "DISABLE_TELEMETRY"}
        env.update(
            CLAUDE_CODE_ENABLE_TELEMETRY="1",
            CLAUDE_CODE_ENHANCED_TELEMETRY_BETA="1",
            OTEL_TRACES_EXPORTER="otlp",
            OTEL_METRICS_EXPORTER="none",
            OTEL_LOGS_EXPORTER="none",
            OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
            OTEL_EXPORTER_OTLP_ENDPOINT=phoenix.url,
            OTEL_RESOURCE_ATTRIBUTES="openinference.project.name=crew",
        )
        claude_mock.script(
            reply("Let me read it.\n", tool_block("crew:read_file", path="notes.txt"), **U),
            reply("The deploy window is Tuesday 14:00 UTC; dana owns it.", **U),
        )
        codex_mock.script(reply(tool_block("crew:grep", pattern="owner"), **U), reply("dana owns the deploy.", **U))
        task = "@claude @codex when is the deploy, and who owns it?"
        subprocess.run([*CREW, "query", task], cwd=work, env=env, timeout=300, check=True, capture_output=True)
        shown = subprocess.run(
            [*CREW, "log", "show", "--json", "last"], cwd=work, env=env, capture_output=True, text=True
        )
    trace = json.loads(shown.stdout.splitlines()[0])["trace"]
    spans = phoenix.spans("crew", trace, want=9, wait=90)  # crew's 5 and claude's 4 (2 interactions, 2 requests)
    if not any(span["name"] == "claude_code.interaction" for span in spans):
        sys.exit(f"claude's own spans did not reach Phoenix: {sorted(span['name'] for span in spans)}")
    project = next(p["id"] for p in phoenix.get("/v1/projects")["data"] if p["name"] == "crew")
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1500, "height": 1400})
        page.goto(f"{phoenix.url}/projects/{project}/traces/{trace}", wait_until="networkidle")
        page.get_by_text("claude_code.interaction").first.wait_for(timeout=120_000)  # the tree is drawn
        page.get_by_text("invoke_agent claude").first.click()  # its attributes beside the tree
        time.sleep(2)
        page.screenshot(path=str(out))
    print(f"{out}: trace {trace}, {len(spans)} spans")
finally:
    phoenix.stop()
