"""The overlay's runtime: serves patched vLLM modules at import; standard library only.

``patcher overlay`` copies this file into its wheel as ``vllm_patcher_overlay/runtime.py``,
beside ``manifest.json`` and ``modules/`` (the patched files). Nothing of vLLM is touched:

- ``vllm_patcher_overlay.pth`` (and ``vllm_patcher_overlay.start``, PEP 829's form of the same)
  calls ``activate`` in the package's ``__init__.py`` (``overlay_boot.py``) as ``site`` starts
  each interpreter, spawned children included. It puts a finder first on ``sys.meta_path`` and
  reads nothing; this module is imported, and the manifest read, on the first ``vllm.*`` import.
- The finder answers only for the manifest's module names. On the first of them it hashes every
  target the installed vLLM has against the manifest's official sha256: all match, and each
  target is served from the overlay's own real file (tracebacks, ``inspect``, dynamo and vLLM's
  compile-cache hashing see a real file; byte code goes to the overlay's ``__pycache__``); one
  mismatch, a broken manifest, a target imported before the check, or a second overlay, and
  the overlay is off for the whole process, with one line on stderr. A process never runs a mix.
- ``PATCHER_OVERLAY=0`` turns it off.
- :func:`plugin`, through the package's ``plugin``, is a ``vllm.general_plugins`` entry point:
  in every vLLM process it settles the check and logs one line saying whether the targets came
  from the overlay, and why not.
"""

import os
import sys

NAME = "vllm_patcher_overlay"
SWITCH = "PATCHER_OVERLAY"
OFF = ("0", "off", "false", "no")
"""The values of ``SWITCH`` that turn the overlay off."""
HERE = os.path.dirname(os.path.abspath(__file__))
MODULES = os.path.join(HERE, "modules")
MANIFEST = os.path.join(HERE, "manifest.json")
FORMAT = 1
PIECE = 1 << 20


class Broken(Exception):
    """The overlay cannot be used: the message says why, in one line."""


def _say(message):
    """One line on stderr, every character that is not printable escaped (a manifest's or a
    path's control characters cannot forge a line or reach the terminal)."""
    shown = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in str(message))
    try:
        sys.stderr.write("patcher overlay: " + shown + "\n")
        sys.stderr.flush()
    except Exception:  # a closed or missing stderr: the decision stands without the line
        pass


def switched_off():
    return os.environ.get(SWITCH, "").strip().lower() in OFF


def _hex(value):
    return (
        isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)
    )


def _module_path(name):
    """``vllm.config.speculative`` -> ``vllm/config/speculative.py``; a package's own
    ``__init__.py`` is named by the package."""
    return name.replace(".", "/")


def read_manifest(path=MANIFEST):
    """The manifest, checked: every problem in one line (Broken)."""
    import json

    try:
        with open(path, "rb") as handle:
            data = json.loads(handle.read(1 << 22).decode("utf-8"))
    except (OSError, ValueError) as error:
        raise Broken(f"cannot read its manifest {path}: {error}") from None
    problems = []
    if not isinstance(data, dict):
        raise Broken(f"its manifest {path} is not a JSON object")
    if data.get("format") != FORMAT:
        problems.append(f"format {data.get('format')!r}, not {FORMAT}")
    for key in ("distribution", "version"):
        if not isinstance(data.get(key), str) or not data.get(key):
            problems.append(f"{key} is not a name")
    modules = data.get("modules")
    if not isinstance(modules, dict) or not modules:
        problems.append("modules is not a non-empty object")
        modules = {}
    for name, entry in sorted(modules.items()):
        parts = name.split(".") if isinstance(name, str) else []
        if len(parts) < 2 or parts[0] != "vllm" or not all(p.isidentifier() for p in parts):
            problems.append(f"{name!r} is not a module of vllm")
            continue
        if not isinstance(entry, dict):
            problems.append(f"{name}: not an object")
            continue
        file = entry.get("file")
        if file not in (_module_path(name) + ".py", _module_path(name) + "/__init__.py"):
            problems.append(f"{name}: file {file!r} is not the module's")
        for key in ("official_sha256", "patched_sha256"):
            if not _hex(entry.get(key)):
                problems.append(f"{name}: {key} is not a sha256")
        states = entry.get("states_sha256", [])
        if not isinstance(states, list) or not all(_hex(h) for h in states):
            problems.append(f"{name}: states_sha256 is not a list of sha256")
    if problems:
        raise Broken(f"its manifest {path} is broken: {'; '.join(problems)}")
    return data


def _sha256(path):
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while True:
            chunk = handle.read(PIECE)
            if not chunk:
                return digest.hexdigest()
            digest.update(chunk)


def vllm_root():
    """The folder the installed ``vllm`` package sits in (site-packages), found as the import
    system would find it, without importing it; None where there is none."""
    module = sys.modules.get("vllm")
    locations = list(getattr(module, "__path__", None) or []) if module is not None else []
    if not locations:
        from importlib.machinery import PathFinder

        spec = PathFinder.find_spec("vllm")
        locations = list(spec.submodule_search_locations or []) if spec is not None else []
    return os.path.dirname(os.path.abspath(locations[0])) if locations else None


def _installed_version(distribution):
    try:
        from importlib.metadata import version

        return version(distribution)
    except Exception:
        return None


def check(manifest):
    """None where every target of the installed vLLM is the official file the overlay was made
    from, else why not (one line)."""
    root = vllm_root()
    if root is None:
        return "no vllm package is importable here"
    changed = []
    for _name, entry in sorted(manifest["modules"].items()):
        path = os.path.join(root, entry["file"])
        try:
            found = _sha256(path)
        except OSError as error:
            changed.append(f"{path} ({error.strerror or error})")
            continue
        if found != entry["official_sha256"]:
            changed.append(path)
    if not changed:
        return own_files(manifest)
    want = f"{manifest['distribution']} {manifest['version']}"
    have = _installed_version(manifest["distribution"])
    if have is not None and have != manifest["version"]:
        return f"it is for {want}, and {manifest['distribution']} {have} is installed"
    more = f" (and {len(changed) - 1} more)" if len(changed) > 1 else ""
    return (
        f"{changed[0]}{more} is not the official file of {want} it was made for (edited, "
        "patched in place, or another build)"
    )


def own_files(manifest):
    """None where each of the overlay's own modules is there with its patched sha256, else
    why not: a file gone, edited or broken is never served beside the others."""
    for _name, entry in sorted(manifest["modules"].items()):
        path = os.path.join(MODULES, entry["file"])
        try:
            found = _sha256(path)
        except OSError as error:
            return f"its own {path} cannot be read ({error.strerror or error})"
        if found != entry["patched_sha256"] and found not in entry.get("states_sha256", []):
            return f"its own {path} is not the file it was built with"
    return None


def decide(finder):
    """Settle, once, whether this process uses the overlay; True if it does."""
    if finder.active is not None:
        return finder.active
    try:
        finder.manifest = read_manifest()
        why = check(finder.manifest)
        if why is None:
            early = [n for n in finder.manifest["modules"] if n in sys.modules]
            if early:
                why = f"{early[0]} was imported before the overlay could serve it"
    except Broken as error:
        why = str(error)
    except Exception as error:  # never a traceback inside the user's vLLM process
        why = f"its check failed: {type(error).__name__}: {error}"
    settle(finder, why)
    return finder.active


def settle(finder, why):
    finder.active = why is None
    finder.why = why
    if why is not None:
        _say("off, vLLM runs as official: " + why)


def turn_off(finder, why):
    if finder.active is None or finder.active:
        settle(finder, why)


def find_spec(finder, fullname):
    """The spec of ``fullname`` from the overlay, None where it is not a target or the overlay
    is off (the import system then asks the next finder: vLLM's own file)."""
    if finder.active is None:
        decide(finder)
    if not finder.active:
        return None
    entry = finder.manifest["modules"].get(fullname)
    if entry is None:
        return None
    from importlib.machinery import SourceFileLoader
    from importlib.util import spec_from_file_location

    file = os.path.join(MODULES, entry["file"])
    search = None
    if entry["file"].endswith("/__init__.py"):
        search = [os.path.join(vllm_root() or "", os.path.dirname(entry["file"]))]
    finder.served.append(fullname)
    return spec_from_file_location(
        fullname,
        file,
        loader=SourceFileLoader(fullname, file),
        submodule_search_locations=search,
    )


def second(finder, others):
    """``finder`` arrives where ``others`` are on ``sys.meta_path`` already: two overlays, both
    off; where one has served modules already, it stays as it is (turning it off would mix
    its modules with official ones) and only the newcomer is off."""
    names = [getattr(sys.modules.get(type(o).__module__), "__file__", "?") for o in others]
    why = f"two overlays in one interpreter ({names[0]} and {HERE})"
    finder.active = False
    finder.why = why
    if any(getattr(o, "served", None) for o in others):
        _say(f"off: {why}; the first serves already, so it stays")
        return
    for other in others:
        other.turn_off(why)


def status(current):
    """What this interpreter would do, as data, ``current`` being its finder (None where the
    overlay was not activated): for ``patcher status``."""
    if switched_off():
        return {"active": False, "why": f"{SWITCH}={os.environ.get(SWITCH)}"}
    try:
        manifest = read_manifest()
    except Broken as error:
        return {"active": False, "why": str(error)}
    why = check(manifest)
    if why is None and current is None:
        why = "not activated in this interpreter (python -S, or a launcher that skips .pth files)"
    if why is None and current is not None and current.active is False:
        why = current.why
    return {
        "active": why is None,
        "why": why,
        "distribution": manifest["distribution"],
        "version": manifest["version"],
        "patchsets": manifest.get("patchsets", []),
        "modules": sorted(manifest["modules"]),
    }


def plugin(current):
    """vLLM's ``general_plugins`` hook: one line in each vLLM process, saying whether the
    targets came from the overlay, and why not; ``current`` is its finder, or None."""
    import logging

    log = logging.getLogger("vllm.patcher_overlay")
    try:
        if current is None:
            if switched_off():
                log.info("patcher overlay: off (%s=%s)", SWITCH, os.environ.get(SWITCH))
            else:
                log.warning(
                    "patcher overlay: installed but not active in this process (python -S, or "
                    "a launcher that skips .pth files); vLLM runs as official"
                )
            return
        if not current.decide():
            log.warning("patcher overlay: off, vLLM runs as official: %s", current.why)
            return
        manifest = current.manifest
        foreign = [
            name
            for name in manifest["modules"]
            if name in sys.modules
            and not os.path.abspath(getattr(sys.modules[name], "__file__", "") or "").startswith(
                MODULES + os.sep
            )
        ]
        if foreign:
            log.warning("patcher overlay: %s did not come from the overlay", foreign[0])
            return
        log.info(
            "patcher overlay: active, %d modules of %s %s patched (%s)",
            len(manifest["modules"]),
            manifest["distribution"],
            manifest["version"],
            ", ".join(manifest.get("patchsets", [])),
        )
    except Exception as error:
        log.warning("patcher overlay: its check failed: %s: %s", type(error).__name__, error)
