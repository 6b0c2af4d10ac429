"""What a shell command line would run, read with bash's grammar, for the command rules.

`simple_commands(line)` finds every simple command the line holds: through `;`, `&&`, `||`, `|`,
`&`, newlines, `( )`, `{ }`, if/while/until/for/select/case bodies, redirections and here-docs, and
inside `$( )`, backticks, `<( )`/`>( )` and the `-c` string of a shell (`bash -lc '…'`, as Codex
sends its commands). It raises Unknowable, with a reason the model reads, when what the line runs
cannot be known without running the shell: a program that is a variable, an expansion or a command
substitution; `eval`, `source`, `trap`, `alias`, functions; a variable bash runs as code (`PS4`,
`BASH_CMDS`, …) or arithmetic on a variable (bash evaluates `a[$(…)]` inside it); a line it cannot
parse. Wrappers (`sudo`, `env`, `timeout`, `xargs`, `command`, …) are looked through to the
program they run. What the line's programs do in turn (`python -c`, `make`, `find -exec`) is beyond
any reading of the line: the sandbox is the enforcement, these rules a convenience.

The grammar is tree-sitter-bash (a maintained grammar with compiled wheels): it parses in tens of
microseconds and imports in a few milliseconds, and where it cannot parse it marks the error, which
is refused. It is imported when a command is first checked, never at crew's start-up.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tree_sitter import Node, Parser

MAX_LINE = 131072  # bytes: Linux's limit on one argument (`sh -c LINE`)
MAX_WORDS = 4096  # words and operators read in all (shells inside shells included): the check's bound
MAX_NESTING = 200  # levels of the parse tree read (the reader recurses)
MAX_DEPTH = 4  # shells inside shells (`bash -lc "sh -c '…'"`) read before crew gives up
MAX_WRAPPERS = 16  # wrappers inside wrappers (`nice env timeout 5 …`) looked through
MAX_RUNNER_WORDS = 64  # words after a runner (`strace …`) from each of which deny globs are tried
MAX_SCANNED = 4096  # characters of a word with quotes, escapes or globs read one by one
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash", "posh", "fish", "csh", "tcsh"})
FOREIGN_SHELLS = frozenset({"fish", "csh", "tcsh"})  # another grammar: their -c strings are not read
# Builtins that run text as code, or change what a name runs, later or elsewhere.
RUNS_CODE = {
    "eval": "eval runs a string as a command",
    "source": "source runs the commands of a file",
    ".": "`.` runs the commands of a file",
    "trap": "trap runs a string as a command later",
    "alias": "alias makes a name run something else on later lines",
    "enable": "enable loads or switches off builtins",
    "coproc": "coproc runs a command crew does not read",
    "fc": "fc runs commands from the history",
    "let": "let evaluates arithmetic, which can run commands (a[$(…)])",
    "compgen": "compgen -C/-F runs commands",
    "complete": "complete -C/-F runs commands",
}
# Variables whose value bash runs, or that change what a name runs (BASH_CMDS[ls]=/bin/rm), or
# that make every program load code the line does not name (the dynamic loader's).
CODE_VARIABLES = frozenset(
    "PS0 PS1 PS2 PS4 PROMPT_COMMAND BASH_ENV ENV BASH_ALIASES BASH_CMDS SHELLOPTS BASHOPTS "
    "LD_PRELOAD LD_AUDIT LD_LIBRARY_PATH".split()
)
FUNCTION_EXPORT = "BASH_FUNC_"  # an environment variable bash imports as a function: `BASH_FUNC_ls%%=() { …; }`
SHELL_LONG_OPTIONS = frozenset({"--login", "--noprofile", "--norc", "--posix", "--restricted", "--noediting"})
NUMERIC_SPECIALS = frozenset({"#", "?", "$", "!"})
ARITHMETIC_TESTS = frozenset({"-eq", "-ne", "-lt", "-le", "-gt", "-ge"})
GLOB = "*?["
_SPECIAL = re.compile(r"[\\\\*?\[{]")  # in a plain word: what only a reading character by character gets right
BRACES = re.compile(r"\{[^{}\0]*(?:,|\.\.)[^{}\0]*\}")  # unquoted; a nested one is found by its inner pair


@dataclass(frozen=True)
class Wrapper:
    """A program that runs the program named after its options, and its options as it reads them
    (getopt's: short ones clustered, a value attached or the next word; long ones by a unique
    prefix, a value after `=` or as the next word; `--` ends them; the first operand ends them). An
    option it does not list is refused: crew cannot tell where its program starts."""

    flags: str = ""  # short options without a value
    valued: str = ""  # short options with a value: attached (`-n5`) or the next word
    attached: str = ""  # short options whose value, if any, is attached (`-n5`: prlimit's limits)
    long_flags: frozenset[str] = frozenset()  # long options without a value (an optional one only as `=value`)
    long_valued: frozenset[str] = frozenset()  # long options with a value: `=value` or the next word
    arch: bool = False  # a first word that is no option is an operand (setarch's architecture)
    operands: int = 0  # operands after the options, before the program (timeout's duration)
    assignments: bool = False  # NAME=value words may come before the program (env)
    numbers: bool = False  # `-10` is an option (nice's old form)
    dash: bool = False  # a lone `-` is an option (env's -i)
    refused: frozenset[str] = frozenset()  # options (`-s`, `--preload`) that make it run what crew does not read
    runs_none: frozenset[str] = frozenset()  # options with which it runs no program (`command -v`)
    splits: frozenset[str] = frozenset()  # options whose value it splits into arguments of its own (env -S)
    shell: bool = False  # without a program it runs a shell, which reads commands from its input


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


HELP = _names("--help --version")  # every GNU and util-linux wrapper: it prints and runs nothing
WRAPPERS = {
    "command": Wrapper(flags="pvV", runs_none=_names("-v -V")),
    "builtin": Wrapper(),
    "exec": Wrapper(flags="cl", valued="a"),
    "nohup": Wrapper(),
    "eatmydata": Wrapper(),
    "setsid": Wrapper(flags="cfw", long_flags=_names("ctty fork wait")),
    "busybox": Wrapper(),
    "toybox": Wrapper(),
    "time": Wrapper(
        flags="apqv",
        valued="fo",
        long_flags=_names("append portability quiet verbose"),
        long_valued=_names("format output"),
    ),
    "nice": Wrapper(valued="n", long_valued=_names("adjustment"), numbers=True),
    "timeout": Wrapper(
        flags="v",
        valued="sk",
        long_flags=_names("preserve-status foreground verbose"),
        long_valued=_names("signal kill-after"),
        operands=1,
    ),
    "stdbuf": Wrapper(valued="ioe", long_valued=_names("input output error")),
    "env": Wrapper(
        flags="i0v",
        valued="uC",
        long_flags=_names(
            "ignore-environment null debug block-signal default-signal ignore-signal list-signal-handling"
        ),
        long_valued=_names("unset chdir split-string"),
        assignments=True,
        dash=True,
        splits=_names("-S --split-string"),
    ),
    "doas": Wrapper(flags="nLs", valued="uC", runs_none=_names("-C -L"), refused=_names("-s")),
    "sudo": Wrapper(
        flags="AbBEeHiKklnNPSsVv",
        valued="CDghpRrTtUu",
        long_flags=_names(
            "askpass background bell preserve-env edit set-home login remove-timestamp reset-timestamp list "
            "non-interactive preserve-groups shell stdin validate"
        ),
        long_valued=_names("close-from chdir group host prompt chroot role type command-timeout other-user user"),
        runs_none=_names("-K -l -V -v --remove-timestamp --list --validate"),
        refused=_names("-e -i -s --edit --login --shell"),  # an editor, or a shell running the command as a string
    ),
    "xargs": Wrapper(
        flags="0prtx",
        valued="adEILnPs",
        attached="eil",
        long_flags=_names("null interactive no-run-if-empty verbose exit open-tty show-limits eof replace max-lines"),
        long_valued=_names("arg-file delimiter max-args max-procs max-chars process-slot-var"),
    ),
    "setpriv": Wrapper(
        flags="d",
        long_flags=_names("dump nnp no-new-privs clear-groups keep-groups init-groups reset-env"),
        long_valued=_names(
            "ambient-caps inh-caps bounding-set ruid euid rgid egid reuid regid groups securebits pdeathsig "
            "selinux-label apparmor-profile landlock-access landlock-rule seccomp-filter"
        ),
        runs_none=_names("-d --dump"),
    ),
    "setarch": Wrapper(
        flags="BFILRSTXZ3v",
        long_flags=_names(
            "32bit fdpic-funcptrs short-inode addr-compat-layout addr-no-randomize whole-seconds sticky-timeouts "
            "read-implies-exec mmap-page-zero 3gb 4gb uname-2.6 verbose list"
        ),
        arch=True,
        runs_none=_names("--list"),
        shell=True,
    ),
    "prlimit": Wrapper(
        valued="po",
        attached="cdefilmnqrstuvxy",
        long_flags=_names(
            "noheadings raw verbose core data nice fsize sigpending memlock rss nofile msgqueue rtprio stack cpu "
            "nproc as locks rttime"
        ),
        long_valued=_names("pid output"),
    ),
    "choom": Wrapper(valued="np", long_valued=_names("adjust pid")),
    "fakeroot": Wrapper(
        flags="uhv",
        valued="lfisb",
        long_flags=_names("unknown-is-real"),
        long_valued=_names("lib faked fd-base"),
        shell=True,
    ),
}
for _alias in ("linux32", "linux64", "i386", "x86_64"):  # setarch by another name, its architecture implied
    WRAPPERS[_alias] = replace(WRAPPERS["setarch"], arch=False)
# The dynamic loader runs the program it is given (`/lib64/ld-linux-x86-64.so.2 /bin/rm x`), under
# whatever name and path: long options only, their values the next word.
LOADER = re.compile(r"ld(64)?([-_.][\w.-]*)?\.so(\.[0-9]+)*")
LOADER_WRAPPER = Wrapper(
    long_flags=_names("inhibit-cache list verify list-tunables list-diagnostics"),
    long_valued=_names("library-path glibc-hwcaps-prepend glibc-hwcaps-mask inhibit-rpath argv0 preload audit"),
    runs_none=_names("--list --verify --list-tunables --list-diagnostics"),
    refused=_names("--preload --audit --library-path"),  # code of its own choosing loaded into the program
)
# Programs that run a command given after options crew does not read: a deny glob is tried from
# each of their later words (over-matching is the safe side of a deny rule).
RUNNERS = frozenset(
    "strace ltrace watch chroot unshare nsenter ionice taskset chrt flock runuser su script ssh "
    "parallel firejail catchsegv ".split()
)
# Builtins that take variable names, and which of their words are names: bash evaluates a name's
# subscript (`printf -v 'a[$(rm x)]'` runs rm). (short options with a value, options whose value is
# a name, whether operands are names, the operand that is a name)
NAMERS: dict[str, tuple[str, str, bool, int | None]] = {
    "read": ("adinNptu", "a", True, None),
    "mapfile": ("dnOstuC", "", True, None),
    "readarray": ("dnOstuC", "", True, None),
    "printf": ("v", "v", False, None),
    "wait": ("p", "p", False, None),
    "getopts": ("", "", False, 1),
    "test": ("v", "v", False, None),
    "[": ("v", "v", False, None),
    "unset": ("", "", True, None),
}
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class Unknowable(ValueError):
    """What the line runs cannot be known without running the shell; the text says why."""


@dataclass(frozen=True)
class Word:
    """One word of a simple command, as far as it is known before the shell runs."""

    text: str  # its value after quote removal when known; else as written
    prefix: str  # what is known of its start (all of it when known)
    known: bool = True
    single: bool = True  # stays exactly one word (no unquoted expansion, glob or brace to split it)


@dataclass(frozen=True)
class SimpleCommand:
    """A simple command: its assignments, its words (program first; none for `A=1` alone), and the
    commands it runs through wrappers (`sudo rm x` → `rm x`), each as words from the program on."""

    assignments: tuple[Word, ...]
    words: tuple[Word, ...]
    through: tuple[tuple[Word, ...], ...] = ()
    shell: bool = False  # `bash -c STRING`: what it runs are the commands of STRING, listed besides

    @property
    def text(self) -> str:
        return " ".join(w.text for w in (*self.assignments, *self.words))

    @property
    def runs(self) -> list[tuple[Word, ...]]:
        """What it runs, for deny rules: its words and each wrapped command's, from the program on,
        the program without its directory (`/bin/rm x` → `rm x`)."""
        out = []
        for words in (self.words, *self.through) if self.words else ():
            name = program_name(words[0])
            out.append((Word(name, name), *words[1:]))
        return out


def simple_commands(line: str, depth: int = 0) -> list[SimpleCommand]:
    """Every simple command `line` would run, in order. Unknowable when that cannot be known, and
    when it holds more than MAX_WORDS words and operators (shells inside it included): the work is
    linear in the line's length and bounded."""
    return _read(line, depth, _Budget())


def argv_commands(argv: list[str]) -> list[SimpleCommand]:
    """The simple commands of a program run with these exact arguments (no shell)."""
    budget = _Budget()
    budget.take(len(argv))
    reader = _Reader(b"", 0, budget)
    reader.command((), tuple(Word(arg, arg) for arg in argv))
    return reader.found


@dataclass
class _Budget:
    """The words and operators left to read in one check, shared by the shells inside the line."""

    left: int = MAX_WORDS

    def take(self, count: int) -> None:
        self.left -= count
        if self.left < 0:
            raise Unknowable(
                f"it holds more than {MAX_WORDS} words and operators, more than crew reads of one command; "
                "split it into several"
            )

    def count(self, line: str) -> None:
        """Take the words and operators of `line`, counted (in C) no further than what is left."""
        self.take(sum(1 for _ in itertools.islice(_TOKENS.finditer(line), self.left + 1)))


_TOKENS = re.compile(r"[^\s;&|()<>]+|[;&|()<>]+")


def _read(line: str, depth: int, budget: _Budget) -> list[SimpleCommand]:
    try:
        source = line.encode()
    except UnicodeEncodeError:
        raise Unknowable("it holds a lone surrogate, which is not text") from None
    if len(source) > MAX_LINE:
        raise Unknowable(f"it is longer than {MAX_LINE} bytes, more than one argument of a program can hold")
    budget.count(line)
    _check_continuations(line)
    root = _parser().parse(source).root_node
    if root.has_error:
        raise Unknowable(f"crew cannot parse it as a shell command ({_first_error(root, source)})")
    if _too_deep(root):
        raise Unknowable(f"it nests more than {MAX_NESTING} levels deep")
    reader = _Reader(source, depth, budget)
    reader.visit(root)
    return reader.found


@functools.cache
def _language() -> Any:
    # Deferred for start-up speed: only a run whose agent has command rules parses commands.
    import tree_sitter
    import tree_sitter_bash

    return tree_sitter.Language(tree_sitter_bash.language())


def _parser() -> Parser:
    from tree_sitter import Parser  # a parser is not thread-safe: one per line (a fraction of a µs)

    return Parser(_language())


def _check_continuations(line: str) -> None:
    """bash joins `r\\<newline>m` into `rm`; the grammar reads two words. Refuse the difference."""
    at = line.find("\\\n")
    while at != -1:
        start = at
        while start > 0 and line[start - 1] == "\\":
            start -= 1
        escaped = (at - start) % 2 == 1  # an odd run of backslashes before it: this one is quoted
        before, after = line[start - 1 : start], line[at + 2 : at + 3]
        if not escaped and before.strip() and after.strip():
            raise Unknowable("a line continuation (backslash, newline) joins two words; put them on one line")
        at = line.find("\\\n", at + 2)


def _too_deep(root: Node) -> bool:
    stack = [(root, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_NESTING:
            return True
        stack += [(child, depth + 1) for child in node.children]
    return False


def _first_error(root: Node, source: bytes) -> str:
    stack = [root]
    while stack:
        node = stack.pop()
        if node.is_error or node.is_missing:
            near = source[node.start_byte : node.start_byte + 20].decode("utf-8", "replace")
            return f"unexpected or missing text at character {node.start_byte + 1}" + (f": {near!r}" if near else "")
        stack.extend(reversed(node.children))
    return "syntax error"


# Node types read for what they contain; anything else is refused.
_CONTAINERS = frozenset(
    "program list pipeline subshell compound_statement do_group negated_command if_statement "
    "elif_clause else_clause while_statement case_statement case_item file_redirect heredoc_redirect "
    "herestring_redirect heredoc_body command_name string concatenation command_substitution process_substitution "
    "array translated_string brace_expression binary_expression unary_expression "
    "parenthesized_expression ternary_expression postfix_expression ".split()
)
_LEAVES = frozenset(
    "word raw_string ansi_c_string string_content number comment heredoc_start heredoc_end "
    "heredoc_content file_descriptor variable_name special_variable_name regex extglob_pattern "
    "test_operator simple_expansion ".split()
)
_REDIRECTS = frozenset({"file_redirect", "heredoc_redirect", "herestring_redirect"})
_ARITHMETIC_OPENERS = frozenset({"arithmetic_expansion", "compound_statement"})
_ARITHMETIC = frozenset(
    "number binary_expression unary_expression ternary_expression parenthesized_expression postfix_expression ".split()
)


@dataclass
class _Reader:
    source: bytes
    depth: int
    budget: _Budget
    found: list[SimpleCommand] = field(default_factory=list)

    def text(self, node: Node) -> str:
        return self.source[node.start_byte : node.end_byte].decode(errors="replace")

    # --- the tree

    def visit(self, node: Node) -> None:
        kind = node.type
        if not node.is_named or kind in _LEAVES:
            return
        if kind == "command":
            self.read_command(node, [])
        elif kind == "redirected_statement":
            self.read_redirected(node)
        elif kind in ("declaration_command", "unset_command"):
            self.read_declaration(node)
        elif kind in ("variable_assignment", "variable_assignments"):  # assignments alone: `A=1`
            assignments = [node] if kind == "variable_assignment" else node.named_children
            self.command(tuple(self.assignment(a) for a in assignments), ())
            for assignment in assignments:
                self.visit_inside(assignment)
        elif kind == "function_definition":
            raise Unknowable("it defines a function, which makes a name run something else")
        elif kind == "for_statement":
            variable = node.child_by_field_name("variable")
            if variable is not None:
                _check_name(self.text(variable), node.children[0].type)
            self.visit_inside(node)
        elif kind == "c_style_for_statement":
            for child in node.named_children:
                self.visit(child) if child.type in ("do_group", "compound_statement") else self.arithmetic(child)
        elif kind == "test_command":
            self.read_test(node)
        elif kind == "arithmetic_expansion" or (kind == "compound_statement" and _opens(node, "((")):
            self.arithmetic(node)
        elif kind == "expansion":
            self.read_expansion(node)
        elif kind == "subscript":
            index = node.child_by_field_name("index")
            if index is not None and not (index.type == "word" and self.text(index) in ("@", "*")):
                self.arithmetic(index)
        elif kind in _CONTAINERS:
            for child in node.children:
                self.visit(child)
        else:
            raise Unknowable(f"crew does not read the shell construct {kind!r} ({self.text(node)[:40]!r})")

    def visit_inside(self, node: Node) -> None:
        """What a node holds: its values and substitutions (an assignment in it is not a command)."""
        for child in node.children:
            if child.type == "variable_assignment":
                self.visit_inside(child)
            else:
                self.visit(child)

    def read_redirected(self, node: Node) -> None:
        body = node.child_by_field_name("body")
        redirects = node.children_by_field_name("redirect")
        extra = [word for redirect in redirects for word in _extra_words(redirect)]  # `ls >f rm`: rm is ls's
        if body is not None and body.type == "command":
            self.read_command(body, extra)
        elif extra:
            raise Unknowable(f"a word after a redirection ({self.text(extra[0])!r}) that bash would refuse")
        elif body is not None:
            self.visit(body)
        for redirect in redirects:
            self.visit(redirect)

    def read_command(self, node: Node, extra: list[Node]) -> None:
        assignments, words = [], []
        extra = list(extra)
        for child in node.named_children:
            if child.type == "variable_assignment":
                assignments.append(self.assignment(child))
            elif child.type in _REDIRECTS:
                extra += _extra_words(child)
            elif child.type == "command_name":
                words.append(child.named_children[0] if child.named_child_count == 1 else child)
            else:
                words.append(child)
        words += extra
        for before, after in itertools.pairwise(words):
            if before.end_byte == after.start_byte:  # bash reads one word where the grammar reads two
                raise Unknowable(f"crew reads {self.text(before) + self.text(after)!r} differently from bash")
        self.command(tuple(assignments), tuple(self.word(w) for w in words))
        self.visit_inside(node)

    def read_declaration(self, node: Node) -> None:
        """declare/typeset/local/export/readonly/unset: flags, names and NAME=value words."""
        keyword = node.children[0].type
        words = [Word(keyword, keyword)]
        for child in node.named_children:
            if child.type == "variable_assignment":
                words.append(self.assignment(child))
                continue
            word = self.word(child)
            if word.known and word.text.startswith("-"):
                if keyword != "export" and {"i", "n"} & set(word.text):
                    raise Unknowable(f"`{keyword} {word.text}` makes bash evaluate values as code or names")
            else:
                _check_name(word.text if word.known else "", keyword)
            words.append(word)
        self.command((), tuple(words))
        self.visit_inside(node)

    def read_test(self, node: Node) -> None:
        """`[[ … ]]` and `[ … ]`: -eq and the like compare arithmetic; -v names a variable."""
        for expression in _descendants(node):
            operator = next((c for c in expression.children if c.type == "test_operator"), None)
            if operator is None or expression.type not in ("binary_expression", "unary_expression"):
                continue
            operands = [c for c in expression.named_children if c.type != "test_operator"]
            if self.text(operator) in ARITHMETIC_TESTS:
                for operand in operands:
                    self.arithmetic(operand)
            elif self.text(operator) == "-v":
                for operand in operands:
                    word = self.word(operand)
                    _check_name(word.text if word.known else "", "-v")
        self.visit_inside(node)

    def read_expansion(self, node: Node) -> None:
        tokens = [child.type for child in node.children]
        if tokens[1:2] == ["!"]:
            raise Unknowable(f"{self.text(node)} expands a variable named by another (bash evaluates its subscript)")
        if "@" in tokens:
            raise Unknowable(f"{self.text(node)} transforms a value (@P runs the commands in it)")
        if ":" in tokens:  # ${x:offset:length}: arithmetic
            for child in node.children[tokens.index(":") :]:
                if child.is_named:
                    self.arithmetic(child)
        self.visit_inside(node)

    def arithmetic(self, node: Node) -> None:
        """Arithmetic: numbers only. bash evaluates a variable's value as an expression there, and
        `x='a[$(rm y)]'; echo $((x))` runs rm."""
        stack = list(node.children) if node.type in _ARITHMETIC_OPENERS else [node]
        while stack:
            inner = stack.pop()
            if inner.type == "simple_expansion" and self.text(inner)[1:] in NUMERIC_SPECIALS:
                continue  # $#, $?, $$, $!: numbers the model cannot set
            if inner.is_named and inner.type not in _ARITHMETIC:
                raise Unknowable(
                    f"arithmetic on {self.text(inner)!r}: bash evaluates a variable's value there as code "
                    "(a[$(…)] runs a command); write the numbers out"
                )
            stack += inner.children

    # --- words

    def assignment(self, node: Node) -> Word:
        """NAME=value as a word; NAME must not be one that changes what commands run."""
        name = node.child_by_field_name("name")
        if name is not None and name.type == "subscript":
            name = name.child_by_field_name("name")
        _check_name(self.text(name) if name is not None else "", "an assignment")
        value = node.child_by_field_name("value")
        if value is None:
            text = self.text(node)
            return Word(text, text)
        word = self.word(value)
        head = self.between(node.start_byte, value.start_byte)
        return Word(head + word.text, head + word.prefix, word.known, True)

    def word(self, node: Node) -> Word:
        """A word, as far as it is known. The common ones are read whole (a plain word, '…', "…"
        without escapes or expansions); the rest character by character, except past
        MAX_SCANNED characters, where the word counts as one only the shell knows (the safe side:
        a deny glob is tried against any value, an allow glob must admit any)."""
        text = self.text(node)
        kind = node.type
        if kind in ("word", "number") and not text.startswith("~") and not _SPECIAL.search(text):
            return Word(text, text)
        if kind == "raw_string" or (kind == "string" and "\\" not in text and _contents_only(node)):
            return Word(text[1:-1], text[1:-1])
        if len(text) > MAX_SCANNED:
            return Word(text, "", known=False, single=False)
        return _assemble(list(self.pieces(node)), text)

    def pieces(self, node: Node) -> Iterator[tuple[str, bool] | _Unknown]:
        """A word as characters (each with whether it was quoted) and the parts only the shell knows."""
        kind = node.type
        if kind in ("word", "number", "variable_name", "extglob_pattern"):
            yield from _unquote(self.text(node))
        elif kind == "raw_string":
            yield from ((char, True) for char in self.text(node)[1:-1])
        elif kind in ("string", "translated_string"):
            inner = node.named_children[0] if kind == "translated_string" else node
            at = inner.start_byte + 1
            for child in inner.named_children:
                yield from _double_quoted(self.between(at, child.start_byte))
                if child.type == "string_content":
                    yield from _double_quoted(self.text(child))
                else:  # "$x", "$(…)": one word, unless "$@" or "${a[@]}"
                    yield _Unknown(multi=bool(re.fullmatch(r"\$\{?@\}?|\$\{.*\[@\]\}", self.text(child))))
                at = child.end_byte
            yield from _double_quoted(self.between(at, inner.end_byte - 1))
        elif kind == "concatenation":
            at = node.start_byte
            for child in node.children:
                yield from _unquote(self.between(at, child.start_byte))
                yield from self.pieces(child)
                at = child.end_byte
        elif kind == "ansi_c_string":
            yield _Unknown(multi=False)
        else:  # expansions, substitutions, brace expressions: known only when the shell runs
            yield _Unknown(multi=True)

    def between(self, start: int, end: int) -> str:
        return self.source[start:end].decode(errors="replace")

    # --- commands

    def command(self, assignments: tuple[Word, ...], words: tuple[Word, ...]) -> None:
        """Record a simple command, and what it runs through wrappers and `sh -c`."""
        through: list[tuple[Word, ...]] = []
        shell = False
        current = words
        while current:
            program = program_name(current[0])
            if program in RUNS_CODE:
                raise Unknowable(RUNS_CODE[program])
            if program == "hash" and any(w.text.startswith("-") and "p" in w.text for w in current[1:]):
                raise Unknowable("hash -p makes a name run another program")
            if program in NAMERS:
                _check_namer(program, current[1:])
            if program in SHELLS:
                shell = self.shell(program, current[1:]) and not through
                break
            if program == "sg":
                self.sg(current[1:])
                break
            wrapper = LOADER_WRAPPER if LOADER.fullmatch(program) else WRAPPERS.get(program)
            if wrapper is None:
                if program in RUNNERS:
                    if len(current) > MAX_RUNNER_WORDS:
                        raise Unknowable(
                            f"{program} is given more than {MAX_RUNNER_WORDS} words; crew reads no further after "
                            f"{program}, whose options it does not know"
                        )
                    through += [current[i:] for i in range(1, len(current)) if current[i].known]
                break
            if len(through) == MAX_WRAPPERS:
                raise Unknowable(f"it nests more than {MAX_WRAPPERS} wrappers (env, nice, timeout, …) in one another")
            try:
                wrapped = _wrapped_program(program, wrapper, current[1:])
            except _NoProgram:
                break
            if wrapped is None:
                break
            current = wrapped
            through.append(current)
        self.found.append(SimpleCommand(assignments, words, tuple(through), shell))

    def sg(self, args: tuple[Word, ...]) -> None:
        """`sg [-] GROUP [-c] COMMAND`: COMMAND is a line /bin/sh runs, read as `sh -c` would be."""
        rest = list(args[1:] if args[:1] and args[0].text == "-" and args[0].known else args)
        if rest[1:2] and rest[1].known and rest[1].text == "-c":
            del rest[1]
        if len(rest) < 2:
            raise Unknowable("sg without a command runs a shell that reads commands from its input")
        if len(rest) > 2 or not rest[1].known:
            raise Unknowable("sg runs its command as a line for the shell: give it as one word written out")
        self.shell_line(rest[1].text)

    def shell_line(self, line: str) -> None:
        """The commands of a line a shell is given to run (`sh -c LINE`), read as its own."""
        if self.depth >= MAX_DEPTH:
            raise Unknowable(f"shells nested more than {MAX_DEPTH} deep")
        self.found += _read(line, self.depth + 1, self.budget)

    def shell(self, program: str, args: tuple[Word, ...]) -> bool:
        """`bash -lc STRING`: the commands of STRING are read too (True). A shell reading its input,
        interactive, or running the commands of a file (`sh s.sh`, as `. s.sh` would) is refused."""
        command_mode = False
        i = 0
        while i < len(args) and args[i].known and args[i].text[:1] in "-+" and len(args[i].text) > 1:
            text = args[i].text
            if text == "--":
                i += 1
                break
            if text.startswith("--"):
                if text not in SHELL_LONG_OPTIONS:
                    raise Unknowable(f"{program} {text}: crew does not read this option")
            elif {"i", "s"} & set(text[1:]):
                raise Unknowable(f"{program} {text} reads commands from its input or runs interactively")
            else:
                command_mode = command_mode or "c" in text[1:]
                i += bool({"o", "O"} & set(text[1:]))  # -o pipefail
            i += 1
        operands = args[i:]
        if not command_mode:
            if not operands:
                raise Unknowable(f"{program} without a script reads commands from its input")
            raise Unknowable(f"{program} {operands[0].text} runs the commands of a file, which crew does not read")
        if not operands or not operands[0].known:
            raise Unknowable(f"{program} -c runs a string known only when the shell runs")
        if program in FOREIGN_SHELLS:
            raise Unknowable(f"{program} -c runs a string in {program}'s own grammar, which crew does not read")
        self.shell_line(operands[0].text)
        return True


@dataclass(frozen=True)
class _Unknown:
    multi: bool  # may become several words, or none


def _assemble(pieces: list[tuple[str, bool] | _Unknown], written: str) -> Word:
    """A word from its pieces. Unquoted glob characters, a brace expansion (`{a,b}`, `{1..3}`) and a
    leading tilde are expansions too: the word is known up to the first of them."""
    bare = "".join(p[0] if isinstance(p, tuple) and not p[1] else "\0" for p in pieces)
    braces = {i for m in BRACES.finditer(bare) for i in (m.start(), m.end() - 1)}
    chars: list[str] = []
    single = True
    prefix: str | None = None
    for n, piece in enumerate(pieces):
        if isinstance(piece, tuple):
            char, quoted = piece
            tilde = char == "~" and n == 0 and not quoted
            if not (tilde or n in braces or (char in GLOB and not quoted)):
                chars.append(char)
                continue
            splits = not tilde
        else:
            splits = piece.multi
        prefix = "".join(chars) if prefix is None else prefix
        single = single and not splits
    value = "".join(chars)
    if prefix is None:
        return Word(value, value)
    return Word(written, prefix, False, single)


def _unquote(text: str) -> Iterator[tuple[str, bool]]:
    """Characters of unquoted text: a backslash quotes the next character."""
    escaped = False
    for char in text:
        if escaped:
            yield char, True
            escaped = False
        elif char == "\\":
            escaped = True
        else:
            yield char, False


def _double_quoted(text: str) -> Iterator[tuple[str, bool]]:
    """Characters inside double quotes: a backslash quotes only $ ` " \\ and a newline."""
    i = 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text) and text[i + 1] in '$`"\\\n':
            if text[i + 1] != "\n":
                yield text[i + 1], True
            i += 2
        else:
            yield text[i], True
            i += 1


def program_name(word: Word) -> str:
    """The program a command's first word names, without its directory; Unknowable when only the
    shell would know it (`$X`, `${X:-rm}`, `rm${IFS}x`, `$(printf rm)`, `r*`)."""
    if word.known and word.text.startswith("="):
        raise Unknowable(f"its program {word.text!r} is a path zsh finds for it (=name); write the name out")
    if word.known:
        return word.text.rsplit("/", 1)[-1] or word.text
    tail = word.text.rsplit("/", 1)[-1]
    literal_tail = word.single and "/" in word.text and not re.search(r"[$`*?\[{}~\\'\"]", tail)
    if literal_tail and tail:  # "$HOME"/bin/tool: the directory is unknown, the name is not
        return tail
    raise Unknowable(
        f"its program {word.text!r} is known only when the shell runs (a variable, expansion, command "
        "substitution or glob); write the program's name out"
    )


def _wrapped_program(name: str, wrapper: Wrapper, args: tuple[Word, ...]) -> tuple[Word, ...] | None:
    """The words from the program a wrapper runs on (None when it runs none), its options read as
    the wrapper reads them. Unknowable for an option it does not list, or one that makes it run
    what crew does not read; _NoProgram for one with which it runs none."""
    i = 0
    operands = wrapper.operands
    options = True
    while i < len(args):
        arg = args[i]
        if not arg.known:
            raise Unknowable(f"{name} is given {arg.text!r}, known only when the shell runs, before its program")
        text = arg.text
        if wrapper.arch and i == 0 and not text.startswith("-"):  # setarch ARCH [options] program
            i += 1
        elif options and text == "--":
            options, i = False, i + 1
        elif options and text.startswith("-") and (len(text) > 1 or wrapper.dash):
            split, used = _option(name, wrapper, args, i)
            if split is None:
                i += used
            else:  # env -S: the string's words in its place, read on as env's own
                args, i = (*split, *args[i + used :]), 0
        elif wrapper.assignments and "=" in text:  # env: NAME=value, whatever NAME holds
            _check_exported(text.partition("=")[0], name)
            i += 1
        elif operands:
            operands, i = operands - 1, i + 1
        else:
            return args[i:]
    if wrapper.shell:
        raise Unknowable(f"{name} without a program runs a shell that reads commands from its input")
    return None


def _option(name: str, wrapper: Wrapper, args: tuple[Word, ...], i: int) -> tuple[list[Word] | None, int]:
    """The option word at `i` (a long one, or a cluster of short ones): the words a splitting
    option makes (else None), and how many words it takes (its value may be the next)."""
    text = args[i].text
    if wrapper.numbers and text[1:].lstrip("-").isdigit():  # nice -10
        return None, 1
    if text.startswith("--"):
        option = _long_option(name, wrapper, text)
        _allowed(name, wrapper, option)
        valued = option[2:] in wrapper.long_valued and "=" not in text
        if option in wrapper.splits:
            return _split(
                name, option, text.partition("=")[2] if "=" in text else _value(name, option, args, i)
            ), 1 + valued
        return None, 1 + valued
    for n, letter in enumerate(text[1:] or "-", 1):
        option = f"-{letter}" if text != "-" else "-"
        _allowed(name, wrapper, option)
        attached = text[n + 1 :]
        if option in wrapper.splits:
            return _split(name, option, attached or _value(name, option, args, i)), 1 + (not attached)
        if letter in wrapper.valued:
            return None, 1 + (not attached)  # the value is the next word unless it follows the letter
        if letter in wrapper.attached:
            return None, 1
        if letter not in wrapper.flags and text != "-":
            raise Unknowable(f"{name} {text}: crew does not know the option {option} of {name}")
    return None, 1


def _long_option(name: str, wrapper: Wrapper, text: str) -> str:
    """`--sig=KILL` → `--signal`: the long option `text` names, as getopt reads it (a unique prefix)."""
    given = text[2:].partition("=")[0]
    known = wrapper.long_flags | wrapper.long_valued | {o[2:] for o in HELP}
    if given in known:
        return f"--{given}"
    matching = sorted(option for option in known if option.startswith(given))
    if len(matching) != 1:
        raise Unknowable(f"{name} {text}: crew does not know this option of {name}")
    return f"--{matching[0]}"


def _allowed(name: str, wrapper: Wrapper, option: str) -> None:
    """An option that runs nothing ends the reading (`_NoProgram`); one crew cannot follow is refused."""
    if option in wrapper.refused:
        raise Unknowable(f"{name} {option} runs what crew does not read")
    if option in wrapper.runs_none or option in HELP:
        raise _NoProgram


def _value(name: str, option: str, args: tuple[Word, ...], i: int) -> str:
    if i + 1 >= len(args) or not args[i + 1].known:
        raise Unknowable(f"{name} {option} is given a value known only when the shell runs")
    return args[i + 1].text


def _split(name: str, option: str, value: str) -> list[Word]:
    """The arguments env -S makes of a string: split at blanks when it holds nothing else it would
    read (quotes, escapes, `${VAR}`, `#`)."""
    if re.search(r"[\\'\"$#]", value):
        raise Unknowable(f"{name} {option} splits a string with quotes, escapes or variables, which crew does not read")
    return [Word(word, word) for word in value.split()]


class _NoProgram(Exception):
    """An option with which the wrapper runs no program."""


def _check_exported(name: str, where: str) -> None:
    """A variable a wrapper puts in the environment (`env NAME=value`): any name, but not one that
    changes what commands run, nor a function bash imports from it."""
    if name.startswith(FUNCTION_EXPORT) or name.endswith("%%"):
        raise Unknowable(f"{where} exports {name}, which bash takes for a function that runs what crew does not read")
    if name in CODE_VARIABLES:
        raise Unknowable(f"{where} sets {name}, which changes what commands run")


def _check_name(name: str, where: str) -> None:
    if not NAME.fullmatch(name):
        raise Unknowable(f"{where} is given a variable name known only when the shell runs, or with a subscript")
    if name in CODE_VARIABLES:
        raise Unknowable(f"{where} sets {name}, which changes what commands run")


def _check_namer(program: str, args: tuple[Word, ...]) -> None:
    """The words a builtin takes as variable names must be plain names (no subscript, nothing computed)."""
    valued, naming, operands_are_names, nth = NAMERS[program]
    names: list[Word] = []
    operands: list[Word] = []
    i = 0
    while i < len(args):
        text = args[i].text if args[i].known else ""
        if operands or not text.startswith("-") or text == "-":
            operands.append(args[i])
        elif program in ("mapfile", "readarray") and "C" in text:
            raise Unknowable(f"{program} -C runs a command")
        else:
            for n, letter in enumerate(text[1:], 1):
                if letter in valued:
                    attached = text[n + 1 :]
                    value = Word(attached, attached) if attached else args[i + 1] if i + 1 < len(args) else None
                    if letter in naming and value is not None:
                        names.append(value)
                    i += not attached
                    break
        i += 1
    if operands_are_names:
        names += operands
    elif nth is not None and len(operands) > nth:
        names.append(operands[nth])
    for word in names:
        _check_name(word.text if word.known else "", program)


def _extra_words(redirect: Node) -> list[Node]:
    """Words the grammar hangs on a redirection that bash gives the command (`ls >f rm` → rm)."""
    if redirect.type == "heredoc_redirect":
        nested = [w for r in redirect.children_by_field_name("redirect") for w in _extra_words(r)]
        return [*redirect.children_by_field_name("argument"), *nested]
    return redirect.children_by_field_name("destination")[1:]


def _contents_only(string: Node) -> bool:
    """Whether a "…" string holds text only (no expansion or substitution)."""
    return all(child.type == "string_content" for child in string.named_children)


def _opens(node: Node, token: str) -> bool:
    return node.child_count > 0 and node.children[0].type == token


def _descendants(node: Node) -> Iterator[Node]:
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(current.children))
