"""Reading a shell line as bash reads it: every simple command it runs, or why crew cannot know."""

from __future__ import annotations

import pytest

from crewbridge.base.shellwords import MAX_DEPTH, MAX_LINE, MAX_WORDS, Unknowable, Word, argv_commands, simple_commands


def texts(line: str) -> list[str]:
    return [found.text for found in simple_commands(line)]


def refusal(line: str) -> str:
    with pytest.raises(Unknowable) as caught:
        simple_commands(line)
    return str(caught.value)


# --- every simple command is found -------------------------------------------------------------------


@pytest.mark.parametrize(
    "line, expected",
    [
        ("ls; rm x", ["ls", "rm x"]),
        ("ls && rm x || rm y", ["ls", "rm x", "rm y"]),
        ("ls | rm x |& wc", ["ls", "rm x", "wc"]),
        ("ls & rm x", ["ls", "rm x"]),
        ("ls\nrm x", ["ls", "rm x"]),
        ("(rm x)", ["rm x"]),
        ("{ rm x; }", ["rm x"]),
        ("! rm x", ["rm x"]),
        ("if true; then rm x; elif ls; then rm y; else rm z; fi", ["true", "rm x", "ls", "rm y", "rm z"]),
        ("while false; do rm x; done; until true; do rm y; done", ["false", "rm x", "true", "rm y"]),
        ("for f in a b; do rm $f; done", ["rm $f"]),
        ("select f in a; do rm x; done", ["rm x"]),
        ("case a in a|b) rm x;; *) rm y;; esac", ["rm x", "rm y"]),
        ("[[ -f x ]] && rm x", ["rm x"]),
        ("echo $(rm x)", ["echo $(rm x)", "rm x"]),
        ("echo `rm x`", ["echo `rm x`", "rm x"]),
        ('echo "$(rm x)"', ['echo "$(rm x)"', "rm x"]),
        ("cat <(rm x) >(rm y)", ["cat <(rm x) >(rm y)", "rm x", "rm y"]),
        ("x=$(rm y) ls", ["x=$(rm y) ls", "rm y"]),
        ("ls > $(rm x)", ["ls", "rm x"]),
        ("echo ${x:-$(rm y)}", ["echo ${x:-$(rm y)}", "rm y"]),
        ("cat <<EOF\n$(rm x)\nEOF", ["cat", "rm x"]),
        ("cat <<'EOF'\n$(rm x)\nEOF\nls", ["cat", "ls"]),  # a quoted here-doc is text
        ("cat <<EOF | rm x\nhi\nEOF", ["cat", "rm x"]),
        ('cat <<< "$(rm x)"', ["cat", "rm x"]),
        ("ls >f rm x", ["ls rm x"]),  # bash gives the words after a redirection to the command
        ("2>/dev/null rm x", ["rm x"]),
        ("export A=$(rm z)", ["export A=$(rm z)", "rm z"]),
        ("A=1 B=2", ["A=1 B=2"]),
        ("ls # ; rm x", ["ls"]),
        ("ls \\\n  -la", ["ls -la"]),  # a continuation between words is a space
    ],
)
def test_every_simple_command_is_found(line, expected):
    assert texts(line) == expected


@pytest.mark.parametrize(
    "line, program",
    [
        ("/bin/rm x", "rm x"),
        ("\\rm x", "rm x"),
        ("'r'm x", "rm x"),
        ('"rm" x', "rm x"),
        ('$"rm" x', "rm x"),
        ("r''m x", "rm x"),
    ],
)
def test_quotes_are_removed_as_the_shell_removes_them(line, program):
    [found] = simple_commands(line)
    assert " ".join(w.text for w in found.words).rsplit("/", 1)[-1] == program


def test_a_word_only_the_shell_knows_keeps_what_is_known_of_its_start():
    [found] = simple_commands('grep -r "$PAT" src/*.py --out=$DIR {a,b} ~/x')
    grep, r, pat, src, out, brace, home = found.words
    assert (grep.known, r.known) == (True, True)
    assert (pat.known, pat.prefix, pat.single) == (False, "", True)  # quoted: one word
    assert (src.known, src.prefix, src.single) == (False, "src/", False)  # a glob: any number of words
    assert (out.prefix, out.single) == ("--out=", False)
    assert (brace.prefix, brace.single) == ("", False)
    assert (home.prefix, home.single) == ("", True)
    [found] = simple_commands('echo "$@" {} a~b')
    assert not found.words[1].single and found.words[2] == Word("{}", "{}") and found.words[3].known


# --- wrappers and shells ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "line, runs",
    [
        ("sudo -u root rm -rf /", ["rm -rf /"]),
        ("sudo --user root -- rm x", ["rm x"]),
        ("env -i A=1 -u B rm x", ["rm x"]),
        ("timeout -s KILL 5 curl x", ["curl x"]),
        ("nice -n 5 nohup rm x", ["nohup rm x", "rm x"]),
        ("xargs -0 -I{} rm {}", ["rm {}"]),
        ("time -p rm x", ["rm x"]),
        ("command rm x", ["rm x"]),
        ("exec -a name rm x", ["rm x"]),
        ("builtin cd x", ["cd x"]),
        ("busybox rm x", ["rm x"]),
        ("stdbuf -oL setsid rm x", ["setsid rm x", "rm x"]),
        ("strace -f rm x", ["-f rm x", "rm x", "x"]),  # options crew does not read: every later word
        ("sudo -l", []),
        ("command -v rm", []),  # looks rm up, runs nothing
    ],
)
def test_wrappers_are_looked_through_to_the_program_they_run(line, runs):
    [found] = simple_commands(line)
    assert [" ".join(w.text for w in words) for words in found.through] == runs


def test_a_shell_string_is_read_as_commands():
    found = simple_commands("/bin/bash -lc 'echo made > made.txt && rm x'")
    assert [f.text for f in found] == ["echo made", "rm x", "/bin/bash -lc echo made > made.txt && rm x"]
    assert found[-1].shell and not found[0].shell
    assert texts("bash -c -- 'rm x'")[0] == "rm x"
    assert texts("sh -e -o pipefail -c 'rm x' name arg")[0] == "rm x"
    assert texts("sudo bash -c 'rm x'")[0] == "rm x"


def test_shells_nest_up_to_a_bound():
    line = "ls"
    for _ in range(MAX_DEPTH):
        line = f"sh -c {_quote(line)}"
    assert texts(line)[0] == "ls"
    assert refusal(f"sh -c {_quote(line)}") == f"shells nested more than {MAX_DEPTH} deep"


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def test_an_argv_is_read_as_the_words_it_is():
    [found] = argv_commands(["git", "log", "$X; rm x"])
    assert [w.text for w in found.words] == ["git", "log", "$X; rm x"] and all(w.known for w in found.words)
    assert argv_commands(["sh", "-c", "rm x"])[0].text == "rm x"


# --- what only the shell would know -----------------------------------------------------------------


@pytest.mark.parametrize(
    "line, reason",
    [
        ("X=rm; $X x", "its program '$X' is known only when the shell runs"),
        ("${X:-rm} x", "its program '${X:-rm}'"),
        ("rm${IFS}x", "its program 'rm${IFS}x'"),
        ("IFS=,; c=rm,x; $c", "its program '$c'"),
        ("$(printf rm) x", "its program '$(printf rm)'"),
        ("`printf rm` x", "its program '`printf rm`'"),
        ("r* x", "its program 'r*'"),
        ("{rm,x}", "crew cannot parse it"),
        ("rm{,} x", "its program 'rm{,}'"),
        ("$'rm' x", "its program \"$'rm'\""),
        ("$HOME/bin/rm x", "its program '$HOME/bin/rm'"),  # unquoted: may split into words
        ("sudo $X x", "sudo is given '$X'"),
        ('bash -c "$X"', "bash -c runs a string known only when the shell runs"),
        ("fish -c 'rm (echo f)'", "fish -c runs a string in fish's own grammar"),
        ("zsh -c '=rm f'", "its program '=rm' is a path zsh finds for it"),
        ("eval 'rm x'", "eval runs a string as a command"),
        ("command eval 'rm x'", "eval runs a string"),
        ("source ./x.sh", "source runs the commands of a file"),
        (". ./x.sh", "`.` runs the commands of a file"),
        ("trap 'rm x' EXIT", "trap runs a string as a command later"),
        ("alias r=rm\nr x", "alias makes a name run something else"),
        ("f() { rm x; }; f", "it defines a function"),
        ("function g { rm x; }", "it defines a function"),
        ("coproc rm x", "coproc"),
        ("enable -f ./x.so x", "enable"),
        ("hash -p /bin/rm ls; ls x", "hash -p"),
        ("echo rm x | sh", "sh without a script reads commands from its input"),
        ("bash <<< 'rm x'", "bash without a script"),
        ("bash -s < f", "bash -s reads commands from its input"),
        ("bash -ic 'r x'", "bash -ic reads commands from its input or runs interactively"),
        ("env -S 'rm \"x\"'", "env -S splits a string with quotes, escapes or variables"),
        ("bash script.sh arg", "bash script.sh runs the commands of a file, which crew does not read"),
        ("sh -e ./x.sh", "sh ./x.sh runs the commands of a file"),
        ("mapfile -C 'rm x' -c 1 a < f", "mapfile -C runs a command"),
        ("PS4='$(rm x)'; set -x; ls", "sets PS4"),
        ("BASH_CMDS[ls]=/bin/rm; ls x", "sets BASH_CMDS"),
        ("BASH_ALIASES[r]=rm", "sets BASH_ALIASES"),
        ("export BASH_ENV=./x", "sets BASH_ENV"),
        ("env PROMPT_COMMAND=x bash x.sh", "sets PROMPT_COMMAND"),
        ("read PS4 < f", "sets PS4"),
        ("x='a[$(rm y)]'; echo $((x))", "arithmetic on 'x'"),
        ("(( x ))", "arithmetic on 'x'"),
        ("[[ $x -eq 1 ]]", "arithmetic on '$x'"),
        ("echo ${a[$i]}", "arithmetic on '$i'"),
        ("echo ${s:$n}", "crew cannot parse it"),
        ("for ((i=0; i<3; i++)); do ls; done", "arithmetic on 'i=0'"),
        ("let x=1", "let evaluates arithmetic"),
        ("declare -i x=1", "`declare -i`"),
        ("local -n ref=x", "`local -n`"),
        (
            "printf -v 'a[$(rm x)]' 1",
            "printf is given a variable name known only when the shell runs, or with a subscript",
        ),
        ('printf -v "$n" 1', "printf is given a variable name"),
        ("test -v 'a[$(rm x)]'", "test is given a variable name"),
        ("[[ -v a[$(rm x)] ]]", "-v is given a variable name"),
        ('declare "$n=1"', "declare is given a variable name"),
        ("echo ${!x}", "${!x} expands a variable named by another"),
        ("echo ${x@P}", "${x@P} transforms a value"),
        ("r\\\nm x", "a line continuation (backslash, newline) joins two words"),
        ("echo 'open", "crew cannot parse it as a shell command (unexpected or missing text at character 5"),
        ("ls &&", "crew cannot parse it"),
        ("if", "crew cannot parse it"),
    ],
)
def test_what_only_the_shell_would_know_is_unknowable_with_a_reason(line, reason):
    assert reason in refusal(line)


@pytest.mark.parametrize(
    "line, programs",
    [
        ('echo "$HOME" > home.txt', ["echo"]),
        ('grep -r "$PAT" .', ["grep"]),
        ("echo $((1 + 2))", ["echo"]),
        ("[[ $# -gt 0 ]] && ls", ["ls"]),
        ("echo ${#x[@]} ${a[0]}", ["echo"]),
        ("read -r line < f", ["read"]),
        ('for f in *.py; do wc -l "$f"; done', ["wc"]),
        ("x=(1 2); echo ${x[@]}", ["x=(1", "echo"]),
        ('"$HOME"/bin/tool x', ['"$HOME"/bin/tool']),
        ("cd sub && make test", ["cd", "make"]),
        ("sleep 9 & wait $!", ["sleep", "wait"]),
        ("export PATH=$PWD/bin:$PATH", ["export"]),
        ("git diff HEAD~1 -- '*.py'", ["git"]),
    ],
)
def test_plain_commands_and_expansions_in_argument_position_are_read(line, programs):
    assert [found.text.split()[0] for found in simple_commands(line)] == programs


# --- hostile input -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "line, reason",
    [
        ("(" * 5000 + "ls" + ")" * 5000, "it nests more than 200 levels deep"),
        ("echo $(" * 1000 + "ls" + ")" * 1000, "it nests more than 200 levels deep"),
        ("ls " + "x" * MAX_LINE, f"it is longer than {MAX_LINE} bytes"),
        ("ls \udc80", "lone surrogate"),
        ("ls \0 x", "crew cannot parse it"),
    ],
)
def test_hostile_lines_are_refused_not_crashed_on(line, reason):
    assert reason in refusal(line)


def test_a_long_line_of_many_commands_is_read_up_to_a_bound():
    assert len(simple_commands("ls;" * 2000)) == 2000
    assert refusal("ls;" * 2049) == (
        f"it holds more than {MAX_WORDS} words and operators, more than crew reads of one command; "
        "split it into several"
    )


# --- wrappers read as they read their options (issue 31) ------------------------------------------


@pytest.mark.parametrize(
    "line, runs",
    [
        ("env - rm x", ["rm x"]),
        ("env -i -- A=1 rm x", ["rm x"]),
        ("env -S 'rm x' y", ["rm x y"]),
        ("env --split-string='-i rm x'", ["rm x"]),
        ("env --ignore-env rm x", ["rm x"]),  # a unique prefix, as getopt takes it
        ("timeout -- 5 rm x", ["rm x"]),
        ("timeout --sig=KILL -k 1 5 rm x", ["rm x"]),
        ("nice -10 rm x", ["rm x"]),
        ("setpriv --reuid 0 --init-groups rm x", ["rm x"]),
        ("setarch x86_64 -R rm x", ["rm x"]),
        ("setarch -R rm x", ["rm x"]),
        ("linux64 --addr-no-randomize rm x", ["rm x"]),
        ("prlimit -n64 --cpu=1 rm x", ["rm x"]),
        ("choom -n 0 -- rm x", ["rm x"]),
        ("fakeroot -u -- rm x", ["rm x"]),
        ("eatmydata rm x", ["rm x"]),
        ("/lib64/ld-linux-x86-64.so.2 --argv0 ls /bin/rm x", ["/bin/rm x"]),
        ("/usr/lib/ld-musl-aarch64.so.1 /bin/rm x", ["/bin/rm x"]),
        ("setpriv --dump", []),
        ("env", []),
        ("timeout --help", []),
    ],
)
def test_more_wrappers_are_looked_through_as_they_read_their_options(line, runs):
    [found] = simple_commands(line)
    assert [" ".join(w.text for w in words) for words in found.through] == runs


def test_sg_runs_its_command_as_a_shell_line():
    assert texts("sg staff -c 'rm x; ls'")[:2] == ["rm x", "ls"]
    assert texts("sg - staff 'rm x'")[0] == "rm x"


@pytest.mark.parametrize(
    "line, reason",
    [
        ("timeout -z 5 rm x", "timeout -z: crew does not know the option -z of timeout"),
        ("env --frobnicate rm x", "env --frobnicate: crew does not know this option of env"),
        ("env --i rm x", "env --i: crew does not know this option"),  # ambiguous: ignore-environment, ignore-signal
        ("env 'BASH_FUNC_ls%%=() { rm x; }' bash -c ls", "env exports BASH_FUNC_ls%%, which bash takes for a function"),
        ("env LD_PRELOAD=./x.so ls", "env sets LD_PRELOAD"),
        ("LD_PRELOAD=./x.so ls", "sets LD_PRELOAD"),
        ("ld.so --preload ./x.so /bin/ls", "ld.so --preload runs what crew does not read"),
        ("sudo -s rm x", "sudo -s runs what crew does not read"),
        ("sg staff", "sg without a command runs a shell"),
        ("sg staff rm x", "sg runs its command as a line for the shell"),
        ("fakeroot", "fakeroot without a program runs a shell"),
        ("env -S 'rm $x'", "env -S splits a string with quotes, escapes or variables"),
    ],
)
def test_wrappers_crew_cannot_follow_are_unknowable(line, reason):
    assert reason in refusal(line)


# --- linear and bounded ------------------------------------------------------------------------------


def test_wrappers_nest_up_to_a_bound():
    from crewbridge.base.shellwords import MAX_WRAPPERS

    assert len(simple_commands("nice " * MAX_WRAPPERS + "rm x")[0].through) == MAX_WRAPPERS
    assert refusal("nice " * (MAX_WRAPPERS + 1) + "rm x") == (
        f"it nests more than {MAX_WRAPPERS} wrappers (env, nice, timeout, …) in one another"
    )


def test_a_runner_is_read_up_to_a_bound():
    from crewbridge.base.shellwords import MAX_RUNNER_WORDS

    assert len(simple_commands("strace " + "a " * (MAX_RUNNER_WORDS - 1))[0].through) == MAX_RUNNER_WORDS - 1
    assert "strace is given more than" in refusal("strace " + "a " * MAX_RUNNER_WORDS)


def test_a_very_long_word_with_globs_is_one_only_the_shell_knows():
    from crewbridge.base.shellwords import MAX_SCANNED

    [found] = simple_commands("echo a" + "*" * MAX_SCANNED)
    assert (found.words[1].known, found.words[1].prefix, found.words[1].single) == (False, "", False)
    [found] = simple_commands("echo a" + "*" * 10)
    assert found.words[1].prefix == "a"


def test_the_shells_inside_a_line_share_its_bound():
    inner = "ls " + "a " * 1500
    assert refusal(f"sh -c '{inner}'; sh -c '{inner}'; sh -c '{inner}'").startswith("it holds more than")


def work(line: str) -> int:
    """Lines of Python run to read `line` (a count of work that does not depend on the machine's load)."""
    import sys

    counted = 0

    def tracer(frame, event, arg):
        nonlocal counted
        if event == "line":
            counted += 1
        return tracer

    sys.settrace(tracer)
    try:
        simple_commands(line)
    except Unknowable:
        pass
    finally:
        sys.settrace(None)
    return counted


SHAPES = {  # each n times: what made the reading quadratic, and what made it slow
    "words": lambda n: "ls " + "a " * n,
    "commands": lambda n: "ls;" * n,
    "pipes": lambda n: "ls|" * n + "ls",
    "redirections": lambda n: "ls" + " >a" * n,
    "wrappers and words": lambda n: "env nice timeout 5 rm " + "x " * n,
    "escapes": lambda n: "echo " + "\\\\x" * n,
    "globs": lambda n: "echo " + "a*" * n,
    "quoted escapes": lambda n: 'echo "' + '\\"' * n + '"',
    "substitutions": lambda n: "echo $(ls) " * (n // 3),
    "a shell string": lambda n: "sh -c '" + "ls a;" * (n // 3) + "'",
    "env -S": lambda n: "env -S '" + "A=1 " * n + "' rm x",
}


@pytest.mark.parametrize("shape", SHAPES)
def test_reading_is_linear_in_the_lines_length(shape):
    small, large = work(SHAPES[shape](500)), work(SHAPES[shape](1000))
    assert large <= 2.3 * small, f"{shape}: {small} lines of work for 500, {large} for 1000"


@pytest.mark.parametrize(
    "line",
    [
        "env " * 32000,  # 115 s of CPU before
        "strace " + "a " * 60000,
        "ls " + "a " * 63000,
        "ls;" * 42000,
        "ls" + " >a" * 42000,
        "echo " + "\\\\" * 60000,
        "echo " + "*" * 120000,
        "cat <<'EOF'\n" + "x y z\n" * 20000 + "EOF\n",
        "sh -c '" + "ls a;" * 10000 + "'",
    ],
)
def test_a_long_hostile_line_is_decided_with_bounded_work(line):
    assert work(line) < 60 * MAX_WORDS
