"""A command of ``patcher`` is one module of ``patcher.cli.commands``, and nothing else
declares it: its name is the module's, with dashes (``build_wheel.py`` is ``build-wheel``); its
docstring is its summary (the first line) and its examples (the lines after); and its
``arguments(parser)`` adds its options and sets the function it runs
(``parser.set_defaults(run=...)``), as a libcst command declares ``add_args`` beside
``transform_module``. The module imports nothing at the top, so ``patcher --help`` reads every
command's summary without loading what the commands run."""

from __future__ import annotations

TYPE_CHECKING = False  # typing takes milliseconds to import: --help does not wait for it
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable
    from types import ModuleType


class Command:
    def __init__(
        self,
        name: str,
        summary: str,
        arguments: Callable[[argparse.ArgumentParser], None],
        *examples: str,
    ) -> None:
        self.name = name
        self.summary = summary
        self.arguments = arguments
        """Adds the command's options to its parser, and the function it runs."""
        self.examples = examples

    @classmethod
    def of(cls, module: ModuleType) -> Command:
        """The command ``module`` declares."""
        summary, *examples = (line for line in (module.__doc__ or "").splitlines() if line)
        name = module.__name__.rpartition(".")[2].replace("_", "-")
        return cls(name, summary, module.arguments, *examples)

    @property
    def epilog(self) -> str:
        return "examples:\n" + "".join(f"  {example}\n" for example in self.examples)
