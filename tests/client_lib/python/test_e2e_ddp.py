"""End to end: a real PyTorch DDP job (CPU, gloo, 2 processes; examples/pytorch_ddp.py) reports
through the `crux` module to a real cruxd, and cruxctl --json shows the job with a sane profile
and an assignment. Skipped when cruxd or cruxctl are not built (CRUXD_BINARY, CRUXCTL_BINARY)."""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

SOURCE = os.environ.get("CRUX_SOURCE_DIR",
                        os.path.abspath(os.path.join(os.path.dirname(__file__), "../../..")))
CRUXD = os.environ.get("CRUXD_BINARY", "")
CRUXCTL = os.environ.get("CRUXCTL_BINARY", "")

pytestmark = pytest.mark.skipif(
    not (os.path.isfile(CRUXD) and os.path.isfile(CRUXCTL)),
    reason="cruxd/cruxctl not built (CRUXD_BINARY=%r, CRUXCTL_BINARY=%r)" % (CRUXD, CRUXCTL))

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cruxctl(admin, *args):
    r = subprocess.run([CRUXCTL, "--socket", admin, "--timeout-ms", "3000", "--json", *args],
                       capture_output=True, text=True, timeout=20)
    if r.returncode != 0:
        raise RuntimeError("cruxctl %s: exit %d: %s" % (" ".join(args), r.returncode, r.stderr))
    return json.loads(r.stdout)


class Daemon:
    """A real cruxd on a random loopback port with a temporary config and state directory."""

    def __init__(self, tmp_path):
        self.port = free_port()
        self.state = tmp_path / "state"
        self.config = tmp_path / "cruxd.yaml"
        self.config.write_text(
            "topology: embedded\n"
            "state_dir: %s\n"
            "client_endpoint: tcp://127.0.0.1:%d\n"
            "insecure: true\n"
            "metrics_listen: 127.0.0.1:0\n"
            "debounce_ms: 10\n"
            "log_level: info\n" % (self.state, self.port))
        self.log_path = tmp_path / "cruxd.log"
        self.endpoint = "tcp://127.0.0.1:%d" % self.port
        self.admin = "ipc://%s/admin.sock" % self.state
        self.proc = None
        self.tmp_path = tmp_path

    def start(self, *extra_args):
        log = open(self.log_path, "a")
        self.proc = subprocess.Popen([CRUXD, "--config", str(self.config), *extra_args],
                                     stdout=log, stderr=log, cwd=self.tmp_path)
        log.close()
        deadline = time.monotonic() + 20
        while True:
            try:
                cruxctl(self.admin, "status")
                return
            except (RuntimeError, ValueError):
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.proc.kill()
                    pytest.fail("cruxd did not come up:\n" + self.log_path.read_text())
                time.sleep(0.1)

    def kill9(self):
        self.proc.kill()
        self.proc.wait(timeout=10)

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


@pytest.fixture
def daemon(tmp_path):
    d = Daemon(tmp_path)
    d.start()
    yield d
    d.stop()


def wait_until(pred, timeout=15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.02)
    return pred()


def run_job(args, env, timeout):
    """Runs a job script in a session of its own; on timeout the whole session (the launcher and
    the rank processes it spawned) is killed, so no rank is left running after the test."""
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail("job did not finish in %d s:\n%s\n%s" % (timeout, out, err))
    finally:
        try:  # Ranks that outlived their launcher.
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


def test_pytorch_ddp_job_reports_and_gets_assignment(daemon, tmp_path):
    pytest.importorskip("torch")
    summary_path = tmp_path / "summary.json"
    env = dict(os.environ)
    job = "ddp-e2e"
    r = run_job(
        [sys.executable, os.path.join(SOURCE, "examples", "pytorch_ddp.py"),
         "--endpoint", daemon.endpoint, "--job-id", job, "--hosts", "host0,host5",
         "--steps", "30", "--step-sleep-ms", "40", "--lease-ms", "60000", "--keep-job",
         "--summary", str(summary_path)],
        env, timeout=120)
    assert r.returncode == 0, "job failed:\n%s\n%s\ncruxd log:\n%s" % (
        r.stdout, r.stderr, daemon.log_path.read_text())
    summary = json.loads(summary_path.read_text())

    # The job measured itself and the client reported a converged profile.
    step_ms = summary["step_median_s"] * 1000
    profile = summary["profile"]
    assert profile is not None, summary
    assert profile["converged"]
    assert 3 <= profile["samples"] <= 10
    period_ms = profile["iteration_period_ns"] / 1e6
    assert abs(period_ms - step_ms) <= 0.25 * step_ms, (period_ms, step_ms)
    assert step_ms >= 40
    # The DDP hook counted the gradient all-reduce: 2 (n-1)/n x the model's gradient bytes
    # (64*256 + 256 + 256*10 + 10 float32 parameters) per step.
    grad_bytes = (64 * 256 + 256 + 256 * 10 + 10) * 4
    assert summary["hook_wire_bytes"] == grad_bytes * summary["steps"]
    assert profile["peers"] == [{"local_nic": "host0/nic0", "remote_nic": "host5/nic0",
                                 "bytes": grad_bytes}]

    # It received an assignment that is consistent.
    a = summary["assignment"]
    assert a is not None, summary
    assert a["epoch"] >= 1
    assert a["traffic_class"] == a["dscp"] << 2
    assert summary["nccl_env"]["NCCL_IB_TC"] == str(a["dscp"] << 2)
    assert summary["stats"]["reports_sent"] >= 1
    assert summary["stats"]["assignments_applied"] >= 1

    # cruxd agrees (cruxctl --json jobs / job ID).
    jobs = cruxctl(daemon.admin, "jobs")["jobs"]
    assert [j["job_id"] for j in jobs] == [job]
    detail = cruxctl(daemon.admin, "job", job)
    s = detail["summary"]
    assert s["state"] in ("profiling", "scheduled")
    assert s["gpus"] == 2
    assert abs(s["period_ms"] - step_ms) <= 0.25 * step_ms, (s, step_ms)
    assert s["samples"] == profile["samples"]
    assert s["epoch"] >= 1
    assert s["dscp"] == a["dscp"]
    assert sorted(detail["hosts"]) == ["host0", "host5"]


def test_fail_static_across_cruxd_kill_and_restart(daemon):
    import crux
    c = crux.Client(daemon.endpoint, "failstatic", hosts=["host2", "host9"], lease_ms=3000,
                    call_timeout_ms=300, reconnect_min_ms=50, reconnect_max_ms=500)
    peer = c.add_peer("host2/nic0", "host9/nic0")
    for _ in range(10):  # A converged report at 10 iterations at the latest, however noisy.
        with c.iteration():
            time.sleep(0.01)
            c.comm_start(peer, 1 << 20)
            time.sleep(0.002)
            c.comm_end(peer)
    assert c.wait_for_stats(lambda s: s["reports_sent"] >= 1, 15.0), c.stats()
    assert c.wait_for_assignment(0, 10.0) is not None, c.stats()
    assert wait_until(lambda: cruxctl(daemon.admin, "job", "failstatic")["summary"]["state"]
                      == "scheduled"), cruxctl(daemon.admin, "job", "failstatic")
    applied = c.assignment()

    daemon.kill9()
    # Heartbeats (every lease / 3 = 1 s) fail: the client notices, keeps its assignment, and
    # the training marks are still measured (they never wait for the daemon).
    assert c.wait_for_stats(lambda s: not s["registered"], 10.0), c.stats()
    assert c.assignment() == applied
    for _ in range(1000):
        c.begin_iteration()
        c.end_iteration()
    assert c.wait_for_stats(lambda s: s["iterations"] == 1010, 10.0), c.stats()
    assert not c.stats()["registered"]

    daemon.start()  # Same state directory and port: cruxd restores the job and its epoch.
    assert c.wait_for_stats(lambda s: s["registered"] and s["registrations"] >= 2,
                            15.0), c.stats()
    detail = cruxctl(daemon.admin, "job", "failstatic")
    assert detail["summary"]["epoch"] >= applied["epoch"]
    assert c.assignment()["epoch"] >= applied["epoch"]
    assert c.assignment()["dscp"] == applied["dscp"]  # Each job keeps its DSCP colour.
    c.close()  # EndJob: the daemon forgets the job.
    assert wait_until(lambda: cruxctl(daemon.admin, "jobs")["jobs"] == [], 5.0)


def test_client_follows_a_cruxd_state_reset(daemon):
    """An operator restarts cruxd with --fresh-state: a new state id, epochs restart at 1. The
    client must apply the new state's assignments (it used to drop them as stale forever),
    report the new state id in its heartbeats, and give the daemon its profile again."""
    import crux
    c = crux.Client(daemon.endpoint, "resetjob", hosts=["host2", "host9"], lease_ms=3000,
                    call_timeout_ms=300, reconnect_min_ms=50, reconnect_max_ms=500)
    peer = c.add_peer("host2/nic0", "host9/nic0")
    for _ in range(10):  # A converged report at 10 iterations at the latest, however noisy.
        with c.iteration():
            time.sleep(0.01)
            c.comm_start(peer, 1 << 20)
            time.sleep(0.002)
            c.comm_end(peer)
    assert c.wait_for_stats(lambda s: s["reports_sent"] >= 1, 15.0), c.stats()
    assert wait_until(lambda: cruxctl(daemon.admin, "job", "resetjob")["summary"]["state"]
                      == "scheduled"), cruxctl(daemon.admin, "job", "resetjob")
    assert c.wait_for_assignment(0, 10.0) is not None, c.stats()
    assert wait_until(lambda: c.assignment()["epoch"]
                      >= cruxctl(daemon.admin, "job", "resetjob")["summary"]["epoch"])
    before = c.assignment()
    assert before["state_id"] != 0, before

    daemon.kill9()
    daemon.start("--fresh-state")
    # UNKNOWN_JOB -> re-registration -> the new state's pushes are applied.
    after = c.wait_for_assignment(before["epoch"], 20.0, after_state_id=before["state_id"])
    assert after is not None, (c.stats(), daemon.log_path.read_text())
    assert after["state_id"] not in (0, before["state_id"]), (before, after)
    assert c.stats()["state_resets"] >= 1, c.stats()
    # The daemon lost the profile with its state: the client sent it again, so the job gets
    # scheduled in the new state too.
    assert wait_until(lambda: cruxctl(daemon.admin, "job", "resetjob")["summary"]["state"]
                      == "scheduled", 20.0), cruxctl(daemon.admin, "job", "resetjob")
    assert c.wait_for_stats(lambda s: s["reports_sent"] >= 2, 10.0), c.stats()
    assert wait_until(lambda: c.assignment()["state_id"] == after["state_id"] and
                      c.assignment()["epoch"]
                      >= cruxctl(daemon.admin, "job", "resetjob")["summary"]["epoch"], 10.0)
    c.close()
