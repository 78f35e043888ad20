"""A file laid out as byte ranges of another file and new bytes, written by the kernel.

A repacked wheel is mostly the official wheel's bytes in the same order: its unchanged members
(local header, compressed data, descriptor) are copied as they are, between a few new entries
and a new central directory. ``write_pieces`` writes such a layout with ``os.copy_file_range``
(the kernel moves the ranges, as ``cp`` does; ``os.sendfile``, then ``pread``/``pwrite``,
where a file system refuses it), so the bytes never pass through Python.

``FileState`` says when bytes read before may be trusted again without reading them: it holds
the file's device, inode, size, mtime and ctime. Any write to a file sets its ctime to the
clock, and no call sets it back (``os.utime`` restores an mtime, not a ctime), so an unchanged
state means unchanged bytes, with one exception: the kernel's clock for timestamps ticks
coarsely (a few milliseconds; a second or two on some file systems), so a write in the same tick
as the last change leaves the ctime as it was. A state is ``settled`` once its ctime is
``SETTLE_NS`` older than the moment a reader began: any later write then shows. Only bytes read
while their file's state was settled, and unchanged until the reading ended, are remembered
by that state (as git treats an index entry as racily clean).

This module imports nothing but ``os``: the warm ``build-wheel`` (``patcher.cli.warm_wheel``)
runs it before anything else is loaded.
"""

from __future__ import annotations

import errno
import os

SETTLE_NS = 2_000_000_000
"""How much older than a reading's start a file's ctime must be for its state to vouch for
the bytes read: above the coarsest timestamp tick of the usual file systems."""

FileState = tuple[int, int, int, int, int]
"""A file's device, inode, size, mtime and ctime in nanoseconds."""

Piece = tuple[int, int] | bytes
"""``(offset, length)``: that range of the source file; ``bytes``: these bytes."""

COPY_FALLBACK_ERRORS = frozenset(
    {errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.EBADF, errno.ETXTBSY}
)
"""What ``copy_file_range`` answers where the kernel or the file system cannot copy this way
(across file systems before Linux 5.3, some FUSE and network file systems, a seccomp filter)."""
CHUNK = 8 * 1024 * 1024
BOUNDARY = 64 * 1024
"""The kernel copies a range through a pipe of 16 pages (Linux 6.18, ext4, large folios): one
that starts on a multiple of this in both files is copied about 1.3 times faster (CPU time,
measured) than one that starts off it, though its offset differs by a multiple of it."""


def state_of(fd: int) -> FileState:
    """The state of the file open at ``fd``."""
    found = os.fstat(fd)
    return (found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns, found.st_ctime_ns)


def settled(state: FileState, since_ns: int) -> bool:
    """Whether a write after ``since_ns`` (a ``time.time_ns()``) would change ``state``."""
    return state[4] + SETTLE_NS < since_ns


def size_of(pieces: list[Piece]) -> int:
    return sum(len(p) if isinstance(p, bytes) else p[1] for p in pieces)


def write_pieces(pieces: list[Piece], source: int, out: int) -> int:
    """``pieces`` written to ``out`` (a new, empty file) from its start, the ranges copied from
    ``source`` in the kernel; the bytes written. A source that ends before a range does is an
    ``EOFError``."""
    preallocate(out, size_of(pieces))
    at = 0
    for piece in pieces:
        if isinstance(piece, bytes):
            write_at(out, piece, at)
            at += len(piece)
        else:
            offset, length = piece
            copy_range(source, out, offset, length, at)
            at += length
    return at


PREALLOCATED = frozenset({"ext4"})
"""The file systems whose blocks ``preallocate`` reserves: an ext4 file given its blocks at
once takes a fifth less CPU time to fill (measured: a copy of 508 MB, Linux 6.18) than one
given them as it is written. Not where the C library would emulate it by writing every block
(NFS before 4.2, ZFS before 2.2), nor where ``copy_file_range`` shares blocks instead of
copying them (btrfs, XFS with reflinks), so only where it was measured."""


def preallocate(out: int, size: int) -> None:
    """``size`` bytes of blocks reserved for ``out`` where its file system is ``PREALLOCATED``:
    read from ``/proc/self/mountinfo`` by the file's device."""
    device = os.fstat(out).st_dev
    wanted = f"{os.major(device)}:{os.minor(device)}"
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as mounts:
            for line in mounts:
                fields = line.split(" ")
                if len(fields) > 2 and fields[2] == wanted:
                    _, _, after = line.partition(" - ")
                    if after.split(" ", 1)[0] in PREALLOCATED and size:
                        os.posix_fallocate(out, 0, size)
                    return
    except FileNotFoundError:  # no /proc: not Linux, or a sandbox without it
        return


def write_at(out: int, data: bytes, at: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(out, view, at)
        view, at = view[written:], at + written


def copy_range(source: int, out: int, offset: int, length: int, at: int) -> None:
    """``length`` bytes of ``source`` from ``offset`` written at ``at`` of ``out``; the bytes
    up to the next ``BOUNDARY`` of ``source`` first, so the rest starts on one."""
    while length:
        step = min(length, -offset % BOUNDARY or length)
        try:
            copied = os.copy_file_range(source, out, step, offset, at)
        except OSError as error:
            if error.errno not in COPY_FALLBACK_ERRORS:
                raise
            copy_range_slowly(source, out, offset, length, at)
            return
        if not copied:
            raise EOFError(f"the source ended {length} bytes before the range at {offset} did")
        offset, at, length = offset + copied, at + copied, length - copied


def copy_range_slowly(source: int, out: int, offset: int, length: int, at: int) -> None:
    """``copy_range`` where ``copy_file_range`` is refused: ``sendfile``, else read and write."""
    os.lseek(out, at, os.SEEK_SET)
    try:
        while length:
            sent = os.sendfile(out, source, offset, length)
            if not sent:
                raise EOFError(f"the source ended {length} bytes before the range at {offset} did")
            offset, at, length = offset + sent, at + sent, length - sent
        return
    except OSError as error:
        if error.errno not in COPY_FALLBACK_ERRORS:
            raise
    while length:
        chunk = os.pread(source, min(CHUNK, length), offset)
        if not chunk:
            raise EOFError(f"the source ended {length} bytes before the range at {offset} did")
        write_at(out, chunk, at)
        offset, at, length = offset + len(chunk), at + len(chunk), length - len(chunk)
