"""The README and docs/ hold: every relative link and anchor resolves, every
`bufferhouse` command in their `sh` blocks uses commands, queries, parameters
and options that exist, the README's demo runs verbatim on the test data, and
the docs build as a site (mkdocs build --strict)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

from bufferhouse import queries
from bufferhouse.cli import main
from tests.conftest import ROOT

PAGES = sorted([ROOT / "README.md", ROOT / "CONTRIBUTING.md", *(ROOT / "docs").glob("*.md")])
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} +(.+?) *$", re.M)


def prose(text: str) -> str:
    """The text without fenced code blocks and inline code (no links there)."""
    text = FENCE.sub("", text)
    return re.sub(r"`[^`\n]*`", "", text)


def slug(heading: str) -> str:
    """A heading's anchor as GitHub and mkdocs both make it (for the headings we write)."""
    text = heading.replace("`", "").replace("**", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    return {slug(h) for h in HEADING.findall(FENCE.sub("", page.read_text(encoding="utf-8")))}


def test_every_relative_link_and_anchor_resolves():
    broken = []
    for page in PAGES:
        for target in LINK.findall(prose(page.read_text(encoding="utf-8"))):
            if re.match(r"[a-z]+:", target):
                continue  # a URL
            path, _, anchor = target.partition("#")
            resolved = (page.parent / path).resolve() if path else page
            if not resolved.exists():
                broken.append(f"{page.name}: {target} (no file {resolved})")
            elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
                broken.append(f"{page.name}: {target} (no heading #{anchor})")
    assert not broken, "\n".join(broken)
    assert len(PAGES) > 10


def test_the_slug_rule():
    assert slug("What `memory_analysis()` says, from the warehouse") == (
        "what-memory_analysis-says-from-the-warehouse"
    )
    assert slug("14. Out-of-memory messages") == "14-out-of-memory-messages"


@dataclass(frozen=True)
class Example:
    page: str
    line: str
    words: list[str]


def sh_examples() -> list[Example]:
    """Every `bufferhouse ...` command of the `sh` blocks of the README and docs/,
    split at pipes and &&, with its comment and placeholders ([--db X], ...) dropped."""
    out = []
    for page in PAGES:
        for lang, block in FENCE.findall(page.read_text(encoding="utf-8")):
            if lang != "sh":
                continue
            for line in block.splitlines():
                words = shlex.split(line.replace("[", " ").replace("]", " "), comments=True)
                command: list[str] = []
                for word in [*words, "&&"]:
                    if word in ("&&", "|", ";"):
                        if command and Path(command[0]).name == "bufferhouse":
                            out.append(Example(page.name, line, command[1:]))
                        command = []
                    else:
                        command.append(word)
    return out


def _check_example(example: Example) -> list[str]:
    """What in one example command does not exist: the command, an option, a query or
    one of its parameters."""
    ctx = click.Context(main)
    command: click.Command = main
    words = [w for w in example.words if w != "..."]
    while isinstance(command, click.Group) and words and not words[0].startswith("-"):
        sub = command.get_command(ctx, words[0])
        if sub is None:
            return [f"no command {words[0]!r}"]
        command, words = sub, words[1:]
    options = {opt: p for p in command.params for opt in (*p.opts, *p.secondary_opts)}
    problems, args, params = [], [], []
    i = 0
    while i < len(words):
        word = words[i]
        if word.startswith("-") and not re.fullmatch(r"-\d.*", word):
            name, eq, value = word.partition("=")
            param = options.get(name)
            if param is None:
                problems.append(f"{command.name} has no option {name}")
            elif not getattr(param, "is_flag", False) and not eq:
                value = words[i + 1] if i + 1 < len(words) else ""
                i += 1
                if param.name == "params":
                    params.append(value.split("=", 1)[0])
        else:
            args.append(word)
        i += 1
    if command.name == "query" and args and not args[0].isupper():  # NAME: a placeholder
        try:
            known = {p.name for p in queries.get(args[0]).params}
        except Exception as exc:
            return [*problems, str(exc)]
        problems += [f"query {args[0]} has no parameter {p}" for p in params if p not in known]
    return problems


def test_every_example_command_uses_real_commands_and_options():
    examples = sh_examples()
    assert len(examples) > 40
    assert {e.page for e in examples} >= {"README.md", "inputs.md", "diff.md", "export.md"}
    problems = [f"{e.page}: {e.line}\n  {p}" for e in examples for p in _check_example(e)]
    assert not problems, "\n".join(problems)


def test_the_example_checker_catches_what_does_not_exist():
    def check(line: str) -> list[str]:
        return _check_example(Example("x", line, shlex.split(line)[1:]))

    assert check("bufferhouse query top-modules --top 5 -p peak=xla --db x.duckdb") == []
    assert check("bufferhouse query top-modules --nope 5") == ["query has no option --nope"]
    assert check("bufferhouse query top-modules -p nope=1") == [
        "query top-modules has no parameter nope"
    ]
    assert check("bufferhouse plot nope x") == ["no command 'nope'"]
    assert "no canned query 'nope'" in check("bufferhouse query nope")[0]


def _readme_block(marker: str) -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split(marker, 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


def test_the_readme_demo_runs_verbatim(tmp_path, fleet_db):
    """The run-command's bufferhouse steps (after its venv and pip install) and then the
    demo commands, verbatim, in a directory with the repository's tests/data, with
    `.venv/bin/bufferhouse` and `bufferhouse` running this checkout. The demo
    warehouse is the session's copy of the same ingest, so the run-command's ingest
    finds every module present (its own run is the slow tier's .ci/run)."""
    (tmp_path / "tests").symlink_to(ROOT / "tests")
    shutil.copy(fleet_db, tmp_path / "demo.duckdb")
    bindir = tmp_path / ".venv" / "bin"
    bindir.mkdir(parents=True)
    shim = bindir / "bufferhouse"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m bufferhouse.cli "$@"\n')
    shim.chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(ROOT),
        "COLUMNS": "200",
    }
    (run_command,) = _readme_block("<!-- run-command -->")
    steps = run_command.split(" && ")
    assert steps[0].startswith("python3 -m venv .venv") and "pip install" in steps[1]
    for line in [" && ".join(steps[2:]), *_readme_block("<!-- demo-commands")]:
        done = subprocess.run(
            ["bash", "-c", line], capture_output=True, text=True, env=env, cwd=tmp_path
        )
        assert done.returncode == 0, (line, done.stderr)
        assert done.stdout.strip(), line
    assert "jit_transformer_block" in done.stdout or "compiles" in done.stdout


def test_the_docs_site_builds_strict(tmp_path):
    pytest.importorskip("mkdocs")
    site = ["-f", str(ROOT / "mkdocs.yml"), "-d", str(tmp_path / "site")]
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", *site],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "site" / "format" / "index.html").exists()
