"""The ``patcher`` command line: the console script (``main``), the parser (``parser``), the
commands' options and handlers, and the terminal they print to. Only this package reads
``argparse``; what it calls takes values."""
