"""The Python module `crux` on its own (no daemon): argument checking, iteration marks, close.
No sleeps and no timed assertions: waits are on conditions (wait_for_stats)."""

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
    for _ in range(12):
        with c.iteration():
            c.comm_start(peer, 1 << 20)
            c.comm_end(peer)
    # The marks went into the ring; the library thread measures them with no daemon around.
    assert c.wait_for_stats(lambda s: s["iterations"] == 12, 10.0), c.stats()
    s = c.stats()
    assert s["registered"] is False
    assert s["events_dropped"] == 0
    assert s["state_resets"] == 0 and s["rebinds"] == 0 and s["quota_refusals"] == 0
    assert c.assignment() is None
    assert c.nccl_env() is None
    assert crux.apply_nccl_env(c) == {}
    assert c.wait_for_assignment(0, 0) is None
    assert c.wait_for_assignment(0, 0, after_state_id=0) is None
    c.close()


def test_wait_for_stats_reports_failed_registrations_and_predicate_errors():
    c = make()
    # Nothing listens: each registration times out (call_timeout_ms=200) and is retried.
    assert c.wait_for_stats(lambda s: s["register_failures"] >= 1, 10.0), c.stats()
    assert "register_job" in c.stats()["last_error"]
    with pytest.raises(ZeroDivisionError):
        c.wait_for_stats(lambda s: 1 / 0, 10.0)
    assert c.wait_for_stats(lambda s: False, 0) is False
    c.close()


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
