"""Blocks of a Markdown file that a command writes: between two markers, the opening one naming
the command and a digest of the block, so a hand edit of a generated table is found (the docs
tests check every block) and the command alone writes it again.

    <!-- models-matrix:begin (written by nox -s matrix; sha256 0123456789abcdef) -->
    | the table | ... |
    <!-- models-matrix:end -->
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from patcher.errors import PatcherError

DIGEST_LENGTH = 16
"""Hex digits of the block's SHA-256 that its opening marker carries."""

BLOCK = re.compile(
    r"<!-- (?P<name>[a-z][a-z0-9-]*):begin \(written by (?P<writer>[^;()]+?)"
    r"(?:; sha256 (?P<digest>[0-9a-f]+))?\) -->\n(?P<body>.*?)<!-- (?P=name):end -->",
    re.DOTALL,
)


def digest(body: str) -> str:
    """The digest a block's opening marker carries: of its text, line ends as written."""
    return hashlib.sha256(body.encode()).hexdigest()[:DIGEST_LENGTH]


@dataclass(frozen=True)
class Block:
    """One generated block of a file: its name, the command that writes it, its text."""

    name: str
    writer: str
    body: str
    recorded: str | None
    """The digest its marker carries; None where the marker has none (never written signed)."""

    @property
    def edited(self) -> bool:
        """Whether the text is not what the command wrote: a hand edit, or no digest at all."""
        return self.recorded != digest(self.body)


def blocks(text: str) -> list[Block]:
    """Every generated block of ``text``, in order."""
    return [Block(m["name"], m["writer"], m["body"], m["digest"]) for m in BLOCK.finditer(text)]


def problems(text: str, where: str) -> list[str]:
    """A line for each block of ``text`` whose text is not what its command wrote."""
    return [
        f"{where}: the {b.name} block was edited by hand; run {b.writer} to write it again"
        for b in blocks(text)
        if b.edited
    ]


def splice(text: str, name: str, writer: str, body: str) -> str:
    """``text`` with the block ``name`` written anew: ``body`` between its markers, the opening
    marker naming ``writer`` and carrying the body's digest. The markers must be there already
    (a file says where its generated part goes); one line if not."""
    begin = f"<!-- {name}:begin (written by "
    end = f"<!-- {name}:end -->"
    start = text.find(begin)
    close = text.find(" -->\n", start) if start >= 0 else -1
    stop = text.find(end, close) if close >= 0 else -1
    if start < 0 or close < 0 or stop < 0:
        raise PatcherError(f"no {begin}...) --> ... {end} markers to write the {name} table in")
    body = body if body.endswith("\n") else body + "\n"
    marker = f"{begin}{writer}; sha256 {digest(body)}) -->\n"
    return text[:start] + marker + body + text[stop:]
