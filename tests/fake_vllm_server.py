"""A stand-in for ``vllm serve`` on 8 GPUs, for tests on CPU: vLLM's flags, vLLM's endpoints.

It takes the arguments patcher.serving builds for vLLM (the model, --port,
--speculative-config, ...) and serves /health, /v1/completions, /v1/chat/completions and
/metrics. Every answer has ``max_tokens`` tokens; making them costs a sleep per forward pass.
Without speculation a pass makes one token. With it, each pass drafts ``num_speculative_tokens``,
accepts up to ACCEPTED_PER_DRAFT of them and adds one of its own, so a full pass makes
1 + ACCEPTED_PER_DRAFT tokens, and vLLM's spec-decode counters grow to match.

Environment knobs, for what a real server does besides answering:
  FAKE_VLLM_SECONDS_PER_PASS  seconds per forward pass (default 0.002)
  FAKE_VLLM_READY_AFTER       listen at once, answer nothing for this long (a checkpoint loading)
  FAKE_VLLM_EXIT_AT_START     print this line and exit 1 while "loading" (a crash)
  FAKE_VLLM_IGNORE_SIGTERM    "1": ignore SIGTERM (a shutdown that hangs)
  FAKE_VLLM_WORKER            "1": start a child process (a tensor-parallel worker)
  FAKE_VLLM_PID_FILE          append this process's pid and the worker's, one a line
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ACCEPTED_PER_DRAFT = 2


class Counters:
    """vLLM's spec-decode counters, one engine's worth."""

    def __init__(self, num_speculative_tokens: int) -> None:
        self.lock = threading.Lock()
        self.num_speculative_tokens = num_speculative_tokens
        self.drafts = 0
        self.draft_tokens = 0
        self.accepted = 0
        self.accepted_per_position = [0] * num_speculative_tokens
        self.generation_tokens = 0

    def generate(self, tokens: int, speculative: bool) -> int:
        """Count ``tokens`` made; return the forward passes that took."""
        passes = 0
        with self.lock:
            self.generation_tokens += tokens
            if not speculative:
                return tokens
            remaining = tokens
            while remaining > 0:
                accepted = min(ACCEPTED_PER_DRAFT, self.num_speculative_tokens, remaining - 1)
                self.drafts += 1
                self.draft_tokens += self.num_speculative_tokens
                self.accepted += accepted
                for position in range(accepted):
                    self.accepted_per_position[position] += 1
                remaining -= accepted + 1
                passes += 1
        return passes

    def prometheus(self, model_name: str, speculative: bool) -> str:
        """The page as prometheus_client writes it: HELP, TYPE, _total and _created samples."""
        labels = f'engine="0",model_name="{model_name}"'
        lines = []
        with self.lock:
            counters = [("vllm:generation_tokens", "Generation tokens.", self.generation_tokens)]
            if speculative:
                counters += [
                    ("vllm:spec_decode_num_drafts", "Number of drafts.", self.drafts),
                    ("vllm:spec_decode_num_draft_tokens", "Draft tokens.", self.draft_tokens),
                    ("vllm:spec_decode_num_accepted_tokens", "Accepted tokens.", self.accepted),
                ]
            for name, help_text, value in counters:
                lines += [
                    f"# HELP {name}_total {help_text}",
                    f"# TYPE {name}_total counter",
                    f"{name}_total{{{labels}}} {float(value)}",
                    f"{name}_created{{{labels}}} 1.7e+09",
                ]
            if speculative:
                name = "vllm:spec_decode_num_accepted_tokens_per_pos"
                lines += [
                    f"# HELP {name}_total Accepted per position.",
                    f"# TYPE {name}_total counter",
                ]
                for position, value in enumerate(self.accepted_per_position):
                    lines.append(f'{name}_total{{{labels},position="{position}"}} {float(value)}')
        return "\n".join(lines) + "\n"


def handler_for(args: argparse.Namespace, counters: Counters, seconds_per_pass: float) -> type:
    speculative = args.speculative_config is not None

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/health":
                self.answer(200, "text/plain", b"")
            elif self.path == "/metrics":
                page = counters.prometheus(args.served_model_name, speculative)
                self.answer(200, "text/plain; version=0.0.4", page.encode())
            else:
                self.answer(404, "application/json", b'{"detail": "Not Found"}')

        def do_POST(self) -> None:
            if self.path not in ("/v1/completions", "/v1/chat/completions"):
                self.answer(404, "application/json", b'{"detail": "Not Found"}')
                return
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            refusal = self.refusal(body)
            if refusal:
                status, reason = refusal
                self.answer(status, "application/json", json.dumps({"error": reason}).encode())
                return
            tokens = int(body["max_tokens"])
            time.sleep(counters.generate(tokens, speculative) * seconds_per_pass)
            text = " ".join(f"t{i}" for i in range(tokens))
            if self.path == "/v1/completions":
                choice: dict = {"index": 0, "text": text, "finish_reason": "length"}
            else:
                message = {"role": "assistant", "content": text}
                choice = {"index": 0, "message": message, "finish_reason": "length"}
            usage = {"prompt_tokens": 10, "completion_tokens": tokens, "total_tokens": tokens + 10}
            answer = {"id": "cmpl-1", "choices": [choice], "usage": usage}
            self.answer(200, "application/json", json.dumps(answer).encode())

        def refusal(self, body: dict) -> tuple[int, str] | None:
            """The status and reason vLLM would refuse ``body`` with, if it would."""
            if body.get("model") != args.served_model_name:
                return 404, f"The model `{body.get('model')}` does not exist."
            if body.get("temperature") != 0 or not isinstance(body.get("max_tokens"), int):
                return 400, "this stand-in serves greedy requests with max_tokens only"
            key = "prompt" if self.path == "/v1/completions" else "messages"
            if key not in body:
                return 400, f"{key} is required"
            return None

        def answer(self, status: int, content_type: str, data: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


def parse_args() -> argparse.Namespace:
    """The flags patcher.serving gives vLLM; anything else is an error, as it would be there."""
    parser = argparse.ArgumentParser(prog="fake vllm serve")
    parser.add_argument("model")
    parser.add_argument("--host", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--served-model-name", required=True)
    parser.add_argument("--tensor-parallel-size", type=int, required=True)
    parser.add_argument("--max-model-len", type=int)
    parser.add_argument("--trust-remote-code", action="store_true")
    parser.add_argument("--speculative-config", type=json.loads)
    args = parser.parse_args()
    spec = args.speculative_config
    if spec is not None and (
        spec.get("method") != "eagle3"
        or not spec.get("model")
        or not isinstance(spec.get("num_speculative_tokens"), int)
    ):
        parser.error(f"unusable --speculative-config {spec}")
    return args


def main() -> None:
    args = parse_args()
    pid_file = os.environ.get("FAKE_VLLM_PID_FILE")
    pids = [os.getpid()]
    if os.environ.get("FAKE_VLLM_IGNORE_SIGTERM") == "1":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if os.environ.get("FAKE_VLLM_WORKER") == "1":
        worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        pids.append(worker.pid)
    if pid_file:
        with open(pid_file, "a") as pids_out:
            pids_out.writelines(f"{pid}\n" for pid in pids)
    print(f"INFO fake vllm: loading {args.model} on {args.tensor_parallel_size} GPUs", flush=True)
    if crash := os.environ.get("FAKE_VLLM_EXIT_AT_START"):
        print("Traceback (most recent call last):", file=sys.stderr)
        print(crash, file=sys.stderr, flush=True)
        sys.exit(1)
    spec = args.speculative_config
    counters = Counters(spec["num_speculative_tokens"] if spec else 0)
    seconds_per_pass = float(os.environ.get("FAKE_VLLM_SECONDS_PER_PASS", "0.002"))
    server = ThreadingHTTPServer(
        (args.host, args.port), handler_for(args, counters, seconds_per_pass)
    )
    server.daemon_threads = True
    time.sleep(float(os.environ.get("FAKE_VLLM_READY_AFTER", "0")))
    print(f"INFO fake vllm: serving on http://{args.host}:{args.port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
