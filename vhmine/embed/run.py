"""The embed runner: whole shards of the frozen plan through the reader, both encoders and the shard writer.

`ShardEmbedder` holds both encoders (encoders.py) and turns shards into shard files: its records are
read and preprocessed by DataLoader workers (read.py), encoded in batches that never cross a
shard, and written by `write_shard` (work.py). What a shard's files hold depends only on its
records, so the local engine (`run_local`, one embedder in this process) and the Ray engine
(ray_engine.py, one embedder per actor) write the same files. Exact duplicates within a shard are
embedded once; across shards, finalize (embed.py) keeps the first. Reads the source; writes shard
files under the job's work folder.
"""

from __future__ import annotations

import os
from pathlib import Path

from vhmine.index import image_id_for

# Tests set this to a file holding a shard number: the worker that embeds that shard removes the file
# and exits mid-shard, as a worker that dies would (the Ray engine must retry the shard).
EXIT_MARKER_ENV = "VHMINE_TEST_EXIT_MARKER"


def auto_workers(device) -> int:
    """Decoding workers: on a small CPU box they would steal cores from the encoders' matrix products."""
    cores = os.cpu_count() or 1
    if device.type == "cpu":
        return 0 if cores <= 4 else 2
    return max(1, min(16, cores - 1))


class ShardEmbedder:
    """Both encoders, loaded once on `device` in `precision` (a name, or auto: measured here; kept: the
    index's own); `embed_shards` writes one set of shard files per shard."""

    def __init__(
        self,
        clip_model: str,
        dino_model: str,
        work: str,
        *,
        device: str | None = None,
        batch_size: int = 64,
        workers: int | None = None,
        max_pixels: int = 89_478_485,
        precision: str = "auto",
        kept: bool = False,
        backend: str | None = None,
    ):
        from vhmine.embed.encoders import load_pair
        from vhmine.errors import InputError

        self.work = Path(work)
        if not self.work.is_dir():  # a Ray node that does not mount the job folder
            raise InputError(
                f"{self.work}: the job folder is not visible on this machine; put --indexes on a "
                "filesystem every node mounts, at the same path"
            )
        self.encoders = load_pair(clip_model, dino_model, device, precision, kept=kept, backend=backend)
        device = self.encoders.clip.device
        self.batch_size = batch_size
        self.workers = workers if workers is not None else auto_workers(device)
        self.max_pixels = max_pixels
        self.pin_memory = device.type == "cuda"

    def describe(self) -> dict:
        """The encoders as they run (manifest.json's `encoders`), the precision's record (its `precision`) and
        the runtime's (its `backend`: embed.backend, with the batch size)."""
        runtime = self.encoders.backend.record(self.batch_size) if self.encoders.backend else None
        return {"encoders": self.encoders.describe(), "precision": self.encoders.precision.record(), "backend": runtime}

    def embed_shards(
        self, source, shards: list[tuple[int, list[dict]]], progress=None, precision: str | None = None
    ) -> dict[str, int]:
        """Embed and write each (shard, records); returns counts of the rows written: files, ok, skipped.

        One DataLoader serves all the given shards, so its workers start once; its batches are cut
        at shard boundaries, so a shard is encoded in the same batches whoever runs it. precision: the
        job's; an embedder running another (a Ray actor restarted where `auto` measured otherwise) refuses."""
        import torch

        if precision is not None and precision != self.encoders.precision.name:
            from vhmine.errors import EncoderMismatchError

            raise EncoderMismatchError(
                f"this worker runs the encoders in {self.encoders.precision.name}, the job in {precision}; "
                "run the same command again (the job's precision is recorded: every worker then runs it)"
            )

        from vhmine.embed.read import ShardReader, collate
        from vhmine.embed.work import write_shard

        records = [rec for _, recs in shards for rec in recs]
        batches, shard_of_batch, start = [], [], 0
        for shard, recs in shards:
            for b in range(0, len(recs), self.batch_size):
                batches.append(list(range(start + b, start + min(b + self.batch_size, len(recs)))))
                shard_of_batch.append(shard)
            start += len(recs)
        last_batch = {shard: k for k, shard in enumerate(shard_of_batch)}
        reader = ShardReader(
            source, records, self.encoders.clip.preprocess, self.encoders.dino.preprocess, self.max_pixels
        )
        loader = torch.utils.data.DataLoader(
            reader,
            batch_sampler=batches,
            num_workers=self.workers,
            collate_fn=collate,
            pin_memory=self.pin_memory,
            prefetch_factor=4 if self.workers else None,
        )
        counts = {"files": 0, "ok": 0, "skipped": 0}
        buf = _new_buffer()
        for k, batch in enumerate(loader):
            shard = shard_of_batch[k]
            self._add_batch(buf, batch)
            _exit_if_marked(shard)
            if last_batch.get(shard) == k:
                write_shard(
                    self.work, shard, buf["rows"], buf["clip"], buf["dino"], self.encoders.dims, source.extra_columns
                )
                counts["files"] += len(buf["rows"])
                counts["ok"] += sum(r["status"] == "ok" for r in buf["rows"])
                counts["skipped"] += sum(r["status"] == "skipped" for r in buf["rows"])
                buf = _new_buffer()
            if progress is not None:
                progress(len(batch["items"]))
        for shard, recs in shards:  # an empty shard (cannot come from a plan, but would hang a caller)
            if not recs:
                write_shard(self.work, shard, [], [], [], self.encoders.dims, source.extra_columns)
        return counts

    def _add_batch(self, buf: dict, batch: dict) -> None:
        """Mark copies of an image seen earlier in the shard as duplicates; encode the rest."""
        import torch

        items = batch["items"]
        ok_idx = [k for k, it in enumerate(items) if it["status"] == "ok"]
        keep = []  # positions within the stacked ok tensors that are new images
        for t, k in enumerate(ok_idx):
            it = items[k]
            if it["sha256"] in buf["seen"]:
                it["status"], it["duplicate_of"] = "duplicate", buf["seen"][it["sha256"]]
            else:
                buf["seen"][it["sha256"]] = image_id_for(it["sha256"])
                keep.append(t)
        clip_vecs = dino_vecs = None
        if keep:
            # Index only when duplicates drop out: a copy would also lose the loader's pinned memory.
            sel = None if len(keep) == len(ok_idx) else torch.tensor(keep)
            clip_vecs, dino_vecs = self.encoders.encode(
                batch["clip"] if sel is None else batch["clip"][sel],
                batch["dino"] if sel is None else batch["dino"][sel],
            )
        v = 0
        for it in items:
            it.setdefault("duplicate_of", None)
            buf["rows"].append(it)
            if it["status"] == "ok":
                buf["clip"].append(clip_vecs[v])
                buf["dino"].append(dino_vecs[v])
                v += 1


def _new_buffer() -> dict:
    return {"rows": [], "clip": [], "dino": [], "seen": {}}


def _exit_if_marked(shard: int) -> None:
    marker = os.environ.get(EXIT_MARKER_ENV)
    if not marker:
        return
    try:
        wanted = Path(marker).read_text().strip()
    except OSError:
        return
    if wanted == str(shard):
        Path(marker).unlink(missing_ok=True)
        os._exit(17)


def run_local(embedder: ShardEmbedder, source, shards: list[tuple[int, list[dict]]], show_progress: bool) -> dict:
    """The local engine: every pending shard, in plan order, on this process's one embedder."""
    from tqdm import tqdm

    with tqdm(total=sum(len(r) for _, r in shards), desc="embed", unit="img", disable=not show_progress) as bar:
        return embedder.embed_shards(source, shards, progress=bar.update)
