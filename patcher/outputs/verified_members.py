"""A wheel's members verified against its RECORD (``patcher.records``) as they stream past.

Members are copied raw into the patched wheel, so this verification is what stands between a
garbled download or file and a patched wheel that installs garbage. It is fed the bytes the
repack reads to hash them anyway (``outputs.wheel``), so the official wheel is read once for
its sha256 and this verification together. A pass is remembered by the wheel's sha256, so the
same bytes are not inflated again; a ``--wheel`` file's sha256 is remembered by its state
(``raw_copy.FileState``): trusted where that state was settled while the bytes were read, else
a hint its next repack confirms by hashing what it reads."""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
import zlib
from pathlib import Path

from patcher.cache import checked_dir, read_checked, write_checked
from patcher.errors import PatcherError
from patcher.outputs.raw_copy import FileState
from patcher.records import RecordRow

INFLATE_CHUNK = 8 * 1024 * 1024
"""At most this much inflated at a time: a member that inflates a thousandfold stays in bounds."""
LOCAL_HEADER = 30
"""A local file header's fixed part; its name and extra field lengths are its last two shorts."""


def verified_before(sha256: str | None) -> bool:
    """Whether a wheel with these bytes was verified already."""
    return bool(sha256) and read_checked(checked_dir("record-checked") / str(sha256)) == b"ok"


def remember_members_verified(sha256: str) -> None:
    write_checked(checked_dir("record-checked") / sha256, b"ok")


def fingerprinted(path: Path, state: FileState) -> Path:
    """Where the sha256 ``path`` had is kept, under its real path and its state (device, inode,
    size, mtime and ctime: ``raw_copy.FileState``)."""
    key = json.dumps({"path": os.path.realpath(path), "state": state})
    return checked_dir("wheel-sha256") / hashlib.sha256(key.encode()).hexdigest()


def hashed_before(path: Path, state: FileState) -> tuple[str, bool] | None:
    """The sha256 a repack found for this file in this state, if one did, and whether the state
    was settled then (``raw_copy.settled``): if so, the bytes are the ones hashed, as no write
    since left the state as it was; if not, the sha256 is a hint, which the repack's own hash
    of the bytes confirms or refutes."""
    found = read_checked(fingerprinted(path, state))
    if not found:
        return None
    sha256, _, vouched = found.decode("ascii", "replace").partition(" ")
    return sha256, vouched == "settled"


def remember_hashed(path: Path, state: FileState, sha256: str, settled: bool) -> None:
    if hashed_before(path, state) != (sha256, settled):
        vouched = "settled" if settled else "hint"
        write_checked(fingerprinted(path, state), f"{sha256} {vouched}".encode())


class MemberVerifier:
    """One member's local entry (header, compressed data, descriptor) fed in chunks, inflated
    and hashed as it comes, then held against the member's RECORD row."""

    def __init__(self, info: zipfile.ZipInfo, row: RecordRow) -> None:
        self.info, self.row = info, row
        self.header = b""  # until the local header is whole
        self.compressed_left: int | None = None  # the data's bytes still to come, once known
        self.inflater = zlib.decompressobj(-15)
        self.digest: hashlib._Hash | None = row.hash.new() if row.hash else None
        self.size = 0
        self.crc = 0
        self.corrupt = ""

    def feed(self, chunk: bytes) -> None:
        if self.corrupt or self.digest is None:
            return
        if self.compressed_left is None:
            self.header += chunk
            if len(self.header) < LOCAL_HEADER:
                return
            name_length, extra_length = (
                int.from_bytes(self.header[26:28], "little"),
                int.from_bytes(self.header[28:30], "little"),
            )
            start = LOCAL_HEADER + name_length + extra_length
            if len(self.header) < start:
                return
            chunk, self.header = self.header[start:], b""
            self.compressed_left = self.info.compress_size
        data = chunk[: self.compressed_left]
        self.compressed_left -= len(data)
        try:
            if self.info.compress_type == zipfile.ZIP_STORED:
                self.take(data)
                return
            while data:
                self.take(self.inflater.decompress(data, INFLATE_CHUNK))
                data = self.inflater.unconsumed_tail
        except zlib.error as error:
            self.corrupt = str(error)

    def take(self, plain: bytes) -> None:
        assert self.digest is not None
        self.digest.update(plain)
        self.size += len(plain)
        self.crc = zlib.crc32(plain, self.crc)

    def problem(self) -> str:
        """Why the member's bytes disagree with its RECORD row, or "" if they agree."""
        if self.row.hash is None or self.digest is None:
            return "RECORD gives no hash for it"
        if self.info.flag_bits & 0x1:
            return "it is encrypted"
        if self.info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            return f"compression method {self.info.compress_type}: a wheel's are deflate or none"
        if not self.corrupt and self.compressed_left != 0:
            self.corrupt = "its entry ends early"
        if not self.corrupt and self.info.compress_type == zipfile.ZIP_DEFLATED:
            try:
                self.take(self.inflater.flush())
            except zlib.error as error:
                self.corrupt = str(error)
            if not self.corrupt and not self.inflater.eof:
                self.corrupt = "its deflate stream ends early"
        if not self.corrupt and self.crc != self.info.CRC:
            self.corrupt = f"Bad CRC-32 for file {self.info.filename!r}"
        if self.corrupt:
            return f"its bytes are corrupt ({self.corrupt})"
        if not self.row.hash.matches(self.digest):
            return f"its {self.row.hash.name} is not the one RECORD gives"
        if self.row.size != self.size:
            shown = "nothing" if self.row.size is None else self.row.size
            return f"it has {self.size} bytes, RECORD says {shown}"
        return ""


def read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes:
    """The member's bytes, or a one-line error if the zip cannot give them (zlib.error too)."""
    try:
        return archive.read(info)
    except (zipfile.BadZipFile, zlib.error, EOFError) as error:
        raise PatcherError(f"member {info.filename} is corrupt ({error})") from error
