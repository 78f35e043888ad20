"""``patcher cache dir|size|clean``: the cache's root, its size by kind, and trimming it by
kind and age (``patcher.cache_usage`` knows the layout and the locks)."""

from __future__ import annotations

import argparse
import sys

from patcher.cache_usage import CLEANED_BY_DEFAULT, KINDS, parse_age, parse_kinds
from patcher.cli.overview import QUIET_HELP, VERBOSE_HELP
from patcher.cli.terminal import add_format_option, new_table, out, print_data
from patcher.report import document

KINDS_HELP = (
    f"a comma list of {', '.join(KINDS)}, or all (default: all but proofs, which the matrix shows)"
)


def add_cache_commands(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(
        dest="cache_command", required=True, metavar="SUBCOMMAND", title="subcommands"
    )

    def add(name: str, summary: str) -> argparse.ArgumentParser:
        added: argparse.ArgumentParser = actions.add_parser(
            name, help=summary, formatter_class=parser.formatter_class, allow_abbrev=False
        )
        return added

    where = add("dir", "print the cache's root ($PATCHER_CACHE_DIR, else the user cache)")
    where.set_defaults(run=cache_dir_command)
    size = add("size", "its size by kind")
    add_format_option(size)
    size.set_defaults(run=cache_size_command)
    clean = add("clean", "remove entries by kind and age; what a running patcher holds is kept")
    for each in (where, size, clean):  # -q and -v after the subcommand too, as after a command
        each.add_argument(
            "-q", "--quiet", action="store_true", default=argparse.SUPPRESS, help=QUIET_HELP
        )
        each.add_argument(
            "-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help=VERBOSE_HELP
        )
    kind = clean.add_argument("--kind", metavar="KINDS", help=KINDS_HELP)
    kind.completes = (*KINDS, "all")  # type: ignore[attr-defined]  # patcher.cli.completion
    clean.add_argument(
        "--older-than",
        metavar="AGE",
        help="only entries not modified for AGE: a number and s, m, h, d or w (7d)",
    )
    clean.add_argument(
        "--dry-run", action="store_true", help="say what would be removed, and remove nothing"
    )
    add_format_option(clean)
    clean.set_defaults(run=cache_clean_command)


def size_text(size: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} B"


def cache_dir_command(args: argparse.Namespace) -> int:
    from patcher.cache_usage import cache_root

    sys.stdout.write(f"{cache_root()}\n")
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
