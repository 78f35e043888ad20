"""``patcher bundle``: its option values resolved, then the bundle built below the CLI."""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from patcher import patchset as patchsets
from patcher.bundling import chain_states
from patcher.cli.patching import refuse_drift, refuse_harness, status_table
from patcher.cli.terminal import context, err, out
from patcher.cli.wheels import open_named_wheel
from patcher.codemods.base import Verdict
from patcher.errors import PatcherError
from patcher.files import read_regular
from patcher.official import first_run, settled_on_disk
from patcher.outputs import bundle
from patcher.outputs.overlay import cached_overlay, overlay_plan
from patcher.outputs.wheel import WheelPlan, local_version, repack
from patcher.sources.wheel import WheelSource


def progress(message: str) -> None:
    if not err.quiet:
        err.print(message, markup=False, soft_wrap=True)


def command_bundle(args: argparse.Namespace) -> int:
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
