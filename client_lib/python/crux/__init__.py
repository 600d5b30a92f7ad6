"""Crux: GPU-intensity-aware communication scheduling -- the training job's side.

    import crux
    client = crux.Client("tcp://10.0.0.1:7450", job_id="llama-7b", hosts=["host0", "host1"],
                         gpus_per_host=8)
    peer = client.add_peer("host0/nic0", "host1/nic0")
    for batch in loader:
        with client.iteration():
            ...                      # forward, backward (comm_start/comm_end), optimizer step

The native part (crux._crux) measures iterations, reports the profile to cruxd in the
background, and receives assignments (level, DSCP/traffic class, per-flow UDP source ports).
See docs/client.md. PyTorch DDP helpers: crux.ddp (imported lazily; needs torch).
"""

import atexit
import contextlib
import os
import weakref

from ._crux import Client as _NativeClient
from ._crux import now_ns

__all__ = ["Client", "now_ns", "apply_nccl_env"]

_live_clients = weakref.WeakSet()


class Client(_NativeClient):
    """A job's connection to cruxd. See crux._crux.Client for the arguments."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        _live_clients.add(self)

    @contextlib.contextmanager
    def iteration(self):
        """Marks one training iteration: `with client.iteration(): ...`."""
        self.begin_iteration()
        try:
            yield self
        finally:
            self.end_iteration()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def apply_nccl_env(client, ecn_bits=0, overwrite=False):
    """Exports the NCCL variables of the client's current assignment (NCCL_IB_TC, ...) into
    os.environ; call before the first NCCL communicator is created. Returns what was set."""
    env = client.nccl_env(ecn_bits)
    applied = {}
    for key, value in (env or {}).items():
        if overwrite or key not in os.environ:
            os.environ[key] = value
            applied[key] = value
    return applied


def _after_fork_in_child():
    # DataLoader workers and other fork()ed children inherit the client objects but not the
    # library's background thread: detach them (they become closed in the child; the parent's
    # client is unaffected).
    for c in list(_live_clients):
        try:
            c._abandon_after_fork()
        except Exception:  # pragma: no cover
            pass


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


@atexit.register
def _close_all():
    # The background threads must stop before the interpreter finalises (callbacks take the GIL).
    for c in list(_live_clients):
        try:
            c.close()
        except Exception:  # pragma: no cover - best effort at exit
            pass
