"""How tests run the ``patcher`` command: the console script installed beside this interpreter.

Not ``python -m patcher.cli``: run from the repository root, that imports the source tree, not
what was installed, and hides what the installed wheel lacks.
"""

from __future__ import annotations

import sys
from pathlib import Path

PATCHER = str(Path(sys.executable).with_name("patcher"))
