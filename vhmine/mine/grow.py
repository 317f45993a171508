"""Incremental mining: a run of a grown index that reuses an earlier run of the same command, mining only
the pairs that touch new rows (mine.join.find_new_pairs), so adding 1% of rows costs about 2% of
a full mine's products.

Reads the earlier run's run.json, rows.parquet and alike.parquet (mine.state). It is reused only when it
provably can be: a finished run of the same index (its manifest's `created`) with the same encoders,
--clip, --dino, --max-pairs and --max-per-image, whose files are as run.json's checksums say, and every
row it shares with the index now has the same vectors (index.row_digests, of the kind used now: a run
whose rows.parquet keeps an older kind is not reused; the index's rows' digests are taken through the copy
kept with the index, vhmine.index.digests, which hashes only the chunks of rows it does not vouch for:
`index_digests`). Then its CLIP-alike pairs
between rows still there are the pairs a full mine finds between those rows, with the same float64 sims
(mine.join.pair_sims is a function of the two rows' bits alone), and the rest are the new rows' pairs: the
union is a full mine's PairSet, exactly. Anything else is a full mine, and `reusable` says why in one line.
Writes nothing: the engines write the new run's (with its own rows.parquet and alike.parquet; mine.state).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vhmine.files import shown_path
from vhmine.mine import state


@dataclass
class Earlier:
    """An earlier run that may be reused: its folder, run.json and the rows it mined (ids and digests: read
    from rows.parquet when first asked for, by the local engine; the Ray engine joins the file from disk)."""

    folder: Path
    run: dict

    @functools.cached_property
    def _rows(self) -> tuple[np.ndarray, np.ndarray]:
        return state.read_rows(self.folder)

    @property
    def ids(self) -> np.ndarray:
        return self._rows[0]

    @property
    def digests(self) -> np.ndarray:
        return self._rows[1]


def earlier_run(run_dir: Path, default_dir: Path) -> Path | None:
    """The run this command reuses: the one in its own folder, else (a fresh --out) the one the same command
    without --out wrote."""
    for folder in dict.fromkeys((Path(run_dir), Path(default_dir))):
        if (folder / "run.json").is_file():
            return folder
    return None


def reusable(folder: Path, idx, opts) -> tuple[Earlier | None, str]:
    """(the earlier run, "") when it can be reused for this command on `idx`, else (None, why not: one line)."""
    where = shown_path(folder)
    try:
        run = json.loads((folder / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        return None, f"the run in {where} cannot be read ({type(err).__name__}): mining in full"
    if run.get("producer") != "vhmine mine":
        return None, f"{where} holds no `vhmine mine` run: mining in full"
    if run.get("against"):
        return None, f"the run in {where} mined across two indexes (--against): mining in full"
    ray = run.get("ray") or {}
    if ray.get("tiles_mined", ray.get("tiles")) != ray.get("tiles"):
        return None, (
            f"the run in {where} mined only {ray['tiles_mined']} of its {ray['tiles']} tiles (--tiles): mining in full"
        )
    files = run.get("files") or {}
    if not run.get("run_id") or state.ROWS not in files or state.ALIKE not in files:
        return None, (
            f"the run in {where} keeps no record of its rows (an older vhmine wrote it): mining in full; "
            "the run written now keeps one"
        )
    from vhmine.images import sha256_file

    for name in (state.ROWS, state.ALIKE):
        p = folder / name
        if not p.is_file() or p.stat().st_size != files[name]["bytes"] or sha256_file(p) != files[name]["sha256"]:
            return None, f"{shown_path(p)} is missing or changed since its run was written: mining in full"
    if run.get("index") != idx.name or run.get("index_created") != idx.manifest.get("created"):
        what = (
            f"index {run.get('index')!r}"
            if run.get("index") != idx.name
            else f"index {idx.name!r} as it was before it was built again (created {run.get('index_created')})"
        )
        return None, f"the run in {where} mined {what}, not this one: mining in full"
    then, now = run.get("encoders") or {}, idx.manifest.get("encoders") or {}
    # only what both records hold: a newer vhmine records more of the same encoder (weights_sha256)
    differ = sorted(
        f"{e}.{k}"
        for e in ("clip", "dino")
        for k in set(then.get(e) or {}) & set(now.get(e) or {})
        if (then.get(e) or {}).get(k) != (now.get(e) or {}).get(k)
    )
    if differ or set(then) != set(now):
        return None, (
            f"the run in {where} was mined with other encoders than index {idx.name!r} has now "
            f"({', '.join(differ) or 'encoders'} differ): mining in full"
        )
    asked = {
        "--clip": opts.clip,
        "--dino": opts.dino,
        "--max-pairs": opts.max_pairs,
        "--max-per-image": opts.max_per_image,
    }
    had = {
        "--clip": run.get("clip_threshold"),
        "--dino": run.get("dino_threshold"),
        "--max-pairs": (run.get("options") or {}).get("max_pairs"),
        "--max-per-image": (run.get("options") or {}).get("max_per_image"),
    }
    differ = []
    for k in asked:
        if had[k] != asked[k]:
            differ.append(f"{k} {had[k]} there, {asked[k]} now")
    if differ:
        return None, f"the run in {where} was mined with other options ({'; '.join(differ)}): mining in full"
    from vhmine.index import DIGEST

    if state.digest_kind(folder) != DIGEST:
        return None, (
            f"the run in {where} keeps row digests of an older kind (an older vhmine wrote it; they can miss "
            "changed vectors): mining in full; the run written now keeps digests of the kind used now"
        )
    return Earlier(folder, run), ""


@dataclass
class Growth:
    """How the index changed since the earlier run, row by row."""

    new_rows: np.ndarray  # rows of the index now whose image the earlier run did not mine
    kept: int  # rows the earlier run mined that are still there, with the same vectors
    removed: int  # the earlier run's rows that are gone (their files removed, or their images changed)
    changed: int  # rows still there whose vectors differ: then nothing can be reused

    def record(self, earlier: Earlier, products: int) -> dict:
        return {
            "from": earlier.run["run_id"],
            "old_rows": self.kept,
            "new_rows": int(len(self.new_rows)),
            "removed_rows": self.removed,
            "products": int(products),
        }


def _positions(keys: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Where each of x is in keys (unique image ids), or -1."""
    if not len(keys):
        return np.full(len(x), -1)
    order = np.argsort(keys, kind="stable")
    at = np.clip(np.searchsorted(keys[order], x), 0, len(keys) - 1)
    return np.where(keys[order][at] == x, order[at], -1)


def growth(earlier: Earlier, ids: np.ndarray, digests: np.ndarray) -> Growth:
    """Which rows of the index now (ids, digests: row_digests) are new, kept or changed against the earlier run."""
    at = _positions(earlier.ids, ids)
    seen = at >= 0
    kept = int((seen & (earlier.digests[at] == digests)).sum())
    return Growth(np.flatnonzero(~seen), kept, len(earlier.ids) - int(seen.sum()), int(seen.sum()) - kept)


def index_digests(idx, workers=2, stats: dict | None = None) -> np.ndarray:
    """index.row_digests of an opened index's rows (its vectors loaded), from the copy kept in its folder
    where its vector files are as that copy recorded them or it still checks (vhmine.index.stored_digests),
    hashing only the chunks it does not vouch for:
    what a run of the index keeps in rows.parquet and a grown index's run compares. stats gets rows_digested
    and rows_stored."""
    from vhmine.index import DIGEST, row_digests, stored_digests

    digest = functools.partial(row_digests, workers=workers)
    return stored_digests(idx.folder, idx.clip, idx.dino, DIGEST, digest, stats, seen=idx.vector_states)


def changed_line(g: Growth, idx, folder: Path) -> str:
    return (
        f"{g.changed:,} row(s) of index {idx.name!r} have other vectors than the run in {shown_path(folder)} "
        "mined (the index was embedded again?): mining in full"
    )


def old_pairs(earlier: Earlier, ids: np.ndarray):
    """The earlier run's CLIP-alike pairs whose two images are rows of the index now, as (i, j, clip, dino)
    in its row numbers, i < j."""
    id_a, id_b, c, d = state.read_alike(earlier.folder)
    a, b = _positions(ids, id_a), _positions(ids, id_b)
    keep = (a >= 0) & (b >= 0)
    a, b, c, d = a[keep], b[keep], c[keep], d[keep]
    return np.minimum(a, b), np.maximum(a, b), c, d


def grown_pairs(earlier: Earlier, ids, new):
    """Every CLIP-alike pair of the index now (a PairSet equal to find_pairs'): the earlier run's pairs between
    rows still there, and `new`, the new rows' (mine.join.find_new_pairs' PairSet)."""
    from vhmine.mine.join import merge

    return merge([old_pairs(earlier, ids), (new.i, new.j, new.clip_sim, new.dino_sim)])


def said(earlier: Earlier, g: Growth, products: int, n: int) -> str:
    """The console's line about the reuse."""
    full = n * (n - 1) // 2
    share = f", {100 * products / full:.2g}% of a full mine's" if full else ""
    removed = f"; {g.removed:,} removed" if g.removed else ""
    return (
        f"mined {len(g.new_rows):,} new rows against {g.kept:,} (reused the run in {shown_path(earlier.folder)}"
        f"{removed}; {products:,} products{share})"
    )
