"""One name means one thing (issue 16, item 5): modules named by what they are, one word per
meaning, proof kinds that read as their stored values."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import patcher
from patcher import distributions, proofs
from patcher.outputs import verified_members, wheel

PACKAGE = Path(patcher.__file__).parent

SHARED_NAMES = {"__init__.py", "base.py", "report.py", "wheel.py"}
"""File names kept in several packages on purpose: each package's base class, its report, and
the wheel a source reads beside the wheel an output writes."""


COMMAND_LINE = PACKAGE / "cli"
"""A module of the command line is named after its command, which may be the name of what the
command runs (``cli/doctor.py`` runs ``doctor.py``); within the package, names are unique."""


def test_no_two_modules_share_a_name_beyond_the_deliberate_ones():
    below = [p for p in PACKAGE.rglob("*.py") if COMMAND_LINE not in p.parents]
    names = Counter(path.name for path in below)
    assert {name for name, count in names.items() if count > 1} <= SHARED_NAMES
    # cli/commands/ declares each command; cli/NAME.py may be the module its command runs
    in_cli = Counter(path.name for path in COMMAND_LINE.glob("*.py"))
    assert {name for name, count in in_cli.items() if count > 1} == set()


def test_one_word_per_meaning():
    """A package name is validated, a wheel's members verified, a proof kept: the word check
    is left to the CPU probes (``checks.CHECKS``)."""
    assert not hasattr(distributions, "check")
    assert not hasattr(verified_members, "check_source")
    assert not hasattr(proofs, "record")
    assert not hasattr(wheel, "check_wheel")  # the repacked wheel is verified: verify_repacked
    assert not hasattr(
        verified_members, "MemberCheck"
    )  # a member verified as it streams: MemberVerifier


def test_proof_kinds_read_as_the_folders_they_are_stored_in():
    assert {kind.name.lower(): kind.value for kind in proofs.ProofKind} == {
        "verify": "verify",
        "serve": "serve",
        "accept": "accept",
    }
