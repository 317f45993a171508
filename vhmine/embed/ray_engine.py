"""The Ray engine of `vhmine embed --engine ray`: the pending shards of the frozen plan, spread over a cluster.

One actor per GPU (`num_gpus=1`) holds both encoders (a `ShardEmbedder`, run.py); on a cluster
without GPUs, one actor per CPU, or `--ray-actors N`. Each actor decodes its shards with its own
DataLoader worker processes on its node's CPUs and writes the shard files itself into the job folder,
which every node must mount at the same path; the driver only hands out shard numbers and records.
An actor whose process dies is restarted and its shard retried (Ray's max_restarts/max_task_retries);
a shard that still fails stops the job with the finished shards kept, so a rerun of the same command
skips them. Reads nothing itself; the actors write shard files under work/shards/.
"""

from __future__ import annotations

import logging

from vhmine.errors import EncoderError, InputError, VhmineError

log = logging.getLogger(__name__)

RESTARTS = 3  # per actor: a worker that dies more often than this stops the job (rerun to resume)


def connect(address: str | None) -> bool:
    """Connect to the cluster at `address` (None: RAY_ADDRESS, a running local cluster, else start one);
    returns whether this call connected (and so should disconnect)."""
    try:
        import ray
    except ImportError:
        raise InputError("--engine ray needs Ray: pip install 'vhmine[ray]'") from None
    _check_reachable(address)
    if ray.is_initialized():
        return False
    try:
        ray.init(address=address, include_dashboard=False, logging_level=logging.WARNING, log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as err:
        raise InputError(
            f"--ray-address {address}: could not connect to a Ray cluster there ({err}); start one "
            "with `ray start --head` and pass the address it prints, or leave --ray-address out "
            "to start a local one"
        ) from None
    return True


def _check_reachable(address: str | None) -> None:
    """A HOST:PORT that nothing answers on fails in seconds here; Ray itself would retry for minutes."""
    import socket

    if not address or address in ("auto", "local"):
        return
    host, _, port = address.split("://", 1)[-1].rpartition(":")
    if not host or not port.isdigit():
        raise InputError(
            f"--ray-address {address}: expected HOST:PORT (the address `ray start --head` prints), "
            "ray://HOST:PORT, or auto"
        )
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=10).close()
    except OSError as err:
        raise InputError(
            f"--ray-address {address}: no Ray cluster answers there ({err.strerror or err}); start one "
            "with `ray start --head` and pass the address it prints, or leave --ray-address out "
            "to start a local one"
        ) from None


def _actor_plan(requested: int | None, resources: dict) -> tuple[int, dict]:
    """(how many actors, the resources of each): a GPU each where there are GPUs, else a CPU each."""
    gpus, cpus = int(resources.get("GPU", 0)), int(resources.get("CPU", 1))
    have, what = (gpus, "GPUs") if gpus else (max(1, cpus), "CPUs")
    if requested and requested > have:  # Ray would wait for the missing ones forever
        raise InputError(
            f"--ray-actors {requested}: the Ray cluster has {have} {what}, one per actor; "
            f"ask for at most {have} or add nodes"
        )
    if gpus:
        return requested or gpus, {"num_gpus": 1, "num_cpus": 1}
    return requested or have, {"num_cpus": 1}


def run_ray(
    opts, job: dict, work, source, shards: list[tuple[int, list[dict]]], on_described, precision: str = "auto"
) -> dict:
    """Embed the pending shards on the cluster; `on_described(record)` is called once the actors have
    loaded their encoders (before any shard is written). `precision`: the encoders' (embed.precision), the
    job's own when it has one; auto is measured by the first actor, and the others run what it chose, so
    every shard has the same precision. Returns counts as run_local does."""
    import ray
    from ray.exceptions import RayActorError, RayTaskError
    from tqdm import tqdm

    from vhmine.embed.precision import kept
    from vhmine.embed.run import ShardEmbedder

    started_here = connect(opts.ray_address)
    try:
        n_actors, resources = _actor_plan(opts.ray_actors, ray.cluster_resources())
        n_actors = min(n_actors, len(shards)) or 1
        actor_cls = ray.remote(ShardEmbedder).options(max_restarts=RESTARTS, max_task_retries=RESTARTS, **resources)

        def start(precision: str, kept_here: bool):
            return actor_cls.remote(
                job["clip_model"],
                job["dino_model"],
                str(work),
                device=opts.device,
                batch_size=opts.batch_size,
                workers=opts.workers,
                max_pixels=job.get("max_pixels", opts.max_pixels),
                precision=precision,
                kept=kept_here,
            )

        is_kept = bool(kept(job))
        actors = [start(precision, is_kept)]
        if precision == "auto":  # the first actor measures; the rest run its choice (embed_shards checks it)
            first = _first(ray, [actors[0].describe.remote()], RayActorError, RayTaskError)
            precision, is_kept = first["precision"]["name"], True
        actors += [start(precision, is_kept) for _ in range(n_actors - 1)]
        log.info("embedding %d shards on %d Ray actors (%s each)", len(shards), n_actors, resources)
        try:
            on_described(_first(ray, [a.describe.remote() for a in actors], RayActorError, RayTaskError))
            return _hand_out(ray, actors, source, shards, opts.progress, precision, tqdm, RayActorError, RayTaskError)
        finally:
            for a in actors:
                ray.kill(a)
    finally:
        if started_here:
            ray.shutdown()


def _first(ray, refs, *errors) -> dict:
    """Every actor's encoder record (so each node proves it loaded the models); returns the first."""
    try:
        described = ray.get(refs)
    except errors as err:
        raise EncoderError(
            f"a Ray actor could not start: {_cause(err)}. Every node needs the model files at "
            "the same path (or hub access) and the job folder mounted"
        ) from None
    if any(d["encoders"] != described[0]["encoders"] for d in described[1:]):
        log.warning("Ray actors loaded the encoders differently (device or dtype differ between nodes?)")
    return described[0]


def _hand_out(ray, actors, source, shards, show_progress, precision, tqdm, *errors) -> dict:
    """Each actor gets one shard at a time; the next goes to whichever actor finishes first."""
    counts = {"files": 0, "ok": 0, "skipped": 0}
    todo = list(shards)
    running: dict = {}
    source_ref = ray.put(source)
    bar = tqdm(total=sum(len(r) for _, r in shards), desc="embed (ray)", unit="img", disable=not show_progress)

    def submit(actor) -> None:
        shard, recs = todo.pop(0)
        running[actor.embed_shards.remote(source_ref, [(shard, recs)], None, precision)] = (actor, shard)

    try:
        for actor in actors:
            if todo:
                submit(actor)
        while running:
            done, _ = ray.wait(list(running), num_returns=1)
            actor, shard = running.pop(done[0])
            try:
                got = ray.get(done[0])
            except errors as err:
                raise VhmineError(
                    f"shard {shard} failed on the Ray cluster ({_cause(err)}); the finished shards "
                    "are kept: run the same command again to resume"
                ) from None
            for k in counts:
                counts[k] += got[k]
            bar.update(got["files"])
            if todo:
                submit(actor)
    finally:
        bar.close()
    return counts


def _cause(err) -> str:
    """The user's error inside a Ray error, without Ray's traceback banner."""
    cause = getattr(err, "cause", None) or getattr(err, "__cause__", None)
    if isinstance(cause, VhmineError):
        return str(cause)
    text = str(cause or err).strip().splitlines()
    return text[-1] if text else type(err).__name__
