"""the patchsets and the replica architectures

patcher list
patcher list --format json
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse

    from patcher.patchset import Patchset


def arguments(parser) -> None:
    from patcher.cli.terminal import add_format_option

    add_format_option(parser)
    parser.set_defaults(run=run)


def run(args) -> int:
    return command_list(args)


def command_list(args: argparse.Namespace) -> int:
    """The built-in patchsets and the architectures ``patcher replica`` can write."""
    from patcher import patchset as patchsets
    from patcher.cli.terminal import new_table, out, print_data
    from patcher.replica import spec as replica_specs
    from patcher.report import document

    shown = [patchsets.load(name) for name in patchsets.available()]
    table = new_table("patchsets")
    for column in ("patchset", "model", "model types"):
        table.add_column(column)
    for column in ("patches", "verdicts"):
        table.add_column(column, overflow="fold")
    for patchset in shown:
        verdicts = "; ".join(f"{e.versions} {e.verdict}" for e in patchset.expectations)
        table.add_row(
            patchset.name,
            patchset.model.architecture or "",
            ", ".join(patchset.model.types),
            ", ".join(patch.codemod for patch in patchset.patches),
            verdicts,
        )
    table.caption = "diff, apply, build-wheel, status and verify take one: --patchset NAME"
    out.print(table, markup=False)
    replicas = new_table("replica architectures")
    for column in ("architecture", "drafters", "patchsets"):
        replicas.add_column(column)
    for architecture, spec in sorted(replica_specs.known().items()):
        kinds = sorted(spec.drafters, key=lambda kind: kind != spec.default_drafter)
        users = [p.name for p in shown if p.model.architecture == architecture]
        replicas.add_row(architecture, ", ".join(kinds), ", ".join(users))
    replicas.caption = "the first drafter is the default; patcher replica --patchset NAME"
    out.print(replicas, markup=False)
    if args.format == "json":
        print_data(document("list", **listing(shown)))
    return 0


def listing(shown: list[Patchset]) -> dict[str, object]:
    """``list --format json``: the patchsets and the replica architectures, as data."""
    from patcher.replica import spec as replica_specs

    return {
        "patchsets": [
            {
                "name": p.name,
                "architecture": p.model.architecture,
                "model_types": list(p.model.types),
                "patches": [patch.codemod for patch in p.patches],
                "expect": [
                    {"versions": str(e.versions), "verdict": str(e.verdict)} for e in p.expectations
                ],
            }
            for p in shown
        ],
        "replica_architectures": [
            {
                "architecture": architecture,
                "drafters": sorted(spec.drafters),
                "default_drafter": spec.default_drafter,
                "patchsets": [p.name for p in shown if p.model.architecture == architecture],
            }
            for architecture, spec in sorted(replica_specs.known().items())
        ],
    }
