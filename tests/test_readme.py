"""README.md is an executable document: every shell, Python and transcript block runs as written.

The README's fenced blocks are run section by section (one test per ``##`` section, blocks in
order, so a block may use what an earlier block of its section made), with the working folder
a fresh temporary one that links every top-level entry of the repository: paths such as
``examples/digits/model`` resolve to the repository's own files, and what a block writes
beside them (``small.tgz``, ``out/``) lands in the temporary folder, not in the clone.
``nnefx`` and ``python`` on the ``PATH`` are this interpreter with this checkout's sources.

* ``sh`` blocks run one command per line (``\\`` continues a line): a plain ``nnefx ...``
  line through ``nnefx.cli.main`` in this process (same argv, no interpreter start-up), any
  other line in bash; ``NAME=value`` lines set variables for the block's later lines.  Comment lines
  right after a command are its expected output: each must match a line the command printed
  (``...`` stands for any text).  A command is expected to exit 1 when that output shows an
  ``error:`` or its own comment starts with ``exit 1``, else 0.
* ``python`` blocks of a section run in one namespace, in order, as a reader pasting them into
  one interpreter would; any exception fails the test, and a bare expression whose comment
  is a Python literal (``g.tensors["y"].shape   # (None, 4)``) must have that value, and a
  ``print(...)   # literal`` must print it (a float to the digits shown).
* ``text`` blocks whose lines start with ``$ `` are transcripts: each command runs and its
  output (stdout; stdout and stderr when it fails) must be the lines shown.  Times and rates (numbers before ``ms``, ``images/s``, the
  profile table's time columns, ``e-NN`` differences) vary by machine and are compared as
  ``#``; profile rows are compared as a set (their order follows the times).  A transcript
  with a ``...`` line shows part of the output: its lines must all occur.

A block preceded by ``<!-- readme-test: skip: REASON -->`` is not run (say why: it installs
software, or needs a machine the tests do not have).  Keep blocks quick: the whole README
runs in about 30 s.
"""

from __future__ import annotations

import ast
import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


@dataclass
class Block:
    lang: str
    line: int          # 1-based line of the opening fence
    text: str
    skip: str | None   # the reason given in a skip marker


def _blocks() -> dict[str, list[Block]]:
    sections: dict[str, list[Block]] = {}
    section = "(top)"
    lines = README.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("## "):
            section = lines[i][3:].strip()
        fence = re.match(r"```(\w+)\s*$", lines[i])
        if fence:
            before = next((x for x in reversed(lines[:i]) if x.strip()), "")
            marker = re.match(r"<!--\s*readme-test:\s*skip:\s*(.*?)\s*-->", before)
            start = i
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                i += 1
            sections.setdefault(section, []).append(
                Block(fence.group(1), start + 1, "\n".join(lines[start + 1:i]), marker and marker.group(1)))
        i += 1
    return sections


SECTIONS = _blocks()


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """A folder whose top-level entries link the repository's, with nnefx/python on PATH."""
    work = tmp_path / "clone"
    work.mkdir()
    for entry in ROOT.iterdir():
        if entry.name not in (".git", ".venv"):
            (work / entry.name).symlink_to(entry)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, args in (("nnefx", "-m nnefx"), ("python", ""), ("python3", "")):
        script = bin_dir / name
        script.write_text(f'#!/bin/sh\nexec "{sys.executable}" {args} "$@"\n')
        script.chmod(0o755)
    src = str(ROOT / "src")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("PYTHONPATH", src + os.pathsep + os.environ.get("PYTHONPATH", ""))
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.chdir(work)
    return work


# --- shell blocks ---------------------------------------------------------------------------

@dataclass
class Command:
    line: int
    text: str
    expected: list[str]
    rc: int


def _commands(block: Block) -> list[Command]:
    commands: list[Command] = []
    pending = ""
    for k, raw in enumerate(block.text.splitlines()):
        line = raw.rstrip()
        if not line.strip():
            continue
        if line.lstrip().startswith("#"):
            if commands and not pending:
                commands[-1].expected.append(line.lstrip()[1:].strip())
            continue
        pending += line[:-1] + " " if line.endswith("\\") else line
        if line.endswith("\\"):
            continue
        comment = pending.split(" # ", 1)[1].strip() if " # " in pending else ""
        commands.append(Command(block.line + 1 + k, pending, [], 1 if comment.startswith("exit 1") else 0))
        pending = ""
    for c in commands:
        if any(": error:" in e for e in c.expected):
            c.rc = 1
    return commands


def _pattern(expected: str) -> re.Pattern:
    parts = [re.escape(p.strip()) for p in expected.split("...")]
    return re.compile(r"\s*" + r".*".join(parts) + r"\s*$")


_SHELL_SYNTAX = re.compile(r"[|<>;&`()*?]")


def _run(command: str, variables: dict[str, str]) -> tuple[str, str, int]:
    """(stdout, stderr, exit status) of one command line.

    A plain ``nnefx ...`` line (no pipes, redirections or globs) runs in this process through
    :func:`nnefx.cli.main` with ``$VAR``s expanded as bash would: the same argv, the same
    code, without a second or so of interpreter start-up per command.  Anything else runs
    in bash.
    """
    line = command.split(" # ", 1)[0].strip()
    expanded = re.sub(r"\$(\w+)|\$\{(\w+)\}", lambda m: variables.get(m.group(1) or m.group(2), ""), line)
    argv = shlex.split(expanded)
    if argv and argv[0] == "nnefx" and not _SHELL_SYNTAX.search(expanded):
        from nnefx.cli import main

        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main(argv[1:])
            except SystemExit as exc:
                rc = exc.code if isinstance(exc.code, int) else 1
        return out.getvalue(), err.getvalue(), rc
    prefix = "".join(f"{k}={shlex.quote(v)}\n" for k, v in variables.items())
    done = subprocess.run(["bash", "-c", prefix + line], capture_output=True, text=True, timeout=300)
    return done.stdout, done.stderr, done.returncode


def _run_shell(block: Block) -> None:
    variables: dict[str, str] = {}
    for c in _commands(block):
        assignment = re.fullmatch(r"(\w+)=(\S+)", c.text.split(" # ", 1)[0].strip())
        if assignment:
            variables[assignment.group(1)] = assignment.group(2)
            continue
        stdout, stderr, rc = _run(c.text, variables)
        printed = stdout + stderr
        where = f"README.md:{c.line}: `{c.text}`"
        assert "Traceback" not in printed, f"{where} printed a traceback:\n{printed}"
        assert rc == c.rc, f"{where} exited {rc}, the README implies {c.rc}:\n{printed}"
        lines = printed.splitlines()
        for e in c.expected:
            pat = _pattern(e)
            assert any(pat.match(x) for x in lines), f"{where}: no output line matches '# {e}':\n{printed}"


# --- transcripts ----------------------------------------------------------------------------

_TIMED = re.compile(r"[\d,]+(?:\.\d+)?(?=\s*(?:ms\b|images/s))|\d+(?:\.\d+)?e[-+]\d+")
_PROFILE_ROW = re.compile(r"^(\S+|\(.*\))\s+(\d+)\s+([\d.]+)(\s+[\d.]+\s+[\d.]+%)?$")


def _normal(lines: list[str]) -> list[str]:
    out = []
    for line in lines:
        line = _TIMED.sub("#", line.rstrip())
        m = _PROFILE_ROW.match(line)
        if m:
            line = f"{m.group(1)} {m.group(2)} #" + (" # #%" if m.group(4) else "")
        out.append(" ".join(line.split()))
    return [x for x in out if x and not x.startswith(("blas:", "hint:"))]


def _run_transcript(block: Block) -> None:
    runs: list[tuple[str, list[str]]] = []
    for line in block.text.splitlines():
        if line.startswith("$ "):
            runs.append((line[2:], []))
        elif runs:
            runs[-1][1].append(line)
    for command, shown in runs:
        stdout, stderr, rc = _run(command, {})
        # stdout is the transcript (stderr has progress bars), unless the command failed
        printed = stdout if rc == 0 else stdout + stderr
        where = f"README.md:{block.line}: `$ {command}`"
        assert "Traceback" not in stderr, f"{where} printed a traceback:\n{stderr}"
        assert rc == 0 or any("error:" in x for x in shown), f"{where} exited {rc}:\n{printed}"
        want, got = _normal(shown), _normal(printed.splitlines())
        if "..." in want:
            missing = [w for w in want if w != "..." and w not in got]
            assert not missing, f"{where}: lines not printed: {missing}\nprinted:\n{printed}"
        else:
            assert sorted(want) == sorted(got), (f"{where}: the output shown is not the real one\n"
                                                 f"shown:\n" + "\n".join(want) + "\nreal:\n" + "\n".join(got))


# --- Python blocks ---------------------------------------------------------------------------

def _run_python(block: Block, namespace: dict) -> None:
    """Run a block statement by statement; a bare expression whose comment is a Python
    literal (``g.tensors["y"].shape   # (None, 4)``) must evaluate to that literal."""
    tree = ast.parse(block.text)
    lines = block.text.splitlines()
    for node in tree.body:
        end, end_col = node.end_lineno or node.lineno, node.end_col_offset or 0
        module = ast.Module([node], [])
        ast.increment_lineno(module, block.line)  # README's own line numbers in any traceback
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            if not isinstance(node, ast.Expr):
                exec(compile(module, "README.md", "exec"), namespace)  # noqa: S102 - the README's own code
                continue
            value = eval(compile(ast.Expression(node.value), "README.md", "eval"), namespace)  # noqa: S307
        line = lines[end - 1]
        comment = line[end_col:].split("#", 1)[1].strip() if "#" in line[end_col:] else ""
        try:
            shown = ast.literal_eval(comment)
        except (ValueError, SyntaxError):
            continue  # prose, not a value
        where = f"README.md:{block.line + end}"
        if isinstance(node.value, ast.Call) and getattr(node.value.func, "id", "") == "print":
            text = printed.getvalue().strip()
            if isinstance(shown, float):  # a figure shown rounded: within its last digit
                assert float(text) == pytest.approx(shown, rel=0.01, abs=1e-12), f"{where}: printed {text}, shown {comment}"
            else:
                assert text == comment, f"{where}: printed {text}, the README shows {comment}"
            continue
        same = np.array_equal(value, shown) if isinstance(value, np.ndarray) else value == shown
        assert same, f"{where}: the value is {value!r}, the README shows {comment}"


# --- the tests ------------------------------------------------------------------------------

def test_readme_has_runnable_blocks():
    langs = {b.lang for blocks in SECTIONS.values() for b in blocks}
    assert {"sh", "python", "text"} <= langs, langs
    unknown = {b.lang for blocks in SECTIONS.values() for b in blocks} - {"sh", "python", "text"}
    assert not unknown, f"README blocks in languages this test does not run: {unknown}"


@pytest.mark.parametrize("section", [s for s, bs in SECTIONS.items() if any(b.skip is None for b in bs)])
def test_readme_section(section, workdir):
    namespace: dict = {"__name__": "__readme__"}
    for block in SECTIONS[section]:
        if block.skip is not None:
            continue
        if block.lang == "sh":
            _run_shell(block)
        elif block.lang == "python":
            _run_python(block, namespace)
        elif block.lang == "text" and block.text.startswith("$ "):
            _run_transcript(block)
