"""Issue 43: durable updates. A batch commits by syncing a log, not by a
checkpoint: on eFIND and FAST the store's log, which holds the id map's
changes too (one sync); on the plain store the id map's ``pyrecords.log``
and a checkpoint. A writer killed mid-stream comes back with every
acknowledged batch, ids and objects included, and nothing that was not a
prefix of what it did; on eFIND and FAST without the repair pass (the map
and the tree come back from one log)."""
import os
import signal
import subprocess
import sys
import warnings

import numpy as np
import pytest

import geoflash

# Killed-writer runs per store (GEOFLASH_PY_KILLS; `make test-long` raises it).
KILLS = int(os.environ.get("GEOFLASH_PY_KILLS", "3"))
OBJECTS = 400
MOVES_PER_BATCH = 40
BATCHES = 60


def _boxes(rng, n):
    lo = rng.uniform(0, 1000, (n, 2))
    return np.hstack([lo, lo + rng.uniform(0.1, 3, (n, 2))])


def _moves(seed):
    """The operation stream: (id, new box) per move, a new object each."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, OBJECTS, BATCHES * MOVES_PER_BATCH)
    step = rng.uniform(-2, 2, (len(ids), 2))
    return ids, step


def _apply(state, ids, step, upto, first=0):
    """`state` (id -> (box, object)) after moves [first, first + upto) of
    the stream. Even moves are a delete and an insert with a new object,
    odd ones an `update`, which keeps the object."""
    state = dict(state)
    for m in range(first, first + upto):
        i = int(ids[m])
        box, obj = state[i]
        dx, dy = step[m]
        state[i] = ((box[0] + dx, box[1] + dy, box[2] + dx, box[3] + dy), f"m{m}" if m % 2 == 0 else obj)
    return state


def _initial():
    b = _boxes(np.random.default_rng(1), OBJECTS)
    return {i: (tuple(float(v) for v in b[i]), f"o{i}") for i in range(OBJECTS)}


def _contents(idx):
    return {
        it.id: (tuple(it.bbox), it.object)
        for it in idx.intersection((-1e9, -1e9, 1e9, 1e9), objects=True)
    }


def _build(path, store):
    idx = geoflash.Index(str(path), store=store, page_size=1024)
    for i, (box, obj) in _initial().items():
        idx.insert(i, box, obj=obj)
    idx.close()


def _write(path, state, seed, kill_at):
    """The writer (a child process): the moves of `_moves(seed)` from
    `state` (id -> (box, object)) in batches of MOVES_PER_BATCH, killing
    itself at move `kill_at`; prints the number of moves after each batch
    returned (acknowledged). Even moves are a delete and an insert with a
    new object, odd ones an `update`."""
    ids, step = _moves(seed)
    state = dict(state)
    idx = geoflash.Index(path)
    m = 0
    for _ in range(BATCHES):
        with idx.batch():
            for _ in range(MOVES_PER_BATCH):
                if m == kill_at:
                    os.kill(os.getpid(), signal.SIGKILL)
                i = int(ids[m])
                box, obj = state[i]
                dx, dy = step[m]
                new = (box[0] + dx, box[1] + dy, box[2] + dx, box[3] + dy)
                if m % 2 == 0:
                    idx.delete(i, box)
                    idx.insert(i, new, obj=f"m{m}")
                    state[i] = (new, f"m{m}")
                else:
                    idx.update(i, new)
                    state[i] = (new, obj)
                m += 1
        print(m, flush=True)


WRITER = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from test_durable_updates import _write, _initial; "
    "_write(sys.argv[2], _initial(), int(sys.argv[3]), int(sys.argv[4]))"
)


@pytest.mark.parametrize("store", ["efind", "fast", "plain"])
def test_a_killed_writer_keeps_every_acknowledged_batch(tmp_path, store):
    """SIGKILL at a random move inside a batch (moves alternate between
    delete + insert and `update`): the reopened index holds
    the state after some prefix of the moves that includes every batch the
    writer acknowledged (printed after `with idx.batch():` returned), with
    each id's object; reopening again changes nothing."""
    tests = os.path.dirname(os.path.abspath(__file__))
    rng = np.random.default_rng(abs(hash(store)) % 1000)
    acked_moves = 0
    for run in range(KILLS):
        path = tmp_path / f"{store}{run}"
        _build(path, store)
        seed = int(rng.integers(1 << 30))
        kill_at = int(rng.integers(1, BATCHES * MOVES_PER_BATCH))
        r = subprocess.run(
            [sys.executable, "-c", WRITER, tests, str(path), str(seed), str(kill_at)],
            capture_output=True,
            text=True,
        )
        assert r.returncode == -signal.SIGKILL, r.stderr
        acked = int(r.stdout.split()[-1]) if r.stdout.split() else 0
        assert acked <= kill_at
        ids, step = _moves(seed)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", RuntimeWarning)
            idx = geoflash.Index(str(path))
        got = _contents(idx)
        idx.close()
        if store != "plain":
            # One log for the map and the tree: nothing to repair.
            repaired = [str(w.message) for w in caught if "disagreed" in str(w.message)]
            assert not repaired, f"{store} run {run}: {repaired}"
        # A prefix of the moves, at least the acknowledged ones; a move is a
        # delete and an insert, so its id may be missing when the prefix
        # ends between the two.
        state = _apply(_initial(), ids, step, acked)
        matches = []
        for upto in range(acked, kill_at + 1):
            whole = state
            split = upto < kill_at and upto % 2 == 0  # a delete and an insert
            half = {k: v for k, v in state.items() if k != int(ids[upto])} if split else None
            if got == whole or (half is not None and got == half):
                matches.append(upto)
            if upto < kill_at:
                state = _apply(state, ids, step, 1, first=upto)
        assert matches, f"{store} run {run}: killed at move {kill_at}, {acked} acknowledged: not a prefix state"
        with geoflash.Index(str(path), readonly=True) as idx:
            assert _contents(idx) == got
        acked_moves += acked
    # The summary line `make torture` collects (pytest -s).
    print(
        f"\npython torture: {store}: {KILLS} writers killed (SIGKILL inside a batch), "
        f"{acked_moves} acknowledged moves all kept, every index a prefix state"
    )


@pytest.mark.parametrize("store", ["efind", "fast"])
def test_a_batch_commit_is_one_sync_of_the_store_log(tmp_path, store):
    """A commit of deletes and inserts with objects syncs the store's log
    once (the id map's changes in it) and nothing else: no pyrecords.log,
    pyrecords.dat untouched; close() writes a new snapshot (version 5)."""
    path = tmp_path / "i"
    _build(path, store)
    snap = path / "pyrecords.dat"
    before = (snap.stat().st_ino, snap.read_bytes())
    assert before[1][8:10] == (5).to_bytes(2, "little")
    with geoflash.Index(str(path)) as idx:
        start = idx.stats
        for b in range(3):
            s0 = idx.stats
            with idx.batch():
                for i in range(b * 20, b * 20 + 20):
                    box, _ = _initial()[i]
                    idx.delete(i, box)
                    idx.insert(i, (box[0] + 1, box[1], box[2] + 1, box[3]), obj="moved")
            s1 = idx.stats
            assert (s1["syncs"] - s0["syncs"], s1["log_syncs"] - s0["log_syncs"]) == (1, 1)
            assert (snap.stat().st_ino, snap.read_bytes()) == before
            assert not (path / "pyrecords.log").exists()
        stats = idx.stats
        # The engine wrote no node for the commits: only log pages.
        assert stats["flushed_nodes"] == start["flushed_nodes"]
    assert snap.stat().st_ino != before[0]
    assert snap.read_bytes()[8:10] == (5).to_bytes(2, "little")
    with geoflash.Index(str(path), readonly=True) as idx:
        got = _contents(idx)
    assert sum(1 for v in got.values() if v[1] == "moved") == 60


def test_a_plain_commit_writes_the_map_log_not_the_snapshot(tmp_path):
    """The plain store (no log of its own): a commit appends to
    pyrecords.log and leaves pyrecords.dat alone; close() writes a new
    snapshot (version 4) and empties the log."""
    path = tmp_path / "i"
    _build(path, "plain")
    snap = path / "pyrecords.dat"
    log = path / "pyrecords.log"
    before = (snap.stat().st_ino, snap.read_bytes())
    with geoflash.Index(str(path)) as idx:
        for b in range(3):
            with idx.batch():
                for i in range(b * 20, b * 20 + 20):
                    box, _ = _initial()[i]
                    idx.delete(i, box)
                    idx.insert(i, (box[0] + 1, box[1], box[2] + 1, box[3]), obj="moved")
            assert (snap.stat().st_ino, snap.read_bytes()) == before
            # 20 REMOVEs (21 bytes) and 20 ADDs with their pickles.
            assert log.stat().st_size > 32 + 20 * 21 * (b + 1)
    assert log.stat().st_size == 32  # the header only: everything in the snapshot
    assert snap.stat().st_ino != before[0]
    assert snap.read_bytes()[8:10] == (4).to_bytes(2, "little")
    with geoflash.Index(str(path), readonly=True) as idx:
        got = _contents(idx)
    assert sum(1 for v in got.values() if v[1] == "moved") == 60


@pytest.mark.parametrize("store, names", [
    ("plain", "pyrecords.log"),
    ("efind", "names record-map generation"),
])
def test_a_snapshot_older_than_its_log_is_refused_naming_the_log(tmp_path, store, names):
    """A pyrecords.dat put back from an older copy would silently forget ids:
    its generation is older than the map's log (plain store) or than the one
    the store's checkpoint names (eFIND), and the open says so."""
    path = tmp_path / "i"
    _build(path, store)
    old = (path / "pyrecords.dat").read_bytes()
    with geoflash.Index(str(path)) as idx:
        idx.insert(10_000, (1, 1, 2, 2), obj="new")
    (path / "pyrecords.dat").write_bytes(old)
    with pytest.raises(geoflash.CorruptIndexError, match=names):
        geoflash.Index(str(path))


def test_update_moves_an_entry_by_id_and_keeps_its_object(tmp_path):
    """`update(id, coordinates)`: no old box, the object kept, in place
    while the box stays in its leaf; answers equal a brute-force oracle,
    also after reopening; unknown and duplicate ids are refused."""
    path = tmp_path / "u"
    _build(path, "efind")
    want = _initial()
    rng = np.random.default_rng(5)
    with geoflash.Index(str(path)) as idx:
        for m in range(3000):
            i = int(rng.integers(OBJECTS))
            box, obj = want[i]
            d = rng.uniform(-0.05, 0.05, 2) if m % 10 else rng.uniform(-300, 300, 2)
            new = (box[0] + d[0], box[1] + d[1], box[2] + d[0], box[3] + d[1])
            idx.update(i, new)
            want[i] = (new, obj)
            if m % 500 == 0:
                assert _contents(idx) == want
        in_place = idx.stats["updates_in_place"]
        assert 0 < in_place < 3000
        with pytest.raises(geoflash.RTreeError, match="object 99999 is not in the index: nothing to update"):
            idx.update(99999, (0, 0, 1, 1))
        idx.insert(7, (5, 5, 6, 6))
        with pytest.raises(geoflash.RTreeError, match="id 7 has 2 entries"):
            idx.update(7, (0, 0, 1, 1))
        idx.delete(7, (5, 5, 6, 6))
        assert _contents(idx) == want
        for w in _boxes(np.random.default_rng(6), 50):
            brute = sorted(k for k, (b, _) in want.items() if b[0] <= w[2] and w[0] <= b[2] and b[1] <= w[3] and w[1] <= b[3])
            assert sorted(idx.intersection(tuple(w))) == brute
    with geoflash.Index(str(path)) as idx:
        idx.update(3, (1, 1, 2, 2))
        want[3] = ((1.0, 1.0, 2.0, 2.0), want[3][1])
        assert _contents(idx) == want
    with geoflash.Index(str(path), readonly=True) as idx:
        assert _contents(idx) == want
        with pytest.raises(geoflash.RTreeError, match="read-only"):
            idx.update(3, (0, 0, 1, 1))


def test_an_unknown_id_is_refused_in_the_same_words_whatever_the_id_map(tmp_path):
    """``update`` of an id the index does not hold raises the same error
    whether the index keeps a full id map (built from Python, with objects)
    or an identity map (built by the command line): the engine's words."""
    from test_osm_import import geoflash_bin

    bin_ = geoflash_bin()
    assert bin_, "the geoflash command is not built (cargo build -p geoflash-cli)"
    full = tmp_path / "full"
    _build(full, "efind")
    csv = tmp_path / "boxes.csv"
    csv.write_text("id,minx,miny,maxx,maxy\n" + "".join(f"{i},{i},{i},{i + 1},{i + 1}\n" for i in range(20)))
    identity = tmp_path / "identity"
    subprocess.run([bin_, "-q", "build", "--input", str(csv), "--index", str(identity)], check=True, timeout=300)
    messages = []
    for path in (full, identity):
        with geoflash.Index(str(path)) as idx:
            with pytest.raises(geoflash.RTreeError) as raised:
                idx.update(99999, (0, 0, 1, 1))
            messages.append(str(raised.value))
            idx.update(3, (1, 1, 2, 2))  # the index goes on working
            assert 3 in list(idx.intersection((1.5, 1.5, 1.5, 1.5)))
    assert messages[0] == messages[1], messages
    assert "object 99999 is not in the index: nothing to update" in messages[0]


def test_update_batch_equals_a_loop_of_update(tmp_path):
    """`update_batch(ids, boxes)`: the same index as `update` row by row
    (objects kept, in place counted), in one batch; an unknown id at a row
    raises naming the row, with the rows before it applied; bad shapes are
    refused before anything changes."""
    rng = np.random.default_rng(8)
    ids = rng.integers(0, OBJECTS, 2000)
    moves = rng.uniform(-0.05, 0.05, (len(ids), 2))
    moves[::10] = rng.uniform(-300, 300, (len(moves[::10]), 2))
    results = []
    for how in ["loop", "batch"]:
        path = tmp_path / how
        _build(path, "efind")
        want = _initial()
        new = np.empty((len(ids), 4))
        for m, (i, (dx, dy)) in enumerate(zip(ids.tolist(), moves)):
            box, obj = want[i]
            new[m] = (box[0] + dx, box[1] + dy, box[2] + dx, box[3] + dy)
            want[i] = (tuple(float(v) for v in new[m]), obj)
        with geoflash.Index(str(path)) as idx:
            with idx.batch():
                if how == "loop":
                    for i, b in zip(ids.tolist(), new.tolist()):
                        idx.update(i, b)
                else:
                    idx.update_batch(ids, new)
            assert _contents(idx) == want
            results.append((_contents(idx), idx.stats["updates_in_place"]))
    assert results[0] == results[1]
    assert 0 < results[1][1] < len(ids)
    with geoflash.Index(str(tmp_path / "batch")) as idx:
        with pytest.raises(geoflash.RTreeError, match="row 2: object 99999 is not in the index"):
            idx.update_batch([5, 6, 99999, 7], [(1, 1, 2, 2), (3, 3, 4, 4), (0, 0, 1, 1), (5, 5, 6, 6)])
        got = _contents(idx)
        assert got[5][0] == (1, 1, 2, 2) and got[6][0] == (3, 3, 4, 4)
        assert got[7] == want[7]
        with pytest.raises(geoflash.RTreeError, match="N×4"):
            idx.update_batch([1], [(1, 1)])
        with pytest.raises(geoflash.RTreeError, match="2 ids for 1 boxes"):
            idx.update_batch([1, 2], [(1, 1, 2, 2)])
        assert _contents(idx) == got
    with geoflash.Index(str(tmp_path / "batch")) as idx:
        assert _contents(idx) == got


def test_a_batch_loading_a_new_index_writes_no_log_per_insert(tmp_path):
    """Issue 47, item 1: `with idx.batch():` around the whole load of a new
    index is not logged by the engine (its end is a checkpoint, nodes are
    written once); the objects are all there after a reopen, and later
    batches log as before."""
    path = tmp_path / "new"
    initial = _initial()
    with geoflash.Index(str(path)) as idx:
        start = idx.stats
        with idx.batch():
            for i, (box, obj) in initial.items():
                idx.insert(i, box, obj=obj)
        loaded = idx.stats
        assert loaded["log_pages_written"] == start["log_pages_written"]
        assert loaded["log_records"] - start["log_records"] <= 4
        with idx.batch():
            box, _ = initial[0]
            idx.delete(0, box)
            idx.insert(0, box, obj="again")
        assert idx.stats["log_pages_written"] > loaded["log_pages_written"]
    expect = dict(initial)
    expect[0] = (initial[0][0], "again")
    with geoflash.Index(str(path), readonly=True) as idx:
        assert _contents(idx) == expect
