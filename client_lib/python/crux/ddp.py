"""PyTorch DistributedDataParallel integration: a communication hook that counts bytes.

    from crux.ddp import register_comm_hook
    model = torch.nn.parallel.DistributedDataParallel(model)
    register_comm_hook(model, client, peers=[client.add_peer("host0/nic0", "host1/nic0")])

The hook does what DDP's default all-reduce hook does (divide by the world size, all-reduce,
return the averaged bucket), and around it tells the client: `compute_end()` when the last
bucket of the backward pass is ready, `comm_start(peer, bytes)` when a bucket's all-reduce
starts, `comm_end(peer)` when it completes. Bytes are the on-wire bytes a rank sends in a ring
all-reduce of the bucket, 2 (n - 1) / n x bucket bytes, split evenly over `peers`.
"""

import torch
import torch.distributed as dist


class CommCounter:
    """State of the hook; `buckets` and `bytes` count what the hook has seen."""

    def __init__(self, client, peers, process_group=None):
        self.client = client
        self.peers = list(peers)
        self.process_group = process_group
        self.buckets = 0
        self.bytes = 0

    def wire_bytes(self, nbytes):
        n = dist.get_world_size(self.process_group)
        return int(2 * (n - 1) * nbytes / n) if n > 1 else 0

    def hook(self, bucket):
        # Registered as CommCounter.hook with the counter as DDP's hook state: hook(state, bucket).
        tensor = bucket.buffer()
        nbytes = tensor.numel() * tensor.element_size()
        wire = self.wire_bytes(nbytes)
        self.buckets += 1
        self.bytes += wire
        client = self.client
        if client is not None and not client.closed:
            if bucket.is_last():
                client.compute_end()
            share = wire // max(1, len(self.peers))
            for p in self.peers:
                client.comm_start(p, share)
        group = self.process_group if self.process_group is not None else dist.group.WORLD
        tensor.div_(dist.get_world_size(group))
        fut = dist.all_reduce(tensor, group=group, async_op=True).get_future()
        peers = self.peers

        def done(f):
            if client is not None and not client.closed:
                for p in peers:
                    client.comm_end(p)
            return f.value()[0]

        return fut.then(done)


def register_comm_hook(model, client, peers, process_group=None):
    """Registers the byte-counting all-reduce hook on a DDP model; returns its CommCounter."""
    if not isinstance(model, torch.nn.parallel.DistributedDataParallel):
        raise TypeError("register_comm_hook: model must be DistributedDataParallel")
    counter = CommCounter(client, peers, process_group)
    model.register_comm_hook(counter, CommCounter.hook)
    return counter
