"""The overlay's ``__init__.py``: what every interpreter imports, kept small; standard library
only.

``site`` runs the overlay's ``.pth`` line (or its PEP 829 ``.start`` entry point) in every
interpreter, vLLM or not, so this module only puts a finder first on ``sys.meta_path``. The
finder lets every name but ``vllm.*`` pass at the cost of one string test; on the first ``vllm.*``
import it hands over to ``runtime`` (``overlay_runtime.py``), which reads the manifest, checks the
installed vLLM and serves the patched modules, all or none.
"""

import sys

SWITCH = "PATCHER_OVERLAY"
OFF = ("0", "off", "false", "no")


def say(message):
    """One line on stderr, every character that is not printable escaped."""
    shown = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in str(message))
    try:
        sys.stderr.write("patcher overlay: " + shown + "\n")
        sys.stderr.flush()
    except Exception:
        pass


def switched_off():
    from os import environ

    return environ.get(SWITCH, "").strip().lower() in OFF


class OverlayFinder:
    """The meta-path finder; its decisions are the runtime's, its state is kept here."""

    patcher_overlay = True

    def __init__(self):
        self.manifest = None
        self.active = None  # None: not decided yet
        self.why = None
        self.served = []

    def find_spec(self, fullname, path=None, target=None):
        if not fullname.startswith("vllm.") or self.active is False:
            return None
        runtime = self.runtime()
        return None if runtime is None else runtime.find_spec(self, fullname)

    def runtime(self):
        """The runtime module; None, with the overlay off and one line said, where it cannot
        be imported (gone, broken): never a traceback in the user's process."""
        try:
            from . import runtime

            return runtime
        except Exception as error:
            self.active = False
            self.why = f"its runtime cannot be imported: {type(error).__name__}: {error}"
            say("off, vLLM runs as official: " + self.why)
            return None

    def decide(self):
        runtime = self.runtime()
        return False if runtime is None else runtime.decide(self)

    def turn_off(self, why):
        runtime = self.runtime()
        if runtime is not None:
            runtime.turn_off(self, why)

    def invalidate_caches(self):
        return None


_FINDER = None


def finder():
    """This process's finder, or None where the overlay was not activated."""
    return _FINDER


def activate():
    """Put the finder first on ``sys.meta_path``, once (the ``.pth`` line and the ``.start``
    entry point both call it). A second overlay already there turns both off."""
    global _FINDER
    try:
        if _FINDER is not None or switched_off():
            return
        others = [f for f in sys.meta_path if getattr(f, "patcher_overlay", False)]
        _FINDER = OverlayFinder()
        if others:
            runtime = _FINDER.runtime()
            if runtime is not None:
                runtime.second(_FINDER, others)
            return
        sys.meta_path.insert(0, _FINDER)
    except Exception as error:  # startup must go on whatever happens here
        say(f"not activated: {type(error).__name__}: {error}")


def status():
    """What this interpreter would do, as data: for ``patcher status``."""
    from . import runtime

    return runtime.status(_FINDER)


def plugin():
    """vLLM's ``general_plugins`` entry point: one line in each vLLM process."""
    from . import runtime

    runtime.plugin(_FINDER)
