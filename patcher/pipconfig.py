"""Where pip gets packages on this machine, as uv options: uv does not read pip's config.

Read from ``pip config list`` (files and ``PIP_*`` variables, as pip merges them), so the
repository never names an index: whatever pip is set up to use, uv uses too.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from dataclasses import dataclass

from patcher.errors import PatcherError

USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/?#@\s]*@")
"""The ``user:password@`` of a URL, wherever one appears in a text."""


def redacted(text: str) -> str:
    """``text`` with the credentials of every URL in it replaced by ``****``: an index URL may
    carry them (``https://user:token@host/simple``), and none may be printed or stored."""
    return USERINFO.sub(r"\1****@", text)


SECTIONS = (":env:", "install", "global")
"""pip's precedence: environment variables, then the ``install`` section, then ``global``."""


@dataclass(frozen=True)
class PipSources:
    """The package sources and policies pip is configured with."""

    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    constraints: tuple[str, ...] = ()
    no_index: bool = False
    cert: str | None = None
    timeout: str | None = None

    def uv_options(self) -> list[str]:
        """The same sources as options of ``uv pip install``."""
        options = []
        if self.no_index:
            options.append("--no-index")
        if self.index_url:
            options += ["--index-url", self.index_url]
        for url in self.extra_index_urls:
            options += ["--extra-index-url", url]
        for link in self.find_links:
            options += ["--find-links", link]
        for path in self.constraints:
            options += ["--constraint", path]
        return options

    def uv_environment(self) -> dict[str, str]:
        """Variables for uv: pip's CA bundle and timeout."""
        env = {}
        if self.cert:
            env["SSL_CERT_FILE"] = self.cert
        if self.timeout:
            env["UV_HTTP_TIMEOUT"] = self.timeout
        return env


def parse(listing: str) -> PipSources:
    """``PipSources`` from the output of ``pip config list`` (``section.key='value'`` lines)."""
    found: dict[tuple[str, str], str] = {}
    for line in listing.splitlines():
        name, sep, raw = line.partition("=")
        section, dot, key = name.rpartition(".")
        if not sep or not dot:
            continue
        try:
            value = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            value = raw
        found[(section, key)] = str(value)

    def get(*keys: str) -> str | None:
        return next(
            (found[(s, k)] for s in SECTIONS for k in keys if (s, k) in found),
            None,
        )

    def many(key: str) -> tuple[str, ...]:
        return tuple((get(key) or "").split())

    return PipSources(
        index_url=get("index-url"),
        extra_index_urls=many("extra-index-url"),
        find_links=many("find-links"),
        constraints=many("constraint"),
        no_index=(get("no-index") or "").lower() in ("1", "true", "yes", "on"),
        cert=get("cert"),
        timeout=get("default-timeout", "timeout"),
    )


def pip_sources(python: str = sys.executable) -> PipSources:
    """What pip run by ``python`` is configured with."""
    done = subprocess.run(
        [python, "-m", "pip", "config", "list"], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise PatcherError(f"cannot read pip's configuration: {tail}")
    return parse(done.stdout)
