#!/usr/bin/env python3
"""tools/serve under load: starts the server, runs --clients concurrent streaming clients on
loopback for --seconds, then SIGTERMs it; reports errors, completed requests, aggregate
generated tokens/s, the p50 / p99 time to first token (request sent -> first text chunk,
queueing included) and inter-token latency (the gaps between text chunks: a chunk is a
token's text, or several held back while they could start a stop string or a UTF-8
character), the server's RSS after the warm-up and at the end, and its exit status.
Plain python3 (the standard library only).

  python3 tools/serve/load_client.py --clients 32 --seconds 60 --max_tokens 32 -- \\
      bazel-bin/tools/serve/serve --elf bazel-bin/models/smollm2_135m/decode_gguf.elf \\
      --weights M.gguf --tokenizer M.gguf --parallel 8 --max_queue 64

Each client loops: a /v1/completions request with "stream": true (a prompt of its own,
greedy, max_tokens, ignore_eos so every request generates max_tokens tokens), read to
[DONE]. The first --warmup seconds are not counted.
"""
import argparse
import http.client
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time


def percentile(v, q):
    if not v:
        return float("nan")
    v = sorted(v)
    return v[min(len(v) - 1, int(round(q / 100 * (len(v) - 1))))]


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+) kB", f.read()).group(1)) / 1024


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--clients", type=int, default=32)
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--warmup", type=float, default=10)
    p.add_argument("--max_tokens", type=int, default=32)
    p.add_argument("serve", nargs=argparse.REMAINDER, help="-- the server's command (its --port is set here)")
    a = p.parse_args()
    cmd = [c for c in a.serve if c != "--"]
    if not cmd:
        p.error("give the server's command after --")
    proc = subprocess.Popen(cmd + ["--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    m = re.match(r"serve: listening on http://([\d.]+):(\d+)", proc.stdout.readline())
    if not m:
        proc.kill()
        sys.exit("the server did not start")
    host, port = m.group(1), int(m.group(2))

    t_start = time.time()
    t_warm = t_start + a.warmup
    t_end = t_warm + a.seconds
    lock = threading.Lock()
    ttft, itl, errors, done, tokens = [], [], [], [0], [0]

    def client(k):
        i = 0
        while time.time() < t_end:
            i += 1
            body = json.dumps({"prompt": f"Client {k}, request {i}: the story of a town by the sea begins",
                               "max_tokens": a.max_tokens, "temperature": 0, "stream": True, "ignore_eos": True,
                               "stream_options": {"include_usage": True}})
            try:
                conn = http.client.HTTPConnection(host, port, timeout=300)
                t0 = time.time()
                conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
                r = conn.getresponse()
                if r.status != 200:
                    raise RuntimeError(f"HTTP {r.status}: {r.read()[:200]!r}")
                first, last, gaps, n = None, None, [], 0
                for line in r:
                    line = line.strip()
                    if not line.startswith(b"data: "):
                        continue
                    data = line[6:]
                    if data == b"[DONE]":
                        break
                    ev = json.loads(data)
                    if ev.get("usage"):
                        n = ev["usage"]["completion_tokens"]
                    if ev.get("choices") and ev["choices"][0].get("text"):
                        now = time.time()
                        if first is None:
                            first = now - t0
                        else:
                            gaps.append(now - last)
                        last = now
                conn.close()
                if t0 >= t_warm and time.time() <= t_end:
                    with lock:
                        ttft.append(first)
                        itl.extend(gaps)
                        done[0] += 1
                        tokens[0] += n
            except Exception as e:  # counted and reported
                with lock:
                    errors.append(repr(e))

    threads = [threading.Thread(target=client, args=(k,), daemon=True) for k in range(a.clients)]
    for t in threads:
        t.start()
    time.sleep(max(0.0, t_warm - time.time()))
    rss_warm = rss_mib(proc.pid)
    for t in threads:
        t.join(a.seconds + a.warmup + 600)
    rss_end = rss_mib(proc.pid)
    proc.send_signal(signal.SIGTERM)
    rc = proc.wait(timeout=120)
    print(f"load_client: {a.clients} streaming clients, {a.seconds:.0f} s after a {a.warmup:.0f} s warm-up, "
          f"max_tokens {a.max_tokens}; server: {' '.join(os.path.basename(c) if i == 0 else c for i, c in enumerate(cmd))}")
    print(f"  requests completed {done[0]}, errors {len(errors)}{' (' + errors[0] + ')' if errors else ''}")
    print(f"  aggregate {tokens[0] / a.seconds:.1f} generated tokens/s")
    print(f"  time to first token: p50 {percentile(ttft, 50) * 1e3:.0f} ms, p99 {percentile(ttft, 99) * 1e3:.0f} ms")
    print(f"  inter-token latency: p50 {percentile(itl, 50) * 1e3:.1f} ms, p99 {percentile(itl, 99) * 1e3:.1f} ms")
    print(f"  server RSS {rss_warm:.0f} MiB after the warm-up, {rss_end:.0f} MiB at the end "
          f"({(rss_end / rss_warm - 1) * 100:+.1f}%); exit status after SIGTERM {rc}")


if __name__ == "__main__":
    main()
