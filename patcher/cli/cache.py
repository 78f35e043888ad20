"""``patcher cache dir|size|clean``: the cache's root, its size by kind, and trimming it by
kind and age (``patcher.cache_usage`` knows the layout and the locks)."""

from __future__ import annotations

import argparse
import sys

from patcher.cache_usage import CLEANED_BY_DEFAULT, parse_age, parse_kinds
from patcher.cli.terminal import new_table, out, print_data
from patcher.report import document


def size_text(size: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} B"


def cache_dir_command(args: argparse.Namespace) -> int:
    from patcher.cache_usage import cache_root
    from patcher.cli.terminal import printable

    # for `cd "$(patcher cache dir)"`: a root holding a control character is shown escaped,
    # never acted on by the terminal (`cache size --format json` gives it as data)
    sys.stdout.write(f"{printable(str(cache_root()), newlines=True)}\n")
    return 0


def cache_size_command(args: argparse.Namespace) -> int:
    from patcher.cache_usage import cache_root, sizes

    root = cache_root()
    totals = sizes(root)
    whole = sum(kind["bytes"] for kind in totals.values())
    if args.format == "json":
        print_data(document("cache size", cache=str(root), kinds=totals, bytes=whole))
        return 0
    table = new_table(f"the cache {root}")
    table.add_column("kind")
    for column in ("size", "entries", "files"):
        table.add_column(column, justify="right")
    for kind, counted in totals.items():
        table.add_row(kind, size_text(counted["bytes"]), str(counted["entries"]),
                      str(counted["files"]))  # fmt: skip
    table.add_row("total", size_text(whole), "", "")
    table.caption = "patcher cache clean --kind KINDS --older-than AGE"
    out.print(table, markup=False)
    return 0


def cache_clean_command(args: argparse.Namespace) -> int:
    from patcher.cache_usage import cache_root, clean

    kinds = CLEANED_BY_DEFAULT if args.kind is None else parse_kinds(args.kind)
    older = None if args.older_than is None else parse_age(args.older_than)
    root = cache_root()
    done = clean(root, kinds, older, args.dry_run)
    if args.format == "json":
        print_data(
            document(
                "cache clean",
                cache=str(root),
                dry_run=args.dry_run,
                removed=[entry_data(e) for e in done.removed],
                in_use=[entry_data(e) for e in done.in_use],
                failed=[{**entry_data(e), "error": why} for e, why in done.failed],
                bytes=done.freed,
            )
        )
        return 1 if done.failed else 0
    verb = "would remove" if args.dry_run else "removed"
    for entry in done.removed:
        out.print(f"{verb} {entry.kind} {entry.name} ({size_text(entry.size)})", markup=False)
    for entry in done.in_use:
        out.print(f"kept {entry.kind} {entry.name}: in use by a running patcher", markup=False)
    for entry, why in done.failed:
        out.print(f"could not remove {entry.kind} {entry.name}: {why}", markup=False)
    out.print(
        f"{verb} {len(done.removed)} entries, {size_text(done.freed)}; "
        f"kept {len(done.in_use)} in use",
        markup=False,
    )
    return 1 if done.failed else 0


def entry_data(entry: object) -> dict[str, object]:
    from patcher.cache_usage import Entry

    assert isinstance(entry, Entry)
    return {"kind": entry.kind, "name": entry.name, "bytes": entry.size, "files": entry.files}
