#!/usr/bin/python3
"""A PyTorch DDP training job that joins Crux (CPU, gloo backend; no model-code changes).

    PYTHONPATH=build/release/python /usr/bin/python3 examples/pytorch_ddp.py \
        --endpoint tcp://127.0.0.1:7450 --job-id ddp-demo --hosts host0,host1 --steps 60

Rank r runs on topology host hosts[r] (NIC "<host>/nic0"). Rank 0 owns the Crux client: it
registers the job, marks every training step with `with client.iteration():`, and counts the
gradient all-reduce bytes with the DDP communication hook from crux.ddp; the client reports the
converged profile to cruxd and receives the job's assignment (level, DSCP / traffic class,
UDP source port of its flows). On a RoCE cluster the job would export the assignment's
NCCL_IB_TC (crux.apply_nccl_env) before creating its NCCL communicators.

--summary FILE writes what rank 0 measured and received, as JSON (used by the end-to-end test).
"""

import argparse
import json
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

import crux
from crux.ddp import register_comm_hook


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def train(rank, args, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=args.world_size)
    hosts = args.hosts.split(",")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))
    ddp = nn.parallel.DistributedDataParallel(model)

    client = None
    peers = []
    if rank == 0:
        client = crux.Client(args.endpoint, args.job_id, hosts=hosts[: args.world_size],
                             gpus_per_host=1, model="mlp-64-256-10", lease_ms=args.lease_ms,
                             end_job_on_close=not args.keep_job)
        client.on_assignment(lambda a: print(
            f"crux: assignment epoch {a['epoch']} level {a['level']} dscp {a['dscp']} "
            f"NCCL_IB_TC={a['nccl_env'].get('NCCL_IB_TC', '-')}", flush=True))
        # Ring all-reduce: rank 0 sends to rank 1.
        peers = [client.add_peer(f"{hosts[0]}/nic0", f"{hosts[1 % args.world_size]}/nic0")]
    counter = register_comm_hook(ddp, client, peers)

    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.randn(32, 64)
    y = torch.randint(0, 10, (32,))
    starts = []
    for _ in range(args.steps):
        starts.append(time.monotonic())
        if client is not None:
            client.begin_iteration()
        time.sleep(args.step_sleep_ms / 1000.0)  # Stands for the GPU compute of a real model.
        opt.zero_grad()
        loss = loss_fn(ddp(x), y)
        loss.backward()
        opt.step()
        if client is not None:
            client.end_iteration()
    starts.append(time.monotonic())

    if rank == 0:
        steps = [b - a for a, b in zip(starts[1:], starts[2:])]  # Skip the warm-up step.
        steps.sort()
        summary = {
            "step_median_s": steps[len(steps) // 2],
            "steps": args.steps,
            "hook_buckets": counter.buckets,
            "hook_wire_bytes": counter.bytes,
        }
        # The profile is reported in the background; wait for its ack, then the assignment.
        client.wait_for_stats(lambda s: s["reports_sent"] >= 1, 15.0)
        summary["profile"] = client.profile()
        first = client.wait_for_assignment(0, 15.0)
        # The daemon re-plans once the converged profile arrives: wait briefly for that push.
        if first is not None:
            client.wait_for_assignment(first["epoch"], 3.0, after_state_id=first["state_id"])
        summary["assignment"] = client.assignment()
        summary["nccl_env"] = client.nccl_env()
        summary["stats"] = client.stats()
        print("crux:", json.dumps(summary), flush=True)
        if args.summary:
            with open(args.summary, "w") as f:
                json.dump(summary, f)
        client.close()
    dist.barrier()
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--endpoint", default="tcp://127.0.0.1:7450")
    p.add_argument("--job-id", default="ddp-demo")
    p.add_argument("--hosts", default="host0,host1")
    p.add_argument("--world-size", type=int, default=2)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--step-sleep-ms", type=float, default=40.0)
    p.add_argument("--lease-ms", type=int, default=0)
    p.add_argument("--keep-job", action="store_true",
                   help="do not send EndJob at exit (the job stays until its lease expires)")
    p.add_argument("--summary", default="")
    args = p.parse_args()
    if args.world_size < 2 or len(args.hosts.split(",")) < args.world_size:
        sys.exit("pytorch_ddp.py: --world-size must be >= 2 and --hosts must name one host per "
                 "rank")
    mp.spawn(train, args=(args, free_port()), nprocs=args.world_size, join=True)


if __name__ == "__main__":
    main()
