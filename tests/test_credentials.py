"""An index URL with ``user:password@`` in it: the password is never printed or stored.

The index is a loopback server (fakeindex) that asks for no authentication; the credentials
ride in the URL as a private index's would. Every command runs as the installed console script,
and its output, its errors and every file under the cache dir (names and bytes) are searched
for the password.
"""

from __future__ import annotations

import os
import subprocess
import venv
from collections.abc import Iterator
from pathlib import Path

import pytest
from commandline import PATCHER
from fakeindex import FakeIndex, build_wheel, loopback_server, own_cache
from pytest_httpserver import HTTPServer

from patcher.errors import PatcherError
from patcher.pipconfig import pip_sources, redacted
from patcher.venvs import Uv

SECRET = "s3cr3t-pw"


@pytest.fixture(scope="module")
def server() -> Iterator[HTTPServer]:
    yield from loopback_server()


@pytest.fixture
def fake(server: HTTPServer) -> Iterator[FakeIndex]:
    server.clear()
    fake = FakeIndex(server, build_wheel(padding=1024), other_versions=("0.15.1",))
    yield fake
    fake.release_all()


def with_credentials(url: str) -> str:
    return url.replace("http://", f"http://patcher-user:{SECRET}@")


def fake_installation(tmp_path: Path) -> Path:
    """An empty venv whose path holds a dist-info for vllm 9.9.9: a release no index has."""
    site = tmp_path / "site"
    (site / "vllm").mkdir(parents=True)
    (site / "vllm/__init__.py").write_text("")
    info = site / "vllm-9.9.9.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 9.9.9\n\n")
    rows = ["vllm/__init__.py,,", f"{info.name}/METADATA,,", f"{info.name}/RECORD,,"]
    (info / "RECORD").write_text("\n".join(rows) + "\n")
    venv.create(tmp_path / "env", symlinks=True)
    python = tmp_path / "env/bin/python"
    purelib = subprocess.check_output(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True
    )
    (Path(purelib.strip()) / "site.pth").write_text(f"{site}\n")
    return python


def leaks(folder: Path) -> list[str]:
    """Every file under ``folder`` whose name or bytes hold the password."""
    return [
        str(p)
        for p in folder.rglob("*")
        if SECRET in str(p) or (p.is_file() and SECRET.encode() in p.read_bytes())
    ]


def test_credentials_in_the_index_url_are_never_printed_or_stored(
    fake, tmp_path, monkeypatch
) -> None:
    cache = own_cache(tmp_path, monkeypatch, timeout=5)
    python = fake_installation(tmp_path)
    url = with_credentials(fake.url)
    runs = {
        # PIP_INDEX_URL, as the issue found it
        # the fake index's stand-in wheel drifts from the real patchset (exit 1 since issue 41)
        "diff": (["diff", "--vllm", "0.16.0", "--allow-drift"], {"PIP_INDEX_URL": url}),
        "unknown release": (["diff", "--vllm", "9.9.9"], {"PIP_INDEX_URL": url}),
        "wheel missing": (["diff", "--vllm", "0.15.1"], {"PIP_INDEX_URL": url}),
        "matrix": (["matrix", "--versions", "0.16.0,0.15.1"], {"PIP_INDEX_URL": url}),
        "status": (["status", "--installed", "--python", str(python)], {"PIP_INDEX_URL": url}),
        # --index-url
        "option": (["diff", "--vllm", "9.9.9", "--index-url", url], {}),
    }
    seen = {}
    for name, (argv, env) in runs.items():
        done = subprocess.run(
            [PATCHER, *argv],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, **env},
            check=False,
        )
        seen[name] = (done.returncode, done.stdout + done.stderr)
    assert {n: SECRET in text for n, (_, text) in seen.items()} == dict.fromkeys(runs, False)
    assert seen["diff"][0] == 0  # the credentialed index works: only what is shown is redacted
    assert "not on the index http://****@127.0.0.1:" in seen["unknown release"][1]
    assert "http://****@127.0.0.1" in seen["wheel missing"][1]
    assert "http://****@127.0.0.1" in seen["status"][1]
    assert list((cache / "checked/index").iterdir())  # the listing was cached, under its name
    assert leaks(cache) == []


def test_uv_logs_its_command_line_without_the_password(tmp_path, monkeypatch) -> None:
    """The verify and serving venvs pass pip's index to uv on its command line, which uv's log
    in the cache keeps. Real uv, failing fast: the interpreter it is given does not exist."""
    cache = own_cache(tmp_path, monkeypatch, timeout=5)
    cache.mkdir()
    log = cache / "uv.log"
    index = f"http://patcher-user:{SECRET}@127.0.0.1:9/simple/"
    with log.open("w") as out, pytest.raises(PatcherError):
        Uv(out, log, pip_sources()).run(
            ["pip", "install", "--python", str(tmp_path / "none"), "--index-url", index, "x"], "x"
        )
    assert "--index-url http://****@127.0.0.1:9/simple/" in log.read_text()
    assert leaks(cache) == []


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("https://u:p@host/simple", "https://****@host/simple"),
        ("https://token@host/simple", "https://****@host/simple"),
        ("error: HTTPS://u:p@h/x and ftp://a:b@c/", "error: HTTPS://****@h/x and ftp://****@c/"),
        ("https://host/simple/pkg@1.0", "https://host/simple/pkg@1.0"),  # no userinfo
        ("user@example.org wrote", "user@example.org wrote"),
    ],
)
def test_redacted_hides_userinfo_only(text, shown) -> None:
    assert redacted(text) == shown
