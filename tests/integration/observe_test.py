#!/usr/bin/env python3
"""What the scheduler tells about a running job (docs/operability.md): the stall
report (PS_STALL_REPORT, SIGUSR1 to the launcher) and the metrics endpoint
(PS_METRICS_PORT, tracker/launch --metrics).

Usage: observe_test.py BEHAVIOUR LAUNCHER APP

BEHAVIOUR is one of the functions in BEHAVIOURS below; APP is observe_app (see
observe_app.cc for its modes). Heartbeats keep their defaults (every 1 s, dead after
10 s) throughout.
"""
import os
import re
import signal
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from liveness_test import Job, free_port, run_checks, wait_until  # noqa: E402

DEFAULTS = {}  # heartbeats as a user gets them
SLACK_S = 5    # the bound: a stall is reported within PS_STALL_REPORT + 5 s


def first_seen(proc, pattern, limit_s):
    """time.monotonic() when pattern first matched proc's output, or None."""
    seen = []

    def found():
        if re.search(pattern, proc.text(), re.M):
            seen.append(time.monotonic())
            return True
        return False
    return seen[0] if wait_until(found, limit_s, poll_s=0.05) else None


def _clock_barrier_stall(launcher, app, f, stall_s):
    env = dict(DEFAULTS, PS_CONSISTENCY="bsp")
    if stall_s is not None:
        env["PS_STALL_REPORT"] = str(stall_s)
    bound = (30 if stall_s is None else stall_s) + SLACK_S
    with Job() as job:
        p = job.launch(app, launcher, 3, 1, ["--mode=clock_mismatch"], timeout_s=bound + 60,
                       env=env)
        # Worker 0 stays in its second Clock(); the others enter the barrier.
        hung = first_seen(p, r"(worker (0: ending one clock more|[12]: entering the worker "
                             r"barrier)[\s\S]*){3}", 60)
        assert hung is not None, "the workers never reached the barrier"
        clock_line = (r"\[scheduler\] .*stall: worker 0 waits in Clock\(\) ending clock 1 "
                      r"\([\d.]+ s so far\) for workers 1, 2$")
        barrier_line = (r"\[scheduler\] .*stall: workers 1, 2 wait in Barrier\(workers\) "
                        r"for worker 0$")
        reported = first_seen(p, barrier_line, bound + 10)
        f.expect(reported is not None, "no stall line naming the workers in the barrier")
        if reported is not None:
            late = reported - hung
            f.expect(late <= bound, f"the stall was reported {late:.1f} s after the hang "
                     f"(bound: PS_STALL_REPORT + {SLACK_S} = {bound} s)")
            print(f"stall reported {late:.1f} s after the last worker entered the barrier")
        f.expect(re.search(clock_line, p.text(), re.M),
                 "no stall line naming worker 0's Clock() wait and the workers behind it")
        f.expect(len(re.findall(r"stall: nothing has progressed", p.text())) == 1,
                 "the stall was reported more than once (or not at all)")
        # SIGUSR1 to the launcher: the same, on demand.
        os.kill(p.proc.pid, signal.SIGUSR1)
        on_demand = first_seen(
            p, r"\[scheduler\] .*waits: workers 1, 2 wait in Barrier\(workers\) for worker 0$", 10)
        f.expect(on_demand is not None, "SIGUSR1 to the launcher printed no 'waits:' lines")
        f.expect(re.search(r"\[scheduler\] .*waits: worker 0 waits in Clock\(\) ending clock 1",
                           p.text(), re.M), "SIGUSR1: no line for worker 0's Clock() wait")
        f.expect(p.proc.poll() is None, "the job ended (SIGUSR1 must not stop it)")
        os.kill(p.proc.pid, signal.SIGTERM)
        f.expect(wait_until(lambda: p.poll() is not None, 15), "the launcher did not stop")
        f.expect(not job.left(), f"processes left: {job.left()}")


def clock_barrier_stall_is_reported(launcher, app, f):
    _clock_barrier_stall(launcher, app, f, 3)


def clock_barrier_stall_is_reported_with_the_default_delay(launcher, app, f):
    _clock_barrier_stall(launcher, app, f, None)


def stopped_server_stall_is_reported(launcher, app, f):
    """By hand, as on several hosts: server 1 is stopped while the worker pushes to it."""
    stall_s = 3
    with Job() as job:
        nodes = job.start_by_hand(app, 1, 2, ["--mode=push_loop", "--run_s=60"],
                                  extra_env={"PS_STALL_REPORT": str(stall_s),
                                             "PS_HEARTBEAT_INTERVAL": "1",
                                             "PS_HEARTBEAT_TIMEOUT": "10"})
        worker, scheduler = nodes["worker 0"], nodes["scheduler"]
        assert first_seen(worker, r"worker 0: pushing", 60), "the worker never started"
        time.sleep(1)
        os.killpg(nodes["server 1"].proc.pid, signal.SIGSTOP)
        stopped = time.monotonic()
        request_line = (r"stall: worker 0 waits in Push\(timestamp \d+\) \([\d.]+ s so far\) "
                        r"for server 1$")
        reported = first_seen(scheduler, request_line, stall_s + SLACK_S + 5)
        f.expect(reported is not None, "no stall line naming the push waiting for server 1")
        if reported is not None:
            late = reported - stopped
            f.expect(late <= stall_s + SLACK_S, f"reported {late:.1f} s after the stop "
                     f"(bound {stall_s + SLACK_S} s)")
            print(f"stall reported {late:.1f} s after server 1 was stopped")
        f.expect(re.search(r"stall: server 1 has been silent for [\d.]+ s", scheduler.text()),
                 "the report does not say that server 1 is silent")
        os.killpg(nodes["server 1"].proc.pid, signal.SIGCONT)


def _prometheus_parser():
    """Debian's python3-prometheus-client (tracker/build installs it with the tests),
    also from a python3 that is not Debian's own."""
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError:
        sys.path.append("/usr/lib/python3/dist-packages")
        try:
            from prometheus_client.parser import text_string_to_metric_families
        except ImportError:
            raise AssertionError("python3-prometheus-client is not installed (tracker/build "
                                 "installs it when it builds the tests)")
    return text_string_to_metric_families


def _metrics(url):
    text_string_to_metric_families = _prometheus_parser()
    with urllib.request.urlopen(url, timeout=5) as r:
        f = {fam.name: fam for fam in text_string_to_metric_families(r.read().decode())}
    return f


def _value(families, family, sample, **labels):
    fam = families.get(family)
    if fam is None:
        return None
    for s in fam.samples:
        if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items()):
            return s.value
    return None


def metrics_scrape_counts_match(launcher, app, f):
    workers, servers, pushes, pulls = 2, 2, 60, 30
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    with Job() as job:
        hold = os.path.join(job.tmp.name, "go")
        p = job.launch(app, launcher, workers, servers,
                       ["--mode=counted", f"--pushes={pushes}", f"--pulls={pulls}",
                        "--pause_ms=40", f"--hold_file={hold}"],
                       timeout_s=120, env=DEFAULTS, options=["--metrics", str(port)])
        totals = []  # every worker's requests, per scrape while they work

        def scrape_during():
            try:
                fams = _metrics(url)
            except (OSError, urllib.error.URLError):
                return False
            t = sum(_value(fams, "herdps_requests", "herdps_requests_total",
                           node=f"worker {w}", kind=k) or 0
                    for w in range(workers) for k in ("push", "pull"))
            totals.append(t)
            return len(re.findall(r"worker \d: did", p.text())) == workers
        wait_until(scrape_during, 90, poll_s=0.3)
        f.expect(len(re.findall(r"worker \d: did", p.text())) == workers,
                 "the workers did not finish their requests")
        f.expect(all(a <= b for a, b in zip(totals, totals[1:])),
                 f"request counters went down between scrapes: {totals}")
        f.expect(any(0 < a < b for a, b in zip(totals, totals[1:])),
                 f"request counters did not grow while the workers worked: {totals}")

        expected = {(w, "push"): pushes for w in range(workers)}
        expected.update({(w, "pull"): pulls for w in range(workers)})
        final = {}

        def counts_in():
            try:
                fams = _metrics(url)
            except (OSError, urllib.error.URLError) as e:
                final["error"] = e
                return False
            final["f"] = fams
            return all(_value(fams, "herdps_requests", "herdps_requests_total",
                              node=f"worker {w}", kind=k) == n
                       for (w, k), n in expected.items())
        print(f"requests the workers had made, by scrape: {totals}")
        if not f.expect(wait_until(counts_in, 10, poll_s=0.3),
                        f"the workers' request counts never matched what they did "
                        f"(last scrape error: {final.get('error')})"):
            return
        fams = final["f"]
        for k, per_worker in (("push", pushes), ("pull", pulls)):
            served = sum(_value(fams, "herdps_served_requests", "herdps_served_requests_total",
                                node=f"server {s}", kind=k) or 0 for s in range(servers))
            f.expect(served == workers * per_worker,
                     f"servers took {served} {k} requests, workers made {workers * per_worker}")
        for w in range(workers):
            count = _value(fams, "herdps_request_latency_seconds",
                           "herdps_request_latency_seconds_count", node=f"worker {w}")
            f.expect(count == pushes + pulls, f"worker {w}'s latency histogram counts {count}")
            inf = _value(fams, "herdps_request_latency_seconds",
                         "herdps_request_latency_seconds_bucket", node=f"worker {w}", le="+Inf")
            f.expect(inf == count, f"worker {w}: +Inf bucket {inf} != count {count}")
            sent = _value(fams, "herdps_sent_bytes", "herdps_sent_bytes_total",
                          node=f"worker {w}")
            f.expect(sent and sent > 0, f"worker {w} sent {sent} bytes")
        names = [f"worker {w}" for w in range(workers)] + [f"server {s}" for s in range(servers)]
        for name in names:
            f.expect(_value(fams, "herdps_node_live", "herdps_node_live", node=name) == 1,
                     f"{name} is not live in the metrics")
        f.expect(_value(fams, "herdps_stalled", "herdps_stalled") == 0, "stalled is not 0")
        # Other requests get clear answers.
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/other", timeout=5)
            f.append("/other was answered 200")
        except urllib.error.HTTPError as e:
            f.expect(e.code == 404, f"/other: HTTP {e.code}")
        try:
            urllib.request.urlopen(urllib.request.Request(url, data=b"x", method="POST"),
                                   timeout=5)
            f.append("POST was answered 200")
        except urllib.error.HTTPError as e:
            f.expect(e.code == 405, f"POST: HTTP {e.code}")
        open(hold, "w").close()
        f.expect(wait_until(lambda: p.poll() is not None, 30), "the job did not end")
        f.expect(p.proc.returncode == 0, f"the launcher exited {p.proc.returncode}")
        f.expect(not job.left(), f"processes left: {job.left()}")


def metrics_port_taken_is_a_clear_error(launcher, app, f):
    import socket
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        with Job() as job:
            p = job.launch(app, launcher, 1, 1, ["--mode=counted", "--pushes=1", "--pulls=1"],
                           timeout_s=60, env=DEFAULTS, options=["--metrics", str(port)])
            f.expect(wait_until(lambda: p.poll() is not None, 60), "the job did not end")
            f.expect(p.proc.returncode not in (0, 124), f"the launcher exited {p.proc.returncode}")
            f.expect(re.search(rf"PS_METRICS_PORT=127.0.0.1:{port}: cannot listen", p.text()),
                     "no error naming PS_METRICS_PORT and the address")
            f.expect(not job.left(), f"processes left: {job.left()}")


BEHAVIOURS = {fn.__name__: fn for fn in (
    clock_barrier_stall_is_reported, clock_barrier_stall_is_reported_with_the_default_delay,
    stopped_server_stall_is_reported, metrics_scrape_counts_match,
    metrics_port_taken_is_a_clear_error)}


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in BEHAVIOURS:
        print(__doc__, file=sys.stderr)
        return 2
    behaviour, launcher, app = sys.argv[1], sys.argv[2], os.path.realpath(sys.argv[3])
    return run_checks(lambda f: BEHAVIOURS[behaviour](launcher, app, f))


if __name__ == "__main__":
    sys.exit(main())
