"""the cache: its folder, its size by kind, and cleaning it

patcher cache dir
patcher cache size --format json
patcher cache clean --kind wheels,venvs --older-than 7d --dry-run
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse


def arguments(parser) -> None:
    import argparse

    from patcher.cli.overview import QUIET_HELP, VERBOSE_HELP
    from patcher.cli.terminal import add_format_option
    from patcher.defaults import CACHE_KINDS

    actions = parser.add_subparsers(
        dest="cache_command", required=True, metavar="SUBCOMMAND", title="subcommands"
    )

    def add(name: str, summary: str) -> argparse.ArgumentParser:
        added: argparse.ArgumentParser = actions.add_parser(
            name, help=summary, formatter_class=parser.formatter_class, allow_abbrev=False
        )
        return added

    where = add("dir", "print the cache's root ($PATCHER_CACHE_DIR, else the user cache)")
    where.set_defaults(run=run_dir)
    size = add("size", "its size by kind")
    add_format_option(size)
    size.set_defaults(run=run_size)
    clean = add("clean", "remove entries by kind and age; what a running patcher holds is kept")
    for each in (where, size, clean):  # -q and -v after the subcommand too, as after a command
        each.add_argument(
            "-q", "--quiet", action="store_true", default=argparse.SUPPRESS, help=QUIET_HELP
        )
        each.add_argument(
            "-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help=VERBOSE_HELP
        )
    kinds = (
        f"a comma list of {', '.join(CACHE_KINDS)}, or all (default: all but proofs, which the "
        "matrix shows)"
    )
    kind = clean.add_argument("--kind", metavar="KINDS", help=kinds)
    kind.completes = (*CACHE_KINDS, "all")  # type: ignore[attr-defined]  # patcher.cli.completion
    clean.add_argument(
        "--older-than",
        metavar="AGE",
        help="only entries not modified for AGE: a number and s, m, h, d or w (7d)",
    )
    clean.add_argument(
        "--dry-run", action="store_true", help="say what would be removed, and remove nothing"
    )
    add_format_option(clean)
    clean.set_defaults(run=run_clean)


def run_dir(args) -> int:
    return cache_dir_command(args)


def run_size(args) -> int:
    return cache_size_command(args)


def run_clean(args) -> int:
    return cache_clean_command(args)


def size_text(size: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} B"


def cache_dir_command(args: argparse.Namespace) -> int:
    import sys

    from patcher.cache_usage import cache_root
    from patcher.cli.terminal import printable

    # for `cd "$(patcher cache dir)"`: a root holding a control character is shown escaped,
    # never acted on by the terminal (`cache size --format json` gives it as data)
    sys.stdout.write(f"{printable(str(cache_root()), newlines=True)}\n")
    return 0


def cache_size_command(args: argparse.Namespace) -> int:
    from patcher.cache_usage import cache_root, sizes
    from patcher.cli.terminal import new_table, out, print_data
    from patcher.report import document

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
    from patcher.cache_usage import CLEANED_BY_DEFAULT, cache_root, clean, parse_age, parse_kinds
    from patcher.cli.terminal import out, print_data
    from patcher.report import document

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
