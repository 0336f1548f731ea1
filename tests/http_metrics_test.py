#!/usr/bin/env python3
"""uring-http --metrics-path as Prometheus scrapes it: curl fetches /metrics, a strict parser of the text
exposition format (0.0.4) reads it, every executor is there, counters only grow, HEAD has no body, and
other paths are unchanged.

Usage: http_metrics_test.py URING_HTTP BACKEND
"""

import re
import select
import signal
import subprocess
import sys

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*"'
SAMPLE = re.compile(r"(%s)(\{%s(?:,%s)*\})? (-?[0-9.eE+]+|NaN|[+-]Inf)$" % (NAME, LABEL, LABEL))
HELP = re.compile(r"# HELP (%s) .+$" % NAME)
TYPE = re.compile(r"# TYPE (%s) (counter|gauge|histogram|summary|untyped)$" % NAME)

failures = []


def check(what, cond):
    if not cond:
        failures.append(what)


def parse(text):
    """{name{labels}: value}, checking every rule of the format on the way."""
    out, helped, typed, closed, current, buckets = {}, set(), {}, set(), None, {}
    check("ends with a newline", text.endswith("\n"))
    for line in text.splitlines():
        if m := HELP.match(line):
            check("HELP once: " + line, m.group(1) not in helped)
            helped.add(m.group(1))
        elif m := TYPE.match(line):
            check("TYPE after HELP: " + line, m.group(1) in helped)
            check("TYPE once: " + line, m.group(1) not in typed)
            if current:
                closed.add(current)
            current = m.group(1)
            check("family not split: " + line, current not in closed)
            typed[current] = m.group(2)
            buckets = {}  # a histogram's series: their last le and count
        elif m := SAMPLE.match(line):
            if typed.get(current) == "histogram":
                suffix = m.group(1)[len(current):] if m.group(1).startswith(current) else None
                check("histogram sample in its family: " + line, suffix in ("_bucket", "_sum", "_count"))
                if suffix == "_bucket":
                    check_bucket(buckets, m.group(2) or "", float(m.group(3)), line)
                elif suffix == "_count":
                    series = (m.group(2) or "").strip("{}")
                    check("+Inf bucket equals _count: " + line, buckets.get(series, (None, None))[1] ==
                          float(m.group(3)) and buckets[series][0] == float("inf"))
            else:
                check("sample in its family: " + line, m.group(1) == current)
            if typed.get(current) == "counter":
                check("counter named _total: " + line, current.endswith("_total"))
            key = m.group(1) + (m.group(2) or "")
            check("sample once: " + line, key not in out)
            out[key] = float(m.group(3))
        else:
            check("Prometheus text: %r" % line, False)
    return out


def check_bucket(buckets, labels, value, line):
    """A histogram's buckets: an le label, bounds rising and counts never falling within one series."""
    m = re.fullmatch(r'\{(.*?),?le="([^"]*)"\}', labels)
    check("bucket has le: " + line, m is not None)
    if not m:
        return
    series, le = m.group(1), float(m.group(2).replace("+Inf", "inf"))
    last_le, last_count = buckets.get(series, (float("-inf"), 0.0))
    check("bucket bounds rise: " + line, le > last_le)
    check("bucket counts cumulative: " + line, value >= last_count)
    buckets[series] = (le, value)


def curl(*args):
    return subprocess.run(["curl", "-sS", "--max-time", "10"] + list(args), capture_output=True, check=True).stdout


def main():
    binary, backend = sys.argv[1], sys.argv[2]
    proc = subprocess.Popen([binary, "--port", "0", "--backend", backend, "--threads", "2", "--metrics-path",
                             "/metrics"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        ready = select.select([proc.stdout], [], [], 15)[0]
        banner = proc.stdout.readline().decode() if ready else ""
        m = re.search(r"listening on 127\.0\.0\.1:(\d+)", banner)
        if not m:
            raise SystemExit("FAIL: banner %r" % banner)
        url = "http://127.0.0.1:%s" % m.group(1)
        for _ in range(5):
            check("GET / still answers", curl(url + "/") == b"hello\n")
        head_and_body = curl("-D", "-", url + "/metrics").decode()
        head, _, body = head_and_body.partition("\r\n\r\n")
        check("200: " + head, head.startswith("HTTP/1.1 200 "))
        check("content type: " + head, "Content-Type: text/plain; version=0.0.4" in head)
        first = parse(body)
        for i in (0, 1):
            check("executor %d listed" % i, 'uring_cqes_total{executor="%d"}' % i in first)
            check("executor %d gauge" % i, 'uring_operations_in_flight{executor="%d"}' % i in first)
        accepts = sum(v for k, v in first.items()
                      if k.startswith("uring_operations_started_total") and re.search(r'kind="(accept\w*|poll)"', k))
        check("accepts counted: %s" % accepts, accepts >= 1)
        latencies = [k for k in first if k.startswith("uring_operation_latency_microseconds_count")]
        check("operation latencies served: %s" % latencies, len(latencies) >= 1)
        for i in (0, 1):
            check("executor %d histograms" % i,
                  'uring_cqes_per_reap_bucket{executor="%d",le="+Inf"}' % i in first)
        for _ in range(5):
            curl(url + "/")
        second = parse(curl(url + "/metrics").decode())
        for k, v in first.items():
            if k.split("{")[0].endswith("_total"):
                check("counter %s did not shrink (%s then %s)" % (k, v, second.get(k)), second.get(k, -1) >= v)
        total = lambda figures: sum(v for k, v in figures.items() if k.startswith("uring_cqes_total"))
        check("completions grew", total(second) > total(first))
        check("HEAD has no body", curl("-I", url + "/metrics").decode().endswith("\r\n\r\n"))
        check("other paths unchanged", curl("-o", "/dev/null", "-w", "%{http_code}", url + "/metricsx") == b"404")
        proc.send_signal(signal.SIGTERM)
        check("exit 0 after SIGTERM", proc.wait(timeout=30) == 0)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    for f in failures:
        print("FAIL: " + f)
    if failures:
        sys.exit(1)
    print("uring-http /metrics (%s): ok" % backend)


if __name__ == "__main__":
    main()
