"""A stand-in for a model CLI with a model's latency, for the parallel-agents figure: it reads the
prompt on stdin, waits `--think` seconds, then asks for crew:read_file on notes.txt, or — once the
result is in the prompt — answers. Run with `python -S` (no site): it costs next to no CPU, so three
at once measure crew, not the machine.

    python -S bench/fake_agent.py --think 0.5 < prompt
"""

import sys
import time

CALL = '```json\n{"type": "tool_use", "name": "crew:read_file", "input": {"path": "notes.txt"}}\n```\n'


def main() -> None:
    think = float(sys.argv[sys.argv.index("--think") + 1])
    prompt = sys.stdin.read()
    time.sleep(think)
    sys.stdout.write(
        "notes.txt holds two lines.\n" if "[crew tool results]" in prompt else "I will read notes.txt.\n" + CALL
    )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
