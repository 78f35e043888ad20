"""The options several commands take, each declared once: one name, one metavar, one help, one
meaning (issue 29). A command adds one with ``OPTION.add(parser)``; what may differ per command
is whether it is required, the type its value is read as, its choices and default where a
command serves one distribution, and the modes it goes with (``patcher.cli.modes``).

Old spellings live on as hidden aliases (``deprecated``): they still work, and say once on
stderr what to type instead.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from patcher.cli.modes import only_with

ADJUSTABLE = frozenset({"required", "type", "choices", "default", "dest"})
"""What a command may set on a shared option; never its name, metavar or help."""


class Shared:
    def __init__(self, *flags: str, **declared: Any) -> None:
        self.flags = flags
        self.declared = declared

    def add(
        self,
        parser: argparse.ArgumentParser | argparse._MutuallyExclusiveGroup,
        *,
        modes: tuple[str, ...] = (),
        **adjusted: Any,
    ) -> argparse.Action:
        unknown = set(adjusted) - ADJUSTABLE
        assert not unknown, f"{self.flags[0]}: {sorted(unknown)} are declared once, here"
        action = parser.add_argument(*self.flags, **{**self.declared, **adjusted})
        return only_with(action, *modes)


VLLM = Shared("--vllm", metavar="VERSION", help="a vLLM release on the package index (--package)")
PYTHON = Shared(
    "--python",
    metavar="PATH",
    help="with --installed: the interpreter of the environment whose vLLM is read or patched "
    "(default: the activated venv's, $VIRTUAL_ENV, else patcher's own)",
)
DRAFTER = Shared(
    "--drafter",
    metavar="PATH",
    help="the EAGLE-3 drafter: its folder (config.json), or a hub id where vLLM fetches it",
)
SINCE = Shared("--since", metavar="VERSION", help="the releases from VERSION on")
INDEX_URL = Shared(
    "--index-url",
    metavar="URL",
    help="the package index (default: $PIP_INDEX_URL, else the index pip is configured with)",
)
PLATFORM = Shared(
    "--platform",
    choices=["x86_64", "aarch64"],
    help="which release wheel to read (default: this machine's)",
)
JSON = Shared("--json", metavar="FILE", help="the report as JSON (- for stdout)")

SHARED = (VLLM, PYTHON, DRAFTER, SINCE, INDEX_URL, PLATFORM, JSON)


class Deprecated(argparse.Action):
    """An old spelling: stores into the new option's ``dest``, and says what to type instead."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        self.instead: str = kwargs.pop("instead")
        super().__init__(option_strings, dest, help=argparse.SUPPRESS, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        print(f"patcher: {option_string} is deprecated here: use {self.instead}", file=sys.stderr)
        setattr(namespace, self.dest, values)


def deprecated(
    parser: argparse.ArgumentParser, old: str, new: argparse.Action, **kwargs: Any
) -> None:
    """``old`` kept as a hidden alias of the option ``new``, with a one-line note when used."""
    parser.add_argument(
        old, dest=new.dest, instead=new.option_strings[0], action=Deprecated,
        default=argparse.SUPPRESS,
        **kwargs,
    )  # fmt: skip
