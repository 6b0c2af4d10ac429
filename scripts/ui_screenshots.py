"""docs/ui.md's screenshots: `crew ui` in Debian's Chromium over runs of the real claude and gemini
(node_modules/.bin, pinned) against the tests' mock model server, in a scratch folder; an approval
answered on the page, a run stopped with Ctrl-C, a failed one, and a `crew batch` over three
repositories, one of which fails; the runs, the batches and usage on a 390 px phone.

    PATH="$PWD/node_modules/.bin:$PATH" .venv/bin/python scripts/ui_screenshots.py [OUT_FOLDER]
"""

import json
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from browser import chromium
from clienv import cli_env
from crewcli import CREW, end_group, tool_block, write_config
from gitrepo import make_repo
from mockserver import MockServer, error, reply

out = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "docs")
base = Path(tempfile.mkdtemp(prefix="crew-ui-shots-"))
work = base / "project"
work.mkdir()
(work / "notes.txt").write_text("deploy window: Tuesday 14:00 UTC\nowner: dana\n")
U = dict(input_tokens=1850, cached_tokens=1200, output_tokens=45)


def start(env, *args):
    return subprocess.Popen(
        [*CREW, *args],
        cwd=work,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def crew(env, *args):
    proc = start(env, *args)
    proc.communicate(timeout=180)
    end_group(proc)


with MockServer() as mock:
    env = cli_env("claude", mock.url, base / "home")
    gemini = {**cli_env("gemini", mock.url, base / "home-gemini"), "XDG_STATE_HOME": env["XDG_STATE_HOME"]}
    ui = start(env, "ui", "--listen", "127.0.0.1:0")
    link = re.search(r"(http://\S+)/sign-in/\S+", ui.stdout.readline())
    url = link.group(1)
    try:
        mock.script(
            reply("Let me read it.\n", tool_block("crew:read_file", path="notes.txt"), **U),
            reply("The deploy window is Tuesday 14:00 UTC; dana owns it.", **U),
        )
        crew(env, "query", "@claude when is the deploy window?")
        mock.script(
            reply("The file has two lines: the deploy window and its owner.", input_tokens=2400, output_tokens=60)
        )
        crew(gemini, "query", "@gemini summarize notes.txt")
        mock.script(error(500))
        crew(env, "query", "@claude what changed since Monday?")
        mock.script(reply("Looking at every file ", *["slowly " for _ in range(60)], delay=0.5))
        stopped = start(env, "query", "@claude audit the whole repository")
        time.sleep(6)
        stopped.send_signal(signal.SIGINT)
        stopped.communicate(timeout=60)
        end_group(stopped)
        repos = [make_repo(base / name, {"notes.txt": f"the {name} service\n"}) for name in ("api", "web", "worker")]
        write = tool_block("crew:write_file", path="CHANGELOG.md", content="- logging 2.x\n")

        def answer(request):  # the worker's model refuses: a batch with a failed repository
            if "/worker" in json.dumps(request.body):
                return error(400, "the model refused this request")
            return "Done." if '"success": true' in request.text() else write

        mock.respond(answer)
        crew(env, "batch", "--id", "logging", "@claude bump the logging library to 2.x", *map(str, repos))
        mock.responder = None  # the script again
        write_config(work / "crew.yaml", agents={"claude": {"approval": ["edit_file"]}})
        mock.script(
            reply(
                "The day is wrong: I'll fix it.\n",
                tool_block("crew:edit_file", path="notes.txt", old_string="Tuesday", new_string="Wednesday"),
                **U,
            ),
            reply("Done: the deploy window is now Wednesday 14:00 UTC.", **U),
        )
        asking = start(env, "execute", "@claude the deploy moved to Wednesday; fix notes.txt")
        with chromium() as browser:
            page = browser.new_page(viewport={"width": 1180, "height": 760})
            page.set_default_timeout(120_000)
            page.goto(link.group(0))
            question = page.locator('[data-approval-id][data-state="open"]')
            question.wait_for()
            page.wait_for_timeout(300)
            page.screenshot(path=str(out / "ui-approval.png"))
            question.locator('[data-action="allow"]').click()
            asking.communicate(timeout=180)
            end_group(asking)
            page.goto(f"{url}/")
            page.locator("[data-run-id]").nth(5).wait_for()
            page.wait_for_timeout(300)
            page.screenshot(path=str(out / "ui-runs.png"))
            page.locator("[data-run-id]").first.click()
            page.locator('[data-kind="answer"]').wait_for()
            page.wait_for_timeout(300)
            page.screenshot(path=str(out / "ui-run.png"), full_page=True)
            page.goto(f"{url}/usage")
            page.locator(".chart svg").wait_for()
            page.wait_for_timeout(300)
            page.screenshot(path=str(out / "ui-usage.png"))
            page.goto(f"{url}/batches")
            page.locator("[data-batch-id]").wait_for()
            page.wait_for_timeout(300)
            page.screenshot(path=str(out / "ui-batches.png"))
            phone = browser.new_page(viewport={"width": 390, "height": 760}, device_scale_factor=2)
            again = start(env, "ui")  # a second crew ui prints a fresh link to the one that serves
            phone.goto(re.search(r"http://\S+/sign-in/\S+", again.communicate(timeout=60)[0]).group(0))
            end_group(again)
            phone.locator("[data-run-id]").nth(5).wait_for()
            phone.wait_for_timeout(300)
            phone.screenshot(path=str(out / "ui-phone.png"))
            for name in ("batches", "usage"):  # 390 px wide: nothing scrolls sideways (tests/e2e/test_ui_real.py)
                phone.goto(f"{url}/{name}")
                phone.locator("[data-batch-id]" if name == "batches" else ".chart svg").first.wait_for()
                phone.wait_for_timeout(300)
                phone.screenshot(path=str(out / f"ui-phone-{name}.png"), full_page=True)
    finally:
        end_group(ui)
print(json.dumps(sorted(str(path) for path in out.glob("ui-*.png"))))
