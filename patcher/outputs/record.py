"""A wheel's members checked against its RECORD (``patcher.records``) before any is copied.

Members are copied raw into the patched wheel, so this check is what stands between a garbled
download or file and a patched wheel that installs garbage. Checking 1.3 GB of members takes
tens of seconds, so a pass is remembered by the wheel's sha256: the same bytes pass again.
"""

from __future__ import annotations

import os
import zipfile
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from patcher.cache import checked_dir, read_checked, write_checked
from patcher.errors import PatcherError
from patcher.progress import step
from patcher.records import RecordRow, read_record

READ_CHUNK = 8 * 1024 * 1024


def member_problem(archive: zipfile.ZipFile, info: zipfile.ZipInfo, row: RecordRow) -> str:
    """Why the member's bytes disagree with its RECORD row, or "" if they agree."""
    if row.hash is None:
        return "RECORD gives no hash for it"
    digest = row.hash.new()
    size = 0
    try:
        with archive.open(info) as member:
            while chunk := member.read(READ_CHUNK):
                digest.update(chunk)
                size += len(chunk)
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as error:
        return f"its bytes are corrupt ({error})"
    if not row.hash.matches(digest):
        return f"its {row.hash.name} is not the one RECORD gives"
    if row.size != size:
        return f"it has {size} bytes, RECORD says {'nothing' if row.size is None else row.size}"
    return ""


def verify_members(path: Path, sha256: str, archive: zipfile.ZipFile, info_dir: str) -> None:
    """Refuse a source wheel any of whose members disagrees with its RECORD (hash and size),
    or is not listed in it; a pass is remembered by the wheel's ``sha256``."""
    passed = checked_dir("record-checked") / sha256
    if sha256 and read_checked(passed) == b"ok":
        return
    record = f"{info_dir}/RECORD"
    rows = read_record(read_member(archive, archive.getinfo(record)), path.name)
    members = [i for i in archive.infolist() if not i.is_dir() and i.filename != record]
    unlisted = [i.filename for i in members if i.filename not in rows]
    if unlisted:
        raise PatcherError(f"{path.name}: member {unlisted[0]} is not listed in RECORD")
    total = sum(i.file_size for i in members)
    with (
        step(f"checking {path.name} against its RECORD", total) as advance,
        ThreadPoolExecutor(os.cpu_count() or 1) as pool,
    ):
        biggest_first = sorted(members, key=lambda i: -i.file_size)
        problems = pool.map(lambda i: member_problem(archive, i, rows[i.filename]), biggest_first)
        for info, problem in zip(biggest_first, problems, strict=True):
            if problem:
                pool.shutdown(cancel_futures=True)
                raise PatcherError(f"{path.name}: member {info.filename}: {problem}")
            advance(info.file_size)
    if sha256:
        write_checked(passed, b"ok")


def read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes:
    """The member's bytes, or a one-line error if the zip cannot give them (zlib.error too)."""
    try:
        return archive.read(info)
    except (zipfile.BadZipFile, zlib.error, EOFError) as error:
        raise PatcherError(f"member {info.filename} is corrupt ({error})") from error
