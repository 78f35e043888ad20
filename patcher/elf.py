"""The shared libraries an ELF file links against (its ``DT_NEEDED`` entries), read with struct.

A venv with the CPU torch cannot load a binary that needs ``libcudart`` or ``libtorch_cuda``;
reading the ELF header tells which those are without trying to load them.
"""

from __future__ import annotations

import struct
from pathlib import Path

PT_LOAD, PT_DYNAMIC = 1, 2
DT_NULL, DT_NEEDED, DT_STRTAB = 0, 1, 5


def needed_libraries(path: Path) -> tuple[str, ...]:
    """``DT_NEEDED`` of a 64-bit little-endian ELF file; ``()`` for anything else."""
    with path.open("rb") as handle:
        ident = handle.read(64)
        if len(ident) < 64 or ident[:4] != b"\x7fELF" or ident[4] != 2 or ident[5] != 1:
            return ()
        phoff, phentsize, phnum = (
            struct.unpack_from("<Q", ident, 32)[0],
            *struct.unpack_from("<HH", ident, 54),
        )
        handle.seek(phoff)
        table = handle.read(phentsize * phnum)
        # (p_type, p_flags, p_offset, p_vaddr, p_paddr, p_filesz, p_memsz, p_align)
        headers = [struct.unpack_from("<IIQQQQQQ", table, i * phentsize) for i in range(phnum)]
        dynamic = next((h for h in headers if h[0] == PT_DYNAMIC), None)
        if dynamic is None:
            return ()
        handle.seek(dynamic[2])
        data = handle.read(dynamic[5])
        entries = []
        for offset in range(0, len(data) - 15, 16):
            tag, value = struct.unpack_from("<qQ", data, offset)
            if tag == DT_NULL:
                break
            entries.append((tag, value))
        strtab = next((v for t, v in entries if t == DT_STRTAB), None)
        load = next(
            (h for h in headers if h[0] == PT_LOAD and h[3] <= (strtab or 0) < h[3] + h[5]),
            None,
        )
        if strtab is None or load is None:
            return ()
        base = strtab - load[3] + load[2]
        names = []
        for tag, value in entries:
            if tag == DT_NEEDED:
                handle.seek(base + value)
                names.append(handle.read(256).partition(b"\0")[0].decode("ascii", "replace"))
        return tuple(names)
