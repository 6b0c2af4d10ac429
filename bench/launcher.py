"""The bare Python launcher of the launch figure: start `claude` the way crew does (a child on
pipes, found on PATH) and nothing else, then wait for it.

    python bench/launcher.py ARG...
"""

import subprocess
import sys

subprocess.Popen(["claude", *sys.argv[1:]], stdin=subprocess.PIPE, stdout=subprocess.PIPE).wait()
