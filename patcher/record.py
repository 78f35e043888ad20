"""A distribution's RECORD: rows of path, hash and size, in the format the wheel spec fixes.

Rewritten one row at a time, so every row patcher does not touch keeps its exact bytes,
line ending included (pip writes ``\\r\\n``, other installers ``\\n``).
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

PROVENANCE = "patcher-provenance.json"
"""The file in a dist-info that says patcher patched this distribution, and how."""


def record_hash(data: bytes) -> str:
    """``sha256=`` and the urlsafe base64 of the digest, without padding."""
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return f"sha256={digest.decode()}"


@dataclass(frozen=True)
class Row:
    path: str
    hash: str  # empty where the installer recorded none (RECORD itself, most .pyc files)
    size: str

    @classmethod
    def of(cls, path: str, data: bytes) -> Row:
        return cls(path, record_hash(data), str(len(data)))

    def problem(self, root: Path) -> str | None:
        """Why the file under ``root`` does not match this row, or None if it does."""
        file = root / self.path
        if not file.is_file():
            return f"{self.path}: listed in RECORD but missing"
        if not self.hash:
            return None
        data = file.read_bytes()
        if self.size and str(len(data)) != self.size:
            return f"{self.path}: {len(data)} bytes, RECORD says {self.size}"
        if record_hash(data) != self.hash:
            return f"{self.path}: hash differs from RECORD"
        return None


def lines(record: bytes) -> Iterator[tuple[str, Row | None]]:
    """Each line with its ending, and its row (None for a blank line)."""
    for line in record.decode("utf-8").splitlines(keepends=True):
        fields = next(csv.reader([line]), [])
        yield line, Row(*[*fields, "", ""][:3]) if fields else None


def rows(record: bytes) -> list[Row]:
    return [row for _, row in lines(record) if row is not None]


def format_row(row: Row, ending: str) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator=ending).writerow([row.path, row.hash, row.size])
    return out.getvalue()


def rewrite(record: bytes, replace: Mapping[str, Row | None], add: list[Row]) -> bytes:
    """RECORD with rows replaced (or dropped, for None) by path and ``add`` appended, all in
    the file's own line ending; every other line keeps its bytes."""
    kept: list[str] = []
    ending = "\n"
    for line, row in lines(record):
        ending = line[len(line.rstrip("\r\n")) :] or ending
        if row is None or row.path not in replace:
            kept.append(line)
        elif (new := replace[row.path]) is not None:
            kept.append(format_row(new, ending))
    if kept and not kept[-1].endswith(("\n", "\r")):
        kept[-1] += ending
    return ("".join(kept) + "".join(format_row(row, ending) for row in add)).encode("utf-8")
