"""Seed the curation store from mined pairs: step I of VHTest (initial VH instance tasks).

Reads `runs/<run>/pairs.parquet` (a file, or the folder of shards of a large Ray run; and `run.json` beside it, when
present) as `vhmine mine` writes
them; writes the store's images (source "mined"), pairs, the run, and one open task per (mode, pair)
into the queues of the eight modes. Idempotent: seeding the same pairs again adds nothing.

Only pairs new to the store are queued: a pair that an earlier seeded run (any run, in any mode) put
in the store gets no task now, so a run of a grown index (vhmine mine reusing an earlier run: most
pairs the old run's, re-ranked) queues just what the growth brought. "Earlier" is fixed by when each
run was first seeded, so seeding a run again plans the same pairs and adds nothing.

Which pairs go to which mode: of the N new pairs, the top min(N, 8 x per_mode) by rank are used; mode k of the
eight takes `per_mode` consecutive pairs starting at k x ceil(N' / 8), wrapping around. With 200 pairs
and --per-mode 100 (VHTest's numbers) every pair lands in four modes and every mode gets 100 pairs;
with 800 or more pairs each mode gets its own 100, spread over the ranking.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from vhmine import rules as R
from vhmine.errors import InputError
from vhmine.images import image_sha256
from vhmine.index import locate_image

REQUIRED = (
    "rank",
    "image_id_a",
    "image_id_b",
    "sha256_a",
    "sha256_b",
    "path_a",
    "path_b",
    "clip_sim",
    "dino_sim",
    "gap",
)
_SHA = re.compile(r"^[0-9a-f]{64}$")
RACE_TRIES = 5  # plans of one seeding, while other machines' seedings of the store keep committing first


@dataclass
class SeedResult:
    run: str
    pairs_read: int
    pairs_new: int = 0  # distinct pairs no earlier seeded run had put in the store
    pairs_known: int = 0  # distinct pairs an earlier seeded run had (they get no task now)
    reseeded: bool = False  # this run was seeded before: "new" counts what was new at its first seeding
    images_added: int = 0
    pairs_added: int = 0
    tasks_added: dict = field(default_factory=dict)  # mode -> tasks queued now
    tasks_existing: int = 0
    db_option: str = ""  # " --db STORE" when the store is not the default one, for the next commands
    workers: int = 0  # workers the store has (none yet: the next step is adding one)

    def summary(self) -> str:
        per = ", ".join(f"{m} {n}" for m, n in self.tasks_added.items())
        new = (
            f"{self.pairs_new:,} new{' at its first seeding' if self.reseeded else ''} ({self.pairs_known:,} already in"
            " the store)"
        )
        lines = [
            f"seeded run {self.run}: {self.pairs_read:,} pairs read, {new}, {self.images_added} images and "
            f"{self.pairs_added} pairs added; tasks queued: {per} ({sum(self.tasks_added.values())} new, "
            f"{self.tasks_existing} already queued)"
        ]
        if not self.workers:
            lines.append(
                f"next: vhmine workers add NAME{self.db_option}   (prints NAME's sign-in token; --admin for "
                "the agreement page)"
            )
        lines.append(
            ("then" if not self.workers else "next") + f": vhmine curate{self.db_option}   "
            "(the app on http://127.0.0.1:8501: sign in with the token, annotate the queues)"
        )
        return "\n".join(lines)


def pair_id(a: str, b: str) -> str:
    """Stable id of an unordered pair of image ids."""
    return "-".join(sorted((a, b)))


def assign(n_pairs: int, per_mode: int, modes: Sequence[str]) -> dict[str, list[int]]:
    """Indices (into the pairs sorted by rank) queued for each mode; see the module docstring."""
    if per_mode < 1:
        raise InputError(f"--per-mode must be at least 1, got {per_mode}")
    used = min(n_pairs, per_mode * len(modes))
    if used == 0:
        return {m: [] for m in modes}
    stride = math.ceil(used / len(modes))
    take = min(per_mode, used)
    return {m: sorted({(k * stride + t) % used for t in range(take)}) for k, m in enumerate(modes)}


def _read(pairs_path: Path):
    import pandas as pd

    if not (pairs_path.is_file() or pairs_path.is_dir()):  # a folder: the shards of a large Ray run
        raise InputError(
            f"pairs file {pairs_path} not found: run `vhmine mine` first, or pass --pairs runs/<run>/pairs.parquet"
        )
    try:
        df = pd.read_parquet(pairs_path)
    except Exception as err:
        beside = next(
            (
                p
                for p in (pairs_path.with_suffix(".parquet"), pairs_path.with_name("pairs.parquet"))
                if p != pairs_path and p.is_file()
            ),
            None,
        )
        if beside is not None:  # e.g. the pairs.csv that `vhmine mine` writes next to the parquet file
            raise InputError(
                f"cannot read {pairs_path} as parquet: pass --pairs {beside}, the parquet file "
                "`vhmine mine` wrote beside it"
            ) from None
        raise InputError(
            f"cannot read {pairs_path} as parquet ({type(err).__name__}: {err}): re-run `vhmine mine`"
        ) from None
    missing = [c for c in REQUIRED if c not in df.columns]
    if missing:
        raise InputError(f"{pairs_path} lacks column(s) {', '.join(missing)}: it is not a `vhmine mine` pairs table")
    return df


def _check_ids(pairs_path: Path, row, side: str) -> None:
    iid, sha = row[f"image_id_{side}"], row[f"sha256_{side}"]
    if not isinstance(sha, str) or not _SHA.match(sha) or iid != sha[:16]:
        raise InputError(
            f"{pairs_path} (rank {row['rank']}, side {side}): image id {iid!r} is not the first 16 hex "
            f"digits of sha256 {sha!r}: re-run `vhmine mine`"
        )


def _image_file(pairs_path: Path, row, side: str, index_folders) -> str:
    """The file that holds this side's image now: the pairs table's path while its bytes still hash to
    the row's sha256, else a file with that content that an index lists (index.locate_image)."""
    iid, sha, path = row[f"image_id_{side}"], row[f"sha256_{side}"], row[f"path_{side}"]
    where = f"{pairs_path} (rank {row['rank']}, side {side})"
    found = locate_image(sha, path, index_folders)
    if found is None and image_sha256(path) is not None:
        raise InputError(
            f"{where}: image file {path} no longer holds image {iid} (its content changed since it was "
            "embedded) and no index lists another copy: restore it, or run `vhmine embed` and `vhmine mine` again"
        )
    if found is None:
        raise InputError(
            f"{where}: image file {path} is missing: seed on the machine that holds the images "
            "(no index lists another copy; if it moved, run `vhmine embed` on its folder again)"
        )
    return str(found.resolve()) if isinstance(found, Path) else found  # a URL stays as it is


def read_pairs(pairs_path: str | Path):
    """The run's pairs table, read before any store is opened: InputError when it cannot be read, or holds no
    pairs (nothing to seed, and no store to make for it)."""
    from vhmine.files import shown_path

    path = Path(pairs_path).resolve()
    df = _read(path)
    if df.empty:
        raise InputError(
            f"{shown_path(path)} holds 0 pairs: nothing to seed (no store was written or changed); mine run "
            f"{path.parent.name} again with looser thresholds (`vhmine status` suggests some)"
        )
    return df


def seed_pairs(
    store, pairs_path: str | Path, per_mode: int = 100, modes: Sequence[str] | None = None, table=None
) -> SeedResult:
    """Load mined pairs into `store` (a vhmine.store.Store) and queue tasks for each mode; `table`: the pairs
    table as read_pairs read it already (else it is read here)."""
    from vhmine import curate

    pairs_path = Path(pairs_path).resolve()
    mode_list = R.selected_modes(modes)
    df = read_pairs(pairs_path) if table is None else table
    meta_file = pairs_path.parent / "run.json"
    try:
        meta = json.loads(meta_file.read_text()) if meta_file.is_file() else None
    except ValueError as err:
        raise InputError(
            f"{meta_file} is not valid JSON ({err}): re-run `vhmine mine`, or remove it to seed without it"
        ) from None
    run = pairs_path.parent.name

    # rank order, then pair id for ties: never the file's row order
    def index_folders() -> list[Path]:  # where moved files are looked for: the run's indexes, then ./indexes
        from vhmine.config import indexes_root, run_index_folders
        from vhmine.index import list_indexes

        return list(
            dict.fromkeys(run_index_folders(meta) + [indexes_root() / name for name in list_indexes(indexes_root())])
        )

    rows, seen = [], set()
    for _, r in df.iterrows():
        _check_ids(pairs_path, r, "a")
        _check_ids(pairs_path, r, "b")
        pid = pair_id(r["image_id_a"], r["image_id_b"])
        rows.append((int(r["rank"]), pid, r))
    rows.sort(key=lambda x: (x[0], x[1]))
    unique = []
    for rank, pid, r in rows:
        if pid not in seen:
            seen.add(pid)
            unique.append((rank, pid, r))
    for _attempt in range(RACE_TRIES):  # another machine's seeding between planning and writing: plan again
        try:
            return _seed_once(store, run, pairs_path, meta, unique, len(df), per_mode, mode_list, index_folders)
        except curate.stages.SeedRaced:
            continue
    raise InputError(
        f"other seedings of the store kept coming while seeding run {run} ({RACE_TRIES} tries): run `vhmine seed` again"
    )


def _seed_once(store, run, pairs_path, meta, unique, n_read, per_mode, mode_list, index_folders) -> SeedResult:
    """Plan the run's new pairs against the store as it is now, check their image files, write them."""
    from vhmine import curate

    known, reseeded, latest = curate.stages.known_pairs(
        store, run, meta.get("run_id") if isinstance(meta, dict) else None
    )
    fresh = [u for u in unique if u[1] not in known]  # still in rank order: the new pairs are planned as a run alone
    plan = assign(len(fresh), per_mode, mode_list)
    used = sorted({i for idx in plan.values() for i in idx})
    from tqdm import tqdm

    files = {}  # (sha256, path in the table) -> the file that holds that content now
    # each side's file is read and hashed: seconds for a few hundred large photos
    for i in tqdm(used, desc="seed: checking images", unit="pair", leave=False, disable=len(used) < 200):
        r = fresh[i][2]
        for side in ("a", "b"):
            key = (r[f"sha256_{side}"], r[f"path_{side}"])
            if key not in files:
                files[key] = _image_file(pairs_path, r, side, index_folders)
    counts = curate.stages.add_mined_pairs(
        store, run, pairs_path, meta, fresh, {m: plan[m] for m in mode_list}, files, not reseeded, latest
    )
    from vhmine.curate import list_workers

    return SeedResult(
        run=run,
        pairs_read=n_read,
        pairs_new=len(fresh),
        pairs_known=len(unique) - len(fresh),
        reseeded=reseeded,
        images_added=counts.images_added,
        pairs_added=counts.pairs_added,
        tasks_added=counts.tasks_added,
        tasks_existing=counts.tasks_existing,
        db_option=store.db_option,
        workers=len(list_workers(store)),
    )
