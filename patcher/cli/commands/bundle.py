"""a patched vLLM with its wheels, offline

patcher bundle --vllm 0.20.0 --patchset glm4-moe-eagle3 --target-python 3.12 --out bundle
patcher bundle --vllm 0.16.0 --target-python 3.12 --target-freeze freeze.txt --out bundle
patcher bundle --vllm 0.16.0 --target-python 3.12 --overlay --out bundle
patcher bundle --vllm 0.16.0 --target-python 3.11 --leave-out fa2,numba --part-size 50MiB --out b
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse


def arguments(parser) -> None:
    from patcher.cli.shared import add_source_options
    from patcher.cli.terminal import path_argument

    add_source_options(parser, source_dir=False)
    parser.add_argument(
        "--target-python",
        required=True,
        metavar="3.N",
        help="the target machine's Python, major and minor (the bundle holds its wheels)",
    )
    parser.add_argument(
        "--target-platform",
        default="manylinux_2_35_x86_64",
        metavar="TAG",
        help="the newest manylinux tag the target's glibc supports (default: %(default)s)",
    )
    parser.add_argument(
        "--target-freeze",
        type=path_argument,
        metavar="FILE",
        help="the target's `pip freeze`: what it has at a version the release allows stays out",
    )
    parser.add_argument(
        "--leave-out",
        default="",
        metavar="NAME,...",
        help="declared parts to drop (patcher/outputs/leave_outs.toml): "
        "fa2, fa3, deep-gemm, xgrammar-static, mistral-tokenizers, flashinfer, cutlass-dsl, "
        "tilelang, cudnn-frontend, fastsafetensors, numba; the manifest records what each "
        "removes and the settings it forces",
    )
    parser.add_argument(
        "--part-size",
        type=part_size,
        default=55 << 20,
        metavar="SIZE",
        help="the largest part, in bytes or with KiB, MiB or GiB (default: 55MiB)",
    )
    parser.add_argument(
        "--compression",
        type=compression,
        default=6,
        metavar="0-9",
        help="xz's preset (default: %(default)s)",
    )
    parser.add_argument(
        "--as-of",
        metavar="DATE",
        help="resolve nothing newer than this ISO 8601 time (default: the release's upload "
        "time on the index; needed with --wheel)",
    )
    parser.add_argument(
        "--overlay",
        action="store_true",
        help="carry the official vLLM wheel and the overlay beside it (patcher overlay), not a "
        "repacked wheel: no vLLM file is edited, and swap moves the overlay's modules",
    )
    parser.add_argument(
        "--allow-drift",
        action="store_true",
        help="bundle even where the release's verdict is not the one the patchset declares for "
        "it (without it: exit 1, nothing written)",
    )
    parser.add_argument(
        "--out", type=path_argument, required=True, metavar="DIR", help="a new or empty folder"
    )
    parser.set_defaults(run=run)


def part_size(text: str) -> int:
    """``--part-size``: bytes, or with KiB, MiB or GiB (k, m, g and kb, mb, gb read so too)."""
    import argparse
    import re

    from patcher.outputs.bundle import MIN_PART  # when a size is given, not for --help

    units = {"": 1, "b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30}
    match = re.fullmatch(r"(\d+)\s*([kmg]i?b?|b)?", text.strip(), re.IGNORECASE)
    unit = (match.group(2) or "").lower() if match else ""
    unit = {"k": "kib", "m": "mib", "g": "gib", "kb": "kib", "mb": "mib", "gb": "gib"}.get(
        unit, unit
    )
    if not match or unit not in units:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size like 55MiB or 57671680")
    size = int(match.group(1)) * units[unit]
    if size < MIN_PART:
        raise argparse.ArgumentTypeError(f"{text!r} is under 1 MiB: a part that small is no use")
    return size


def compression(text: str) -> int:
    """``--compression``: xz's preset, 0 to 9."""
    import argparse

    if not (text.isascii() and text.isdigit()) or int(text) > 9:
        raise argparse.ArgumentTypeError(f"{text!r} is not an xz preset from 0 to 9")
    return int(text)


def run(args) -> int:
    return command_bundle(args)


def progress(message: str) -> None:
    from patcher.cli.terminal import err

    if not err.quiet:
        err.print(message, markup=False, soft_wrap=True)


def command_bundle(args: argparse.Namespace) -> int:
    import shutil
    import tempfile
    from pathlib import Path

    from patcher import patchset as patchsets
    from patcher.bundling import chain_states
    from patcher.cli.patching import refuse_drift, refuse_harness, status_table
    from patcher.cli.terminal import context, out
    from patcher.cli.wheels import open_named_wheel
    from patcher.codemods.base import Verdict
    from patcher.errors import PatcherError
    from patcher.files import read_regular
    from patcher.official import first_run, settled_on_disk
    from patcher.outputs import bundle
    from patcher.outputs.overlay import cached_overlay, overlay_plan
    from patcher.outputs.wheel import WheelPlan, local_version, repack
    from patcher.sources.wheel import WheelSource

    patchset = refuse_harness(patchsets.load(args.patchset))
    freeze: tuple[tuple[str, str], ...] = ()
    if args.target_freeze:
        text = read_regular(args.target_freeze, "--target-freeze").decode("utf-8", "replace")
        freeze = bundle.parse_freeze(text, str(args.target_freeze))
    target = bundle.Target(args.target_python, args.target_platform, freeze)
    leave_out = bundle.leave_outs([n for n in args.leave_out.split(",") if n])
    if args.wheel and not args.as_of:
        raise PatcherError("--wheel needs --as-of DATE: a wheel file says not when it was released")
    work = bundle.refuse_out(args.out)
    with open_named_wheel(args) as named:
        first = first_run(named, patchset)
        context(status_table(first))
        refuse_drift(first, args.allow_drift)  # before the download
        if first.verdict is not Verdict.NEEDS_PATCH:
            raise PatcherError(
                f"{first.distribution} {first.version} is {first.verdict} for {patchset.name}: "
                "a bundle carries a patched wheel, and there is nothing to patch"
            )
        as_of = args.as_of or (None if isinstance(named, WheelSource) else named.entry.upload_time)
        if not as_of:
            raise PatcherError("the index gives no upload time for this release: give --as-of")
        official, sha256, result = settled_on_disk(named, patchset, first)
    version = local_version(result.version, patchset.local_label)
    scratch = Path(tempfile.mkdtemp(prefix=".patcher-bundle-", dir=work))
    try:
        overlay = None
        states = chain_states(patchset, official, sha256)
        with WheelSource(official, sha256) as wheel:
            if args.overlay:  # the overlay serves every state install.py may swap its copy to
                files = {p: tuple(s.files[p] for s in states) for p in states[-1].files}
                plan = overlay_plan(result, wheel, states=files)
                patched, overlay = official, cached_overlay(plan, sha256)
            else:
                patched = repack(WheelPlan(official, sha256, result, version), wheel.zip, scratch)
        bundled = bundle.BundlePlan(
            release=str(result.version),
            distribution=result.distribution,
            patchset=patchset.name,
            official_wheel=official,
            patched_wheel=patched,
            states=states,
            target=target,
            as_of=as_of,
            leave_out=leave_out,
            part_size=args.part_size,
            compression=args.compression,
            overlay=overlay,
        )
        built = bundle.build(bundled, args.out, progress)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    parts = built["parts"]
    total = sum(part["size"] for part in parts)
    progress(
        f"{len(parts)} part(s), {total / (1 << 20):.1f} MiB packed, "
        f"{built['unpacked_bytes'] / (1 << 20):.1f} MiB unpacked"
    )
    out.print(str(args.out), markup=False, soft_wrap=True)
    return 0
