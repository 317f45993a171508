"""The vector files' states kept with the row digests (vhmine.index.digests.FileStates): a reader whose files
are as the kept file recorded them, settled, takes the digests with no byte read; any write to a file after
that (a bit in place with its mtime put back, a grown or rewritten file) is read and checked, so the digests
returned are always those of the files' rows as they are: a RuleBasedStateMachine over such sequences, a
property over any bit of any value, and the `vhmine mine` that follows an embed."""

import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from mine_runs import flip_in_place

from vhmine.index import DIGEST, row_digests, write_faiss
from vhmine.index import digests as kept
from vhmine.index.rows import open_vectors

DIMS = {"clip": 12, "dino": 9}


def _write(folder: Path, clip, dino) -> None:
    write_faiss(folder / "clip.faiss", clip)
    write_faiss(folder / "dino.faiss", dino)


def _rows(folder: Path, seed: int, n: int):
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal((n, DIMS[k])).astype(np.float32) for k in ("clip", "dino"))


def _read(folder: Path, stats: dict | None = None):
    """What a run takes: the files' states, then their rows, then the digests (vhmine.mine.grow.index_digests)."""
    seen = kept.file_states(folder)
    rows = [open_vectors(folder / f"{k}.faiss") for k in ("clip", "dino")]
    clip, dino = (v.read(0, v.rows) for v in rows)
    return kept.stored_digests(folder, clip, dino, DIGEST, row_digests, stats, seen=seen), clip, dino


def _recorded(folder: Path):
    with np.load(folder / kept.ROW_DIGESTS) as z:
        return z["files"] if "files" in z.files else None


def test_settled_files_are_read_with_no_check_until_a_bit_changes_in_place(tmp_path):
    clip, dino = _rows(tmp_path, 0, 40)
    _write(tmp_path, clip, dino)
    first = kept.keep_for_files(tmp_path, DIGEST, row_digests)  # as `vhmine embed` ends: waits, checks, records
    assert (first == row_digests(clip, dino)).all()
    assert np.array_equal(_recorded(tmp_path), kept.file_states(tmp_path).states)
    st_: dict = {}
    got, *_ = _read(tmp_path, st_)
    assert (got == first).all() and st_ == {"rows_digested": 0, "rows_stored": 40, "rows_checked": 0}
    flip_in_place(tmp_path / "dino.faiss", 7, 2, 30)  # its ctime is now the clock's: not the state recorded
    got, c, d = _read(tmp_path, st_)
    assert st_["rows_checked"] == 40 and st_["rows_digested"] > 0
    assert np.flatnonzero(got != first).tolist() == [7] and (got == row_digests(c, d)).all()
    assert _recorded(tmp_path) is None  # just written: not settled, so nothing recorded until a later run


def test_files_written_just_before_their_states_were_taken_are_not_recorded(tmp_path):
    """A ctime within a clock tick of the states' moment could be shared by a write just after: not vouched for."""
    _write(tmp_path, *_rows(tmp_path, 1, 10))
    kept.stored_digests(tmp_path, *_read(tmp_path)[1:], DIGEST, row_digests, seen=kept.file_states(tmp_path))
    assert not kept.file_states(tmp_path).settled() and _recorded(tmp_path) is None
    time.sleep(kept.file_states(tmp_path).wait_ns() / 1e9)
    _read(tmp_path)  # settled now: this run records them
    assert np.array_equal(_recorded(tmp_path), kept.file_states(tmp_path).states)


@settings(max_examples=12, deadline=None)
@given(row=st.integers(0, 29), side=st.sampled_from(["clip", "dino"]), col=st.integers(0, 8), bit=st.integers(0, 31))
def test_property_any_bit_changed_after_the_states_were_recorded_is_caught(row, side, col, bit):
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        clip, dino = _rows(folder, 2, 30)
        _write(folder, clip, dino)
        before = kept.keep_for_files(folder, DIGEST, row_digests)
        flip_in_place(folder / f"{side}.faiss", row, col, bit)
        got, c, d = _read(folder)
        assert np.flatnonzero(got != before).tolist() == [row]
        assert (got == row_digests(c, d)).all()


class KeptStates(RuleBasedStateMachine):
    """Any sequence of writes to an index's vector files (bits in place, growth, identical rewrites), of
    waits that let the files settle, of embeds keeping the digests and of runs taking them: every run's
    digests are those of the rows it read."""

    @initialize(n=st.integers(1, 20))
    def start(self, n):
        self.tmp = tempfile.TemporaryDirectory()
        self.folder = Path(self.tmp.name)
        self.clip, self.dino = _rows(self.folder, n, n)
        _write(self.folder, self.clip, self.dino)

    @rule(
        row=st.integers(0, 10**6), side=st.sampled_from(["clip", "dino"]), col=st.integers(0, 8), bit=st.integers(0, 31)
    )
    def flip_in_place(self, row, side, col, bit):
        flip_in_place(self.folder / f"{side}.faiss", row % len(self.clip), col, bit)

    @rule(k=st.integers(1, 9), seed=st.integers(0, 99))
    def grow(self, k, seed):
        c, d = _rows(self.folder, seed, k)
        now = [open_vectors(self.folder / f"{x}.faiss") for x in ("clip", "dino")]
        _write(self.folder, *(np.concatenate([v.read(0, v.rows), a]) for v, a in zip(now, (c, d), strict=True)))
        self.clip = np.concatenate([self.clip, c])

    @rule()
    def rewrite_the_same_rows(self):
        now = [open_vectors(self.folder / f"{x}.faiss") for x in ("clip", "dino")]
        _write(self.folder, *(v.read(0, v.rows) for v in now))

    @rule()
    def settle(self):
        time.sleep(max(0, kept.file_states(self.folder).wait_ns()) / 1e9)

    @rule()
    def embed_keeps(self):
        kept.keep_for_files(self.folder, DIGEST, row_digests)

    @rule()
    def run_takes(self):
        got, c, d = _read(self.folder)
        assert (got == row_digests(c, d)).all()

    @invariant()
    def digests_are_the_rows_now(self):
        if hasattr(self, "folder") and (self.folder / kept.ROW_DIGESTS).exists():
            got, c, d = _read(self.folder)
            assert (got == row_digests(c, d)).all()

    def teardown(self):
        if hasattr(self, "tmp"):
            self.tmp.cleanup()


KeptStates.TestCase.settings = settings(max_examples=50, stateful_step_count=10, deadline=None)
test_kept_states_machine = pytest.mark.slow(KeptStates.TestCase)  # (3-4 s: its waits for files to settle)


def test_one_row_kept_by_an_embed_then_a_bit_flipped_in_place_is_read_again():
    """The machine's shrunk counterexample when a file's ctime was left out of its state: start(n=1),
    embed_keeps(), flip_in_place(bit=0, col=0, row=0, side='clip')."""
    state = KeptStates()
    state.start(n=1)
    state.embed_keeps()
    state.flip_in_place(row=0, side="clip", col=0, bit=0)
    try:
        state.digests_are_the_rows_now()
    finally:
        state.teardown()
