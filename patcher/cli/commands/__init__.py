"""The commands of ``patcher``, one module each (``patcher.cli.command``): its name is the
module's, its docstring its summary and examples, ``arguments(parser)`` its options and the
function it runs. The list of commands is this folder: a new command is a new file."""
