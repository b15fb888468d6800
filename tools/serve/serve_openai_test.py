#!/usr/bin/env python3
"""serve_openai_test.py SERVE GENERATE ELF GGUF SITE_MARKER: tools/serve against real clients.

Starts tools/serve on loopback (--port 0) over SmolLM2-135M-Instruct's decode_gguf stage and
talks to it with the `openai` Python package (pinned wheels unpacked next to SITE_MARKER) and
curl. The server's answers are checked against tools/generate, which drives the same API in
one process: greedy completions and chat answers are the same text, seeded sampling is the
same draw, usage counts the prompt tokens generate reports; so is each of four requests sent at
once (batched two at a time, --parallel 2). Then: streaming (server-sent
events) gives the non-streamed text, a seed repeats, stop strings cut, bad requests get an
OpenAI-style 4xx body and leave the server up, and SIGTERM in the middle of a stream finishes
that stream and exits 0.
"""
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

SERVE, GENERATE, ELF, GGUF, MARKER = sys.argv[1:6]
sys.dont_write_bytecode = True  # nothing written into the external repository's folder
sys.path.insert(0, os.path.dirname(os.path.abspath(MARKER)))
import openai  # noqa: E402  (from the pinned wheels, not the system)

MODEL = "smollm2"
CONTEXT = 512
MODEL_FLAGS = ["--elf", ELF, "--weights", GGUF, "--tokenizer", GGUF, "--max_context", str(CONTEXT)]
TMP = os.environ.get("TEST_TMPDIR", "/tmp")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr, flush=True)


def generate(prompt, new_tokens, *extra):
    """tools/generate's new text and its prompt token count, for the same request."""
    r = subprocess.run([GENERATE, *MODEL_FLAGS, "--prompt", prompt, "--max_new_tokens", str(new_tokens), *extra],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        sys.exit(f"generate failed ({r.returncode}): {r.stderr}")
    text = r.stdout
    if "--chat" not in extra:
        assert text.startswith(prompt), text
        text = text[len(prompt):]
    assert text.endswith("\n"), repr(text)
    n = int(re.search(r"\[generate\] prompt (\d+) tokens", r.stderr).group(1))
    return text[:-1], n


def start_server():
    err = open(os.path.join(TMP, "serve.stderr"), "w")
    proc = subprocess.Popen([SERVE, *MODEL_FLAGS, "--port", "0", "--model_name", MODEL, "--max_queue", "4",
                             "--parallel", "2"],
                            stdout=subprocess.PIPE, stderr=err, text=True)
    line = []
    reader = threading.Thread(target=lambda: line.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(120)
    m = re.match(r"serve: listening on (http://127\.0\.0\.1:\d+)$", line[0].strip()) if line else None
    if not m:
        proc.kill()
        sys.exit(f"serve did not start: {line}; stderr: {open(err.name).read()}")
    return proc, m.group(1)


def raw_post(url, body):
    """POST a raw body (the client cannot send malformed JSON): (status, parsed body)."""
    req = urllib.request.Request(url, data=body.encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def expect_error(call, status, param, code, message, what):
    try:
        call()
    except openai.APIStatusError as e:
        check(e.status_code == status, f"{what}: status {e.status_code}, expected {status}")
        body = e.body if isinstance(e.body, dict) else {}
        check(body.get("type") in ("invalid_request_error", "rate_limit_error"), f"{what}: error body {e.body}")
        check(body.get("param") == param, f"{what}: param {body.get('param')!r}, expected {param!r}")
        check(body.get("code") == code, f"{what}: code {body.get('code')!r}, expected {code!r}")
        check(message in str(body.get("message")), f"{what}: message {body.get('message')!r} lacks {message!r}")
        return
    check(False, f"{what}: accepted")


def main():
    # The references first (each loads the model once in its own process).
    prompt = "The capital of France is"
    question = "What is the capital of France?"
    story = "Once upon a time"
    ref_text, ref_n = generate(prompt, 12)
    chat_text, chat_n = generate(question, 24, "--chat")
    sampled_ref, _ = generate(story, 16, "--temperature", "0.8", "--top_p", "0.9", "--top_k", "40", "--seed", "7")
    long_ref, _ = generate(story, 120)

    proc, base = start_server()
    client = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0, timeout=120)
    try:
        ids = [m.id for m in client.models.list()]
        check(ids == [MODEL], f"models: {ids}")

        # Greedy: the same text as generate, usage from the same tokenization.
        r = client.completions.create(model=MODEL, prompt=prompt, max_tokens=12, temperature=0)
        check(r.choices[0].text == ref_text, f"completion {r.choices[0].text!r} != generate's {ref_text!r}")
        check("Paris" in r.choices[0].text, f"no Paris in {r.choices[0].text!r}")
        check(r.choices[0].finish_reason == "length", f"finish_reason {r.choices[0].finish_reason}")
        check((r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.total_tokens) == (ref_n, 12, ref_n + 12),
              f"usage {r.usage}, generate's prompt {ref_n} tokens")
        check(r.object == "text_completion" and r.model == MODEL, f"completion object {r.object} {r.model}")

        c = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": question}],
                                           max_tokens=24, temperature=0)
        check(c.choices[0].message.content == chat_text,
              f"chat {c.choices[0].message.content!r} != generate --chat's {chat_text!r}")
        check(c.choices[0].message.role == "assistant", f"role {c.choices[0].message.role}")
        check(c.usage.prompt_tokens == chat_n, f"chat usage {c.usage}, generate's prompt {chat_n} tokens")

        # Streaming: the same text in pieces; the first delta opens the assistant's turn,
        # the last carries the finish reason, then the usage.
        chunks = list(client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": question}],
                                                     max_tokens=24, temperature=0, stream=True,
                                                     stream_options={"include_usage": True}))
        check(chunks[0].choices[0].delta.role == "assistant", f"first chunk {chunks[0]}")
        streamed = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
        check(streamed == chat_text, f"streamed chat {streamed!r} != {chat_text!r}")
        check(len([ch for ch in chunks if ch.choices and ch.choices[0].delta.content]) > 3,
              f"chat stream came in {len(chunks)} chunks")
        finish = [ch.choices[0].finish_reason for ch in chunks if ch.choices and ch.choices[0].finish_reason]
        check(finish == [c.choices[0].finish_reason], f"stream finish reasons {finish}")
        check(chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == c.usage.completion_tokens,
              f"stream usage {chunks[-1].usage}")
        pieces = [ch.choices[0].text for ch in client.completions.create(model=MODEL, prompt=prompt, max_tokens=12,
                                                                         temperature=0, stream=True)]
        check("".join(pieces) == ref_text, f"streamed completion {pieces} != {ref_text!r}")

        # Sampling: the options map onto generate's flags (the same draw); a seed repeats.
        def sample(seed):
            return client.completions.create(model=MODEL, prompt=story, max_tokens=16, temperature=0.8, top_p=0.9,
                                             seed=seed, extra_body={"top_k": 40}).choices[0].text

        s7 = sample(7)
        check(s7 == sampled_ref, f"sampled {s7!r} != generate's {sampled_ref!r}")
        check(sample(7) == s7, "seed 7 gave two different texts")
        check(sample(8) != s7, f"seeds 7 and 8 gave the same text {s7!r}")

        # A stop string: the greedy text up to it, finish_reason stop.
        s = client.completions.create(model=MODEL, prompt=prompt, max_tokens=12, temperature=0, stop=["."])
        check(s.choices[0].text == ref_text.split(".")[0] and s.choices[0].finish_reason == "stop",
              f"stop '.': {s.choices[0].text!r} ({s.choices[0].finish_reason}) from {ref_text!r}")

        # Concurrent requests (two batched at a time under --parallel 2, the others queued
        # and joining as those finish): each gets the text it got alone.
        log_at = len(open(os.path.join(TMP, "serve.stderr")).read())
        results = {}
        start = threading.Barrier(4)  # the four requests leave together, not as their threads happen to start

        def run(name, call):
            try:
                start.wait(60)
                results[name] = call()
            except Exception as e:  # reported below as a mismatch
                results[name] = repr(e)

        calls = {
            "greedy": lambda: client.completions.create(model=MODEL, prompt=prompt, max_tokens=12,
                                                        temperature=0).choices[0].text,
            "chat": lambda: client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": question}],
                                                           max_tokens=24, temperature=0).choices[0].message.content,
            "sampled": lambda: sample(7),
            "streamed chat": lambda: "".join(
                ch.choices[0].delta.content or "" for ch in client.chat.completions.create(
                    model=MODEL, messages=[{"role": "user", "content": question}], max_tokens=24, temperature=0,
                    stream=True) if ch.choices),
        }
        want = {"greedy": ref_text, "chat": chat_text, "sampled": sampled_ref, "streamed chat": chat_text}
        threads = [threading.Thread(target=run, args=(name, call)) for name, call in calls.items()]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        for name in calls:
            check(results.get(name) == want[name], f"concurrent {name}: {results.get(name)!r} != alone {want[name]!r}")
        beside = [int(n) for n in re.findall(r"joined beside (\d+),",
                                             open(os.path.join(TMP, "serve.stderr")).read()[log_at:])]
        check(len(beside) == 4 and max(beside) >= 1, f"the concurrent requests never ran together: joined beside {beside}")

        # Bad requests: 4xx with OpenAI's error body, and the server stays up.
        expect_error(lambda: client.completions.create(model=MODEL, prompt="x", max_tokens=-1), 400, "max_tokens",
                     None, "expected 1 to", "max_tokens -1")
        expect_error(lambda: client.completions.create(model="gpt-4", prompt="x"), 404, "model", "model_not_found",
                     "'gpt-4' does not exist", "unknown model")
        expect_error(lambda: client.completions.create(model=MODEL, prompt="word " * 600, max_tokens=4), 400, None,
                     "context_length_exceeded", f"maximum context length is {CONTEXT} tokens", "prompt too long")
        expect_error(lambda: client.completions.create(model=MODEL, prompt="x", max_tokens=CONTEXT), 400,
                     "max_tokens", "context_length_exceeded", "for the completion", "max_tokens past the context")
        expect_error(lambda: client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": 7}]),
                     400, "messages[0].content", None, "a string or a list of text parts", "content of a wrong type")
        status, body = raw_post(base + "/v1/chat/completions", '{"messages": [')
        check(status == 400 and body["error"]["message"] == "the request body is not valid JSON",
              f"malformed JSON: {status} {body}")
        status, body = raw_post(base + "/v1/completions", '{"prompt": "x", "temperature": "warm"}')
        check(status == 400 and body["error"]["param"] == "temperature", f"temperature string: {status} {body}")

        # curl, streaming.
        out = subprocess.run(["curl", "-sN", "--max-time", "60", base + "/v1/completions", "-H",
                              "Content-Type: application/json", "-d",
                              json.dumps({"prompt": prompt, "max_tokens": 12, "temperature": 0, "stream": True})],
                             capture_output=True, text=True, timeout=90).stdout
        events = [e[len("data: "):] for e in out.split("\n\n") if e]
        check(events[-1] == "[DONE]", f"curl stream ends {events[-1:]}")
        check("".join(json.loads(e)["choices"][0]["text"] for e in events[:-1]) == ref_text, f"curl stream {out!r}")
        with urllib.request.urlopen(base + "/health", timeout=10) as h:
            check(json.loads(h.read()) == {"status": "ok"}, "health")

        # A full queue: while two long streams hold both slots, 8 requests at once against
        # --max_queue 4; those past the queue get 429, the rest their answer. Then the
        # streams' clients leave: their generations stop there, not at max_tokens.
        # (480 tokens: a few seconds on a quiet host, the most the 512-position context allows.)
        longs = [client.completions.create(model=MODEL, prompt=story, max_tokens=480, temperature=0, stream=True,
                                           extra_body={"ignore_eos": True}) for _ in range(2)]
        for long in longs:
            first = next(iter(long))
            check(first.choices[0].text != "", "a long stream's first chunk")
        statuses = []

        def short():
            status, _ = raw_post(base + "/v1/completions", json.dumps({"prompt": "Hi", "max_tokens": 1}))
            statuses.append(status)

        threads = [threading.Thread(target=short) for _ in range(8)]
        for t in threads:
            t.start()
        # The 4 past the queue are answered at once; then the streams' clients leave (a
        # server that never answers 429 answers nothing until the streams end by themselves).
        deadline = time.time() + 60
        while len(statuses) < 4 and time.time() < deadline:
            time.sleep(0.01)
        for long in longs:
            long.close()
        for t in threads:
            t.join(120)
        check(sorted(statuses) == [200] * 4 + [429] * 4, f"8 requests against a queue of 4: {sorted(statuses)}")
        log = open(os.path.join(TMP, "serve.stderr")).read()
        gone = re.findall(r"(\d+) new tokens in [\d.]+ \+ [\d.]+ ms, stopped: client gone", log)
        check(len(gone) == 2 and all(int(n) < 480 for n in gone), f"the abandoned streams' log lines: {gone}")

        # SIGTERM mid-stream: the stream finishes whole, then the server exits 0.
        stream = client.completions.create(model=MODEL, prompt=story, max_tokens=120, temperature=0, stream=True)
        got = []
        try:
            for ch in stream:
                got.append(ch.choices[0].text)
                if len(got) == 3:
                    proc.send_signal(signal.SIGTERM)
        except Exception as e:  # the connection cut mid-stream
            check(False, f"the stream broke after SIGTERM ({len(got)} chunks): {e!r}")
        check("".join(got) == long_ref, f"stream drained at SIGTERM: {''.join(got)!r} != {long_ref!r}")
        rc = proc.wait(timeout=60)
        check(rc == 0, f"serve exited {rc} after SIGTERM")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if failures:
        print(open(os.path.join(TMP, "serve.stderr")).read(), file=sys.stderr)
        print(f"{len(failures)} failure(s)")
        sys.exit(1)
    print("PASS")


if __name__ == "__main__":
    main()
