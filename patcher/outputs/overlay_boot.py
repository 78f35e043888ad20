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
        if not fullname.startswith("vllm."):
            return None
        from . import runtime

        return runtime.find_spec(self, fullname)

    def decide(self):
        from . import runtime

        return runtime.decide(self)

    def turn_off(self, why):
        from . import runtime

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
            from . import runtime

            runtime.second(_FINDER, others)
            return
        sys.meta_path.insert(0, _FINDER)
    except Exception as error:  # startup must go on whatever happens here
        try:  # noqa: SIM105 - contextlib is one more import in every interpreter
            sys.stderr.write(f"patcher overlay: not activated: {type(error).__name__}: {error}\n")
        except Exception:
            pass


def status():
    """What this interpreter would do, as data: for ``patcher status``."""
    from . import runtime

    return runtime.status(_FINDER)


def plugin():
    """vLLM's ``general_plugins`` entry point: one line in each vLLM process."""
    from . import runtime

    runtime.plugin(_FINDER)
