"""RECORD, the list of a distribution's files with their hashes and sizes: one model of it.

A wheel's members are verified against its RECORD before anything is copied
(``outputs.verified_members``), an installed RECORD is read for the files of vLLM
(``sources.installation``) and rewritten a row at a time (``outputs.site_packages``); all of them
read rows here. As in pypa/installer's ``records.py``,
a row's hash is parsed when the row is read, and a RECORD with rows that are not rows is refused
with every such row named at once.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath, PureWindowsPath

from patcher.errors import PatcherError

PROVENANCE = "patcher-provenance.json"
"""The file in a dist-info that says patcher patched this distribution, and how; RECORD lists it."""

SHOWN_ISSUES = 5
"""How many of a RECORD's bad rows its one-line error names; the error keeps them all."""


def encoded(digest: bytes) -> str:
    """A digest as RECORD writes it: urlsafe base64, without padding."""
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


@dataclass(frozen=True)
class Hash:
    """A RECORD hash, ``name=digest``: a hashlib algorithm every Python has, and the digest."""

    name: str
    value: str

    @classmethod
    def parse(cls, text: str) -> Hash:
        """The hash ``text`` gives, or a ValueError saying why it is none."""
        name, _, value = text.partition("=")
        if name not in hashlib.algorithms_guaranteed or not value:
            raise ValueError(f"hash {text!r:.40} is not name=digest with a hashlib algorithm")
        return cls(name, value)

    @classmethod
    def of(cls, data: bytes) -> Hash:
        """The sha256 of ``data``, the hash patcher writes."""
        return cls("sha256", encoded(hashlib.sha256(data).digest()))

    def new(self) -> hashlib._Hash:
        """An empty hash object of this algorithm, for data read in chunks."""
        return hashlib.new(self.name)

    def validate(self, data: bytes) -> bool:
        digest = self.new()
        digest.update(data)
        return self.matches(digest)

    def matches(self, digest: hashlib._Hash) -> bool:
        """Whether ``digest``, fed the file's bytes, is this hash."""
        return encoded(digest.digest()) == self.value

    def __str__(self) -> str:
        return f"{self.name}={self.value}"


class InvalidRow(ValueError):
    """A row whose elements are not a path, a hash and a size: every issue with it."""

    def __init__(self, issues: list[str]) -> None:
        super().__init__("; ".join(issues))
        self.issues = issues


@dataclass(frozen=True)
class RecordRow:
    path: str
    hash: Hash | None  # None where the installer recorded none (RECORD itself, most .pyc files)
    size: int | None

    @classmethod
    def of(cls, path: str, data: bytes) -> RecordRow:
        return cls(path, Hash.of(data), len(data))

    @classmethod
    def from_elements(cls, path: object, hash: object, size: object) -> RecordRow:
        """The row RECORD's three strings give; InvalidRow naming each one that is wrong."""
        issues = []
        if not isinstance(path, str) or not path:
            issues.append(f"path {path!r:.80} is not a file's path")
        parsed: Hash | None = None
        if not isinstance(hash, str):
            issues.append(f"hash {hash!r:.40} is not a string")
        elif hash:
            try:
                parsed = Hash.parse(hash)
            except ValueError as error:
                issues.append(str(error))
        if not isinstance(size, str) or not (size == "" or (size.isascii() and size.isdigit())):
            issues.append(f"size {size!r:.20} is not a number of bytes")
        if issues:
            raise InvalidRow(issues)
        assert isinstance(path, str) and isinstance(size, str)
        return cls(path, parsed, int(size) if size else None)

    def elements(self) -> tuple[str, str, str]:
        """The row as RECORD writes it."""
        return (
            self.path,
            "" if self.hash is None else str(self.hash),
            "" if self.size is None else str(self.size),
        )

    def problem(self, root: Path) -> str | None:
        """Why the file under ``root`` does not match this row, or None if it does."""
        file = root / self.path
        if not file.is_file():
            return f"{self.path}: listed in RECORD but missing"
        if self.hash is None:
            return None
        data = file.read_bytes()
        if self.size is not None and len(data) != self.size:
            return f"{self.path}: {len(data)} bytes, RECORD says {self.size}"
        if not self.hash.validate(data):
            return f"{self.path}: hash differs from RECORD"
        return None


class InvalidRecord(PatcherError):
    """A RECORD that is not rows of path, hash and size: every bad row, in one line."""

    def __init__(self, where: str, issues: list[str]) -> None:
        more = len(issues) - SHOWN_ISSUES
        shown = "; ".join(issues[:SHOWN_ISSUES]) + (f"; and {more} more" if more > 0 else "")
        super().__init__(f"{where}: RECORD {shown}")
        self.issues = issues


def text_of(data: bytes, where: str) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InvalidRecord(where, [f"is not UTF-8 text ({error.reason})"]) from error
    if "\0" in text:
        raise InvalidRecord(where, ["holds binary data (a NUL byte)"])
    return text


def row_of(fields: list[str], number: int, issues: list[str]) -> RecordRow | None:
    """The row of one CSV line's ``fields``, or None with its issues appended."""
    if len(fields) != 3:
        issues.append(f"row {number} is not path,hash,size: {fields!r:.80}")
        return None
    try:
        return RecordRow.from_elements(*fields)
    except InvalidRow as error:
        issues += [f"row {number}: {issue}" for issue in error.issues]
        return None


def read_record(data: bytes, where: str) -> dict[str, RecordRow]:
    """RECORD's rows by path; InvalidRecord naming every row that is not one."""
    text = text_of(data, where)
    rows: dict[str, RecordRow] = {}
    issues: list[str] = []
    try:
        for number, fields in enumerate(csv.reader(io.StringIO(text, newline="")), 1):
            if fields and (row := row_of(fields, number, issues)) is not None:
                rows[row.path] = row
    except csv.Error as error:
        issues.append(f"is not CSV ({error})")
    if issues:
        raise InvalidRecord(where, issues)
    return rows


def lines(record: bytes, where: str) -> list[tuple[str, RecordRow | None]]:
    """Each line with its ending, and its row (None for a blank line)."""
    issues: list[str] = []
    found: list[tuple[str, RecordRow | None]] = []
    for number, line in enumerate(text_of(record, where).splitlines(keepends=True), 1):
        fields = next(csv.reader([line]), [])
        found.append((line, row_of(fields, number, issues) if fields else None))
    if issues:
        raise InvalidRecord(where, issues)
    return found


def format_row(row: RecordRow, ending: str) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator=ending).writerow(row.elements())
    return out.getvalue()


def rewrite(
    record: bytes, replace: Mapping[str, RecordRow | None], add: list[RecordRow], where: str
) -> bytes:
    """RECORD with rows replaced (or dropped, for None) by path and ``add`` appended, all in
    the file's own line ending; every other line keeps its bytes."""
    kept: list[str] = []
    ending = "\n"
    for line, row in lines(record, where):
        ending = line[len(line.rstrip("\r\n")) :] or ending
        if row is None or row.path not in replace:
            kept.append(line)
        elif (new := replace[row.path]) is not None:
            kept.append(format_row(new, ending))
    if kept and not kept[-1].endswith(("\n", "\r")):
        kept[-1] += ending
    return ("".join(kept) + "".join(format_row(row, ending) for row in add)).encode("utf-8")


def inside(root: Path, member: str, what: str) -> Path:
    """``root / member``, where ``member`` (a path read from RECORD, a provenance or a journal)
    stays inside ``root``: relative, without ``..``, and not led out by a symlink on the way.
    Anything else is refused, before anything is read or written through it."""
    parts = PurePosixPath(member).parts if isinstance(member, str) else ()
    if (
        not parts
        or member.startswith(("/", "\\"))
        or PureWindowsPath(member).drive
        or ".." in parts
        or "\0" in member
    ):
        raise PatcherError(f"refusing {what} path {member!r:.200}: it leads outside {root}")
    path = root / member
    top = os.path.realpath(root)
    if os.path.commonpath([top, os.path.realpath(path)]) != top:
        raise PatcherError(
            f"refusing {what} path {member!r:.200}: a symlink leads it outside {root}"
        )
    return path
