"""A wheel's ``*.dist-info/METADATA``: its version and the requirements it runs with.

Read by the verify venvs (``patcher.verify.requirements``) and the serving venvs
(``patcher.serving.venv``) alike.
"""

from __future__ import annotations

import email.parser
import email.policy
import zipfile
from email.message import Message
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import Version

from patcher.errors import PatcherError


def read_metadata(wheel: Path) -> Message:
    """The wheel's ``*.dist-info/METADATA``; a wheel without one is not a wheel."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            names = [
                n
                for n in archive.namelist()
                if n.count("/") == 1 and n.endswith(".dist-info/METADATA")
            ]
            if len(names) != 1:
                raise PatcherError(f"{wheel.name}: expected one .dist-info/METADATA")
            raw = archive.read(names[0])
    except (OSError, zipfile.BadZipFile) as exc:
        raise PatcherError(f"{wheel}: cannot read wheel: {exc}") from exc
    return email.parser.BytesParser(policy=email.policy.compat32).parsebytes(raw)


def wheel_version(wheel: Path) -> Version:
    """The ``Version`` field of the wheel's METADATA."""
    return Version(read_metadata(wheel)["Version"])


def runtime_requirements(metadata: Message) -> list[Requirement]:
    """``Requires-Dist`` lines that apply to this interpreter with no extras selected."""
    found = []
    for line in metadata.get_all("Requires-Dist") or []:
        try:
            req = Requirement(line)
        except InvalidRequirement as exc:
            raise PatcherError(f"unreadable requirement in METADATA: {line!r}") from exc
        if req.marker is None or req.marker.evaluate({"extra": ""}):
            found.append(req)
    return found
