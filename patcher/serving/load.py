"""What every server is sent: the same greedy prompts, and how long each answer took."""

from __future__ import annotations

import base64
import json
import math
import struct
import time
import zlib
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

from patcher.errors import PatcherError, TimedOut
from patcher.serving.process import Server
from patcher.serving.setup import ServeSetup, Timeouts

WARMUP_TOKENS = 16

DEFAULT_PROMPTS = (
    "Prove that the square root of 2 is irrational. Explain each step.",
    "Write a Python function that returns the longest palindromic substring of a string, "
    "then explain its time complexity.",
    "A train leaves at 9:40 and travels 210 km at 84 km/h. When does it arrive? Show your "
    "reasoning.",
    "Implement a thread-safe LRU cache in Python with get and put, and explain the locking.",
    "Explain the difference between a process and a thread, with one example where each is "
    "the better choice.",
    "Write a SQL query that finds, for each department, the employee with the highest salary, "
    "and explain how it handles ties.",
    "Three boxes are labelled apples, oranges and mixed, and every label is wrong. Drawing one "
    "fruit from one box, how do you relabel them all? Explain.",
    "Write a Rust function that parses a line of comma-separated integers into a Vec<i64>, "
    "returning an error for bad input, and walk through it.",
)
"""Reasoning and coding prompts: what an EAGLE-3 drafter for Kimi-K2.5 is trained on."""


@dataclass(frozen=True)
class Load:
    """What both servers are sent: the same prompts, greedy, the same token budget."""

    prompts: tuple[str, ...] = DEFAULT_PROMPTS
    max_tokens: int = 512
    concurrency: int = 1
    api: str = "chat"
    """``chat`` applies Kimi's chat template, the format its drafters are trained on."""
    image_url: str | None = None
    """An image the first chat request carries, so the multimodal paths run too."""

    def to_json(self) -> dict[str, object]:
        """The load as reports record it (greedy, so temperature is always 0)."""
        return {
            "prompts": len(self.prompts),
            "max_tokens": self.max_tokens,
            "concurrency": self.concurrency,
            "api": self.api,
            "temperature": 0,
            "image_in_first_request": self.image_url is not None,
        }


@dataclass(frozen=True, kw_only=True)
class ServerRun:
    """One server's measurements under the load; built by name, as its two times and four
    per-request tuples would pass unnoticed in the wrong order."""

    startup_seconds: float
    wall_seconds: float
    output_tokens: tuple[int, ...]
    latencies: tuple[float, ...]
    outputs: tuple[str, ...]
    """Each answer as the server gave it, to compare greedy outputs between the runs."""
    prompt_tokens: tuple[int, ...] = ()
    """The prompt tokens the server counted for each request: the first one's hold the image's
    when the load carries one."""
    warm_up_prompt_tokens: int | None = None
    """The warm-up's: the first prompt again, without the image."""

    @property
    def tokens_per_second(self) -> float:
        return sum(self.output_tokens) / self.wall_seconds

    def summary(self) -> dict[str, Any]:
        return {
            "startup_seconds": round(self.startup_seconds, 1),
            "requests": len(self.output_tokens),
            "output_tokens": sum(self.output_tokens),
            "wall_seconds": round(self.wall_seconds, 3),
            "output_tokens_per_second": round(self.tokens_per_second, 2),
            "latency_p50_seconds": round(percentile(self.latencies, 0.5), 3),
            "latency_p90_seconds": round(percentile(self.latencies, 0.9), 3),
            "latencies_seconds": [round(latency, 3) for latency in self.latencies],
            "prompt_tokens_by_request": list(self.prompt_tokens),
            "warm_up_prompt_tokens": self.warm_up_prompt_tokens,
        }


def percentile(values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile: a value that was measured, never an interpolation."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


def read_prompts(path: Path) -> tuple[str, ...]:
    """A JSONL file, one ``{"prompt": "..."}`` a line."""
    if path.exists() and not path.is_file():  # a FIFO with no writer would block the read
        raise PatcherError(f"{path}: not a regular file")
    try:
        lines = path.read_bytes().decode("utf-8").splitlines()
    except OSError as error:
        raise PatcherError(f"{path}: {error.strerror}") from error
    except UnicodeDecodeError as error:
        raise PatcherError(f"{path}: not UTF-8 text ({error.reason})") from error
    prompts = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            prompt = json.loads(line)["prompt"]
        except (ValueError, KeyError, TypeError) as error:
            raise PatcherError(f'{path}:{number}: not a {{"prompt": "..."}} object') from error
        if not isinstance(prompt, str) or not prompt:
            raise PatcherError(f"{path}:{number}: the prompt is not a non-empty string")
        prompts.append(prompt)
    if not prompts:
        raise PatcherError(f"{path}: no prompts")
    return tuple(prompts)


def tiny_png_url(size: int = 56) -> str:
    """A ``data:`` URL of a small RGB gradient PNG, written without an imaging library."""
    rows = b"".join(
        b"\0" + bytes(v for x in range(size) for v in (x * 4 % 256, y * 4 % 256, 128))
        for y in range(size)
    )

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows))
    return "data:image/png;base64," + base64.b64encode(png + chunk(b"IEND", b"")).decode()


@dataclass(frozen=True)
class Answer:
    """One request's answer and the tokens the server counted for it."""

    completion_tokens: int
    prompt_tokens: int
    output: str


def complete(
    base_url: str,
    served_model_name: str,
    api: str,
    prompt: str,
    max_tokens: int,
    timeout: float,
    image_url: str | None = None,
) -> Answer:
    """One greedy request."""
    body: dict[str, Any] = {
        "model": served_model_name,
        "max_tokens": max_tokens,
        "temperature": 0,
    }
    if api == "chat":
        path = "/v1/chat/completions"
        content: Any = prompt
        if image_url is not None:
            content = [
                {"type": "text", "text": prompt},
                {"type": "image_url", "image_url": {"url": image_url}},
            ]
        body["messages"] = [{"role": "user", "content": content}]
    else:
        path = "/v1/completions"
        body["prompt"] = prompt
    try:
        answer = requests.post(f"{base_url}{path}", json=body, timeout=timeout)
    except requests.Timeout as error:
        raise TimedOut(f"POST {path}: no answer in {timeout:g} s") from error
    except requests.RequestException as error:
        raise PatcherError(f"POST {path}: {type(error).__name__}: {error}") from error
    if answer.status_code != 200:
        raise PatcherError(f"POST {path}: HTTP {answer.status_code}: {answer.text[:300]}")
    try:
        data = answer.json()
        tokens = int(data["usage"]["completion_tokens"])
        prompt_tokens = int(data["usage"]["prompt_tokens"])
        choice = data["choices"][0]
        output = json.dumps(choice["message"], sort_keys=True) if api == "chat" else choice["text"]
    except (ValueError, KeyError, IndexError, TypeError) as error:
        raise PatcherError(f"POST {path}: unexpected answer: {answer.text[:300]}") from error
    return Answer(tokens, prompt_tokens, str(output))


def send_load(server: Server, setup: ServeSetup, load: Load, timeouts: Timeouts) -> ServerRun:
    """Every prompt, at most ``load.concurrency`` in flight; wall time spans them all."""

    def timed(number: int, prompt: str) -> tuple[Answer, float]:
        start = time.perf_counter()
        answer = complete(
            server.base_url,
            setup.served_model_name,
            load.api,
            prompt,
            load.max_tokens,
            timeouts.request,
            load.image_url if number == 0 else None,
        )
        return answer, time.perf_counter() - start

    pool = ThreadPoolExecutor(load.concurrency)
    start = time.perf_counter()
    try:
        results = list(pool.map(timed, range(len(load.prompts)), load.prompts))
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    wall = time.perf_counter() - start
    return ServerRun(
        startup_seconds=server.startup_seconds,
        wall_seconds=wall,
        output_tokens=tuple(answer.completion_tokens for answer, _ in results),
        latencies=tuple(latency for _, latency in results),
        outputs=tuple(answer.output for answer, _ in results),
        prompt_tokens=tuple(answer.prompt_tokens for answer, _ in results),
    )


def warm_up(server: Server, setup: ServeSetup, load: Load, timeouts: Timeouts) -> Answer:
    """One short request first, so nothing lazy on the first request is timed."""
    return complete(
        server.base_url,
        setup.served_model_name,
        load.api,
        load.prompts[0],
        min(load.max_tokens, WARMUP_TOKENS),
        timeouts.request,
    )
