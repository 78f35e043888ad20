"""RECORD: a wheel's read strictly and every member checked against it; an installed
distribution's rewritten one row at a time.

Members are copied raw into the patched wheel, so this check is what stands between a garbled
download or file and a patched wheel that installs garbage. Checking 1.3 GB of members takes
tens of seconds, so a pass is remembered by the wheel's sha256: the same bytes pass again.
An installed RECORD is rewritten row by row, so every row patcher does not touch keeps its
exact bytes, line ending included (pip writes ``\r\n``, other installers ``\n``).
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
import zipfile
import zlib
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from patcher.cache import checked_dir, read_checked, write_checked
from patcher.errors import PatcherError

READ_CHUNK = 8 * 1024 * 1024
PROVENANCE = "patcher-provenance.json"
"""The file in a dist-info that says patcher patched this distribution, and how."""


def record_hash(data: bytes) -> str:
    """``sha256=`` and the urlsafe base64 of the digest, without padding."""
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return f"sha256={digest.decode()}"


def parse_record(data: bytes, where: str) -> dict[str, tuple[str, str]]:
    """RECORD's rows by path: (hash, size); a one-line error for rows that are not rows."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise PatcherError(f"{where}: RECORD is not UTF-8 text ({error.reason})") from error
    if "\0" in text:
        raise PatcherError(f"{where}: RECORD holds binary data (a NUL byte)")
    rows: dict[str, tuple[str, str]] = {}
    try:
        for number, row in enumerate(csv.reader(io.StringIO(text, newline="")), 1):
            if not row:
                continue
            if len(row) != 3:
                raise PatcherError(
                    f"{where}: RECORD row {number} is not path,hash,size: {row!r:.80}"
                )
            rows[row[0]] = (row[1], row[2])
    except csv.Error as error:
        raise PatcherError(f"{where}: RECORD is not CSV ({error})") from error
    return rows


def member_problem(archive: zipfile.ZipFile, info: zipfile.ZipInfo, row: tuple[str, str]) -> str:
    """Why the member's bytes disagree with its RECORD row, or "" if they agree."""
    algorithm, _, expected = row[0].partition("=")
    if algorithm not in hashlib.algorithms_guaranteed or not expected:
        return f"RECORD gives no usable hash for it ({row[0]!r:.40})"
    digest = hashlib.new(algorithm)
    size = 0
    try:
        with archive.open(info) as member:
            while chunk := member.read(READ_CHUNK):
                digest.update(chunk)
                size += len(chunk)
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as error:
        return f"its bytes are corrupt ({error})"
    actual = base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()
    if actual != expected:
        return f"its {algorithm} is not the one RECORD gives"
    if row[1] != str(size):
        return f"it has {size} bytes, RECORD says {row[1] or 'nothing'}"
    return ""


def check_source(path: Path, sha256: str, archive: zipfile.ZipFile, info_dir: str) -> None:
    """Refuse a source wheel any of whose members disagrees with its RECORD (hash and size),
    or is not listed in it; a pass is remembered by the wheel's ``sha256``."""
    passed = checked_dir("record-checked") / sha256
    if sha256 and read_checked(passed) == b"ok":
        return
    record = f"{info_dir}/RECORD"
    rows = parse_record(read_member(archive, archive.getinfo(record)), path.name)
    members = [i for i in archive.infolist() if not i.is_dir() and i.filename != record]
    unlisted = [i.filename for i in members if i.filename not in rows]
    if unlisted:
        raise PatcherError(f"{path.name}: member {unlisted[0]} is not listed in RECORD")
    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        biggest_first = sorted(members, key=lambda i: -i.file_size)
        problems = pool.map(lambda i: member_problem(archive, i, rows[i.filename]), biggest_first)
        for info, problem in zip(biggest_first, problems, strict=True):
            if problem:
                pool.shutdown(cancel_futures=True)
                raise PatcherError(f"{path.name}: member {info.filename}: {problem}")
    if sha256:
        write_checked(passed, b"ok")


def read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes:
    """The member's bytes, or a one-line error if the zip cannot give them (zlib.error too)."""
    try:
        return archive.read(info)
    except (zipfile.BadZipFile, zlib.error, EOFError) as error:
        raise PatcherError(f"member {info.filename} is corrupt ({error})") from error


@dataclass(frozen=True)
class RecordRow:
    path: str
    hash: str  # empty where the installer recorded none (RECORD itself, most .pyc files)
    size: str

    @classmethod
    def of(cls, path: str, data: bytes) -> RecordRow:
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


def lines(record: bytes) -> Iterator[tuple[str, RecordRow | None]]:
    """Each line with its ending, and its row (None for a blank line)."""
    for line in record.decode("utf-8").splitlines(keepends=True):
        fields = next(csv.reader([line]), [])
        yield line, RecordRow(*[*fields, "", ""][:3]) if fields else None


def format_row(row: RecordRow, ending: str) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator=ending).writerow([row.path, row.hash, row.size])
    return out.getvalue()


def rewrite(record: bytes, replace: Mapping[str, RecordRow | None], add: list[RecordRow]) -> bytes:
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
