"""The Python module `crux` on its own (no daemon): argument checking, iteration marks, close."""

import time

import pytest

import crux


def make(**kw):
    args = dict(endpoint="tcp://127.0.0.1:1", job_id="py-unit", hosts=["host0", "host1"],
                call_timeout_ms=200, end_job_on_close=False)
    args.update(kw)
    return crux.Client(**args)


def test_bad_arguments_name_the_field():
    with pytest.raises(ValueError, match="options.job_id"):
        make(job_id="bad id")
    with pytest.raises(ValueError, match="options.placement"):
        make(hosts=[])
    with pytest.raises(ValueError, match="gpus_per_host"):
        make(gpus_per_host=[1, 2, 3])
    with pytest.raises(ValueError, match="options.endpoint"):
        make(endpoint="")


def test_iterations_are_measured_while_the_daemon_is_unreachable():
    c = make(gpus_per_host=[2, 2])
    peer = c.add_peer("host0/nic0", "host1/nic0")
    assert c.add_peer("host0/nic0", "host1/nic0") == peer
    with pytest.raises(ValueError, match="local_nic"):
        c.add_peer("bad nic", "host1/nic0")
    t0 = time.monotonic()
    for _ in range(12):
        with c.iteration():
            time.sleep(0.005)
            c.comm_start(peer, 1 << 20)
            c.comm_end(peer)
    assert time.monotonic() - t0 < 2.0  # Marks never wait for the (absent) daemon.
    deadline = time.monotonic() + 5
    while c.stats()["iterations"] < 12 and time.monotonic() < deadline:
        time.sleep(0.01)
    s = c.stats()
    assert s["iterations"] == 12
    assert s["registered"] is False
    assert s["events_dropped"] == 0
    assert c.assignment() is None
    assert c.nccl_env() is None
    assert crux.apply_nccl_env(c) == {}
    assert c.wait_for_assignment(0, 0.05) is None


def test_close_is_idempotent_and_final():
    c = make()
    c.on_assignment(lambda a: None)
    c.close()
    c.close()
    assert c.closed
    with pytest.raises(RuntimeError, match="closed"):
        c.begin_iteration()


def test_context_manager_closes():
    with make() as c:
        with c.iteration():
            pass
    assert c.closed


def test_now_ns_is_monotonic():
    a = crux.now_ns()
    b = crux.now_ns()
    assert b >= a > 0


def test_forked_child_detaches_and_parent_keeps_working():
    import os
    c = make()
    pid = os.fork()
    if pid == 0:  # Child: the inherited client is detached, closing it must not hang.
        ok = c.closed
        c.close()
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    assert not c.closed
    with c.iteration():
        pass
    c.close()
