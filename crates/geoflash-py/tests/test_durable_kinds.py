"""Killed Python writers over every index kind, store and device form the
package accepts for an index directory (test_durable_updates.py covers the
default R*-tree on eFIND, FAST and the plain store on the default device).

A writer moves objects inside ``with idx.batch():`` (delete + insert with a
new object, and ``update``) and is killed (SIGKILL) at a random move. The
directory must then hold the state after a prefix of the moves holding
every batch it acknowledged, ids and objects included, whether opened
read-only first or for writing; answers of windows agree with that state;
reopening again changes nothing. A repair warning is allowed only where
docs/python.md documents one (a record map with its own ``pyrecords.log``:
the plain store, the FOR-tree, grid files, simulated devices), and only at
the first opens after the crash. Point kinds (the xBR+-tree and the grid
files) store degenerate boxes ``(x, y, x, y)`` and move points.

Two findings of this campaign have tests of their own: an index directory
on a device that lives only in its process (``mem:``, ``hddsim:``, a
hybrid with such a tier) was accepted and could never be opened again
(now refused); the xBR+-tree's ``update`` was two store operations, and a
kill between their commits lost the moved object on eFIND and FAST."""
import os
import signal
import subprocess
import sys
import warnings
import zlib

import numpy as np
import pytest

import geoflash
from test_durable_updates import (
    BATCHES,
    MOVES_PER_BATCH,
    _apply,
    _contents,
    _initial,
    _moves,
)

# Killed-writer runs per case (GEOFLASH_PY_KILLS; `make torture` raises it).
KILLS = int(os.environ.get("GEOFLASH_PY_KILLS", "1"))
# Every device for every kind and store (GEOFLASH_PY_KIND_MATRIX=full, as
# `make torture` runs it); otherwise one device per kind and store, turning
# through the devices so that each is killed under some kind.
FULL = os.environ.get("GEOFLASH_PY_KIND_MATRIX") == "full"
# The random kills of a run again (each failure names its seed).
SEED = int(os.environ["GEOFLASH_PY_SEED"]) if os.environ.get("GEOFLASH_PY_SEED") else None
#: The Hilbert curve's and the grid files' domain: every object stays inside.
DOMAIN = (-100.0, -100.0, 1100.0, 1100.0)
#: A small memory budget, so that nodes (and grid pages) reach the device
#: between checkpoints.
BUFFER = "16KiB"
POINT_KINDS = {"xbr", "grid", "gffm", "lbgrid", "hgrid"}
#: Devices by short name: the default (the directory's pages.dat through the
#: page cache), direct I/O, a file outside the directory, a hybrid of two
#: files, the flash simulator alone, a hybrid with a simulated fast tier.
DEVICES = {
    "default": None,
    "direct": "file",
    "file-path": "file:{ext}?direct=false",
    "hybrid-files": "hybrid:fast=(file?direct=false);slow=(file?direct=false)",
    "flashsim": "flashsim:preset=seed-tc58",
    "hybrid-sim": "hybrid:fast=(flashsim:);slow=(file?direct=false)",
}
SIMULATED = {"flashsim", "hybrid-sim"}
HYBRIDS = ["hybrid-files", "hybrid-sim"]


def _cases():
    """(kind, store, device, durability): every kind on every store and
    device it takes for a directory (one device per kind and store unless
    FULL), but the default R*-tree on the default
    device (test_durable_updates.py) and direct I/O beyond one tree of
    each store, the FOR-tree and a grid file (the same files as the
    default device, written around the page cache); ``sync`` and ``none``
    on the default device (``group``, the default, everywhere else)."""
    out = []
    for kind in ["rstar", "hilbert", "xbr", "shrtree", "fortree", "grid", "gffm", "lbgrid", "hgrid"]:
        if kind == "fortree":
            stores = ["plain"]
        elif kind in geoflash.GRID_KINDS:
            stores = [None]
        else:
            stores = ["efind", "fast", "plain"]
        devices = HYBRIDS if kind in ("shrtree", "hgrid") else list(DEVICES)
        for store in stores:
            taken = [
                d for d in devices
                if not (kind == "rstar" and d == "default")
                and not (d == "direct" and kind not in ("rstar", "fortree", "gffm"))
            ]
            if not FULL:
                # One device per kind and store, turning through them.
                taken = [taken[len(out) % len(taken)]]
            out.extend((kind, store, device, None) for device in taken)
    for kind in ["rstar", "hilbert", "xbr"]:
        for store in ["efind", "fast"]:
            out.append((kind, store, "default", "sync"))
    for store in ["efind", "fast"]:
        out.append(("rstar", store, "default", "none"))
    return out


def _case_id(case):
    kind, store, device, durability = case
    return "-".join(p for p in (kind, store, device, durability) if p)


CASES = [pytest.param(c, id=_case_id(c)) for c in _cases()]


def _initial_state(kind):
    """The objects before the moves: test_durable_updates' boxes, or their
    lower corners as points for a point kind."""
    state = _initial()
    if kind in POINT_KINDS:
        return {i: ((b[0], b[1], b[0], b[1]), obj) for i, (b, obj) in state.items()}
    return state


def _options(kind, store, device, durability, ext):
    spec = DEVICES[device]
    opts = dict(kind=kind, page_size=1024, buffer=BUFFER)
    if store is not None:
        opts["store"] = store
    if spec is not None:
        opts["device"] = spec.format(ext=ext)
    if durability is not None:
        opts["durability"] = durability
    if kind in ("hilbert", "xbr") or kind in geoflash.GRID_KINDS:
        opts["hilbert_domain"] = DOMAIN
    return opts


def _build(path, kind, opts):
    idx = geoflash.Index(str(path), **opts)
    for i, (box, obj) in _initial_state(kind).items():
        idx.insert(i, box, obj=obj)
    idx.close()


#: The writer (test_durable_updates' `_write`) from this kind's first state.
WRITER = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from test_durable_updates import _write; from test_durable_kinds import _initial_state; "
    "_write(sys.argv[2], _initial_state(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))"
)


def _prefix_state(got, kind, ids, step, acked, kill_at):
    """The state after the first `upto` moves that `got` equals, for some
    `upto` in [acked, kill_at] (a move that is a delete and an insert may
    also have stopped between the two, its id missing), or None."""
    state = _apply(_initial_state(kind), ids, step, acked)
    for upto in range(acked, kill_at + 1):
        if got == state:
            return state
        if upto < kill_at and upto % 2 == 0:  # a delete and an insert
            half = {k: v for k, v in state.items() if k != int(ids[upto])}
            if got == half:
                return half
        if upto < kill_at:
            state = _apply(state, ids, step, 1, first=upto)
    return None


def _brute(state, w):
    return sorted(
        k for k, (b, _) in state.items() if b[0] <= w[2] and w[0] <= b[2] and b[1] <= w[3] and w[1] <= b[3]
    )


def _open(path, readonly):
    """The index in `path` opened (read-only or not): its contents, the
    answers of the windows, and the warnings the open gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        idx = geoflash.Index(str(path), readonly=readonly)
    try:
        got = _contents(idx)
        rng = np.random.default_rng(11)
        answers = []
        for _ in range(8):
            x, y = rng.uniform(0, 950, 2)
            w = (x, y, x + rng.uniform(5, 150), y + rng.uniform(5, 150))
            answers.append((w, sorted(idx.intersection(w)), idx.count(w)))
        assert len(idx) == len(got)
    finally:
        idx.close()
    return got, answers, [str(w.message) for w in caught]


def _check_answers(answers, state, where):
    for w, ids, count in answers:
        want = _brute(state, w)
        assert (ids, count) == (want, len(want)), f"{where}: window {w}"


@pytest.mark.parametrize("case", CASES)
def test_a_killed_writer_keeps_every_acknowledged_batch_on_every_kind_and_device(tmp_path, case):
    """SIGKILL at a random move inside a batch: every open after it (a
    read-only one first, then for writing, then both again) holds the same
    state, that after a prefix of the moves holding every acknowledged
    batch, ids and objects included; windows and counts answer that state;
    a repair warning only where the record map keeps its own log, and only
    before the first writable open repaired the directory."""
    kind, store, device, durability = case
    own_log = store in (None, "plain") or device in SIMULATED
    tests = os.path.dirname(os.path.abspath(__file__))
    base = SEED if SEED is not None else int.from_bytes(os.urandom(4), "little")
    rng = np.random.default_rng([base, zlib.crc32(_case_id(case).encode())])
    acked_moves = 0
    for run in range(KILLS):
        path = tmp_path / f"i{run}"
        opts = _options(kind, store, device, durability, tmp_path / f"ext{run}.img")
        _build(path, kind, opts)
        seed = int(rng.integers(1 << 30))
        kill_at = int(rng.integers(1, BATCHES * MOVES_PER_BATCH))
        r = subprocess.run(
            [sys.executable, "-c", WRITER, tests, str(path), kind, str(seed), str(kill_at)],
            capture_output=True,
            text=True,
        )
        where = f"{_case_id(case)} run {run} (GEOFLASH_PY_SEED={base}: moves of seed {seed}, killed at move {kill_at})"
        assert r.returncode == -signal.SIGKILL, f"{where}: {r.stderr}"
        acked = int(r.stdout.split()[-1]) if r.stdout.split() else 0
        assert acked <= kill_at
        acked_moves += acked
        ids, step = _moves(seed)
        first = None
        for n, readonly in enumerate([True, False, True, False]):
            label = f"{where}, open {n} ({'read-only' if readonly else 'writable'})"
            got, answers, warned = _open(path, readonly)
            if first is None:
                first = _prefix_state(got, kind, ids, step, acked, kill_at)
                assert first is not None, f"{label}: not a prefix state holding the {acked} acknowledged moves"
            assert got == first, f"{label}: another state than the first open's"
            _check_answers(answers, first, label)
            repairs = [w for w in warned if "disagreed after a crash" in w]
            others = [w for w in warned if w not in repairs]
            assert not others, f"{label}: {others}"
            if not own_log or n >= 2:
                assert not repairs, f"{label}: {repairs}"
    # A summary line (pytest -s), as test_durable_updates prints for `make torture`.
    print(
        f"\npython torture: {_case_id(case)}: {KILLS} writers killed (SIGKILL inside a batch), "
        f"{acked_moves} acknowledged moves all kept, every index a prefix state"
    )


PROCESS_ONLY = [
    "mem:",
    "hddsim:",
    "hybrid:fast=(mem:);slow=(file?direct=false)",
    "hybrid:fast=(file?direct=false);slow=(hddsim:)",
]


@pytest.mark.parametrize("device", PROCESS_ONLY)
def test_a_directory_on_a_device_that_lives_only_in_its_process_is_refused(tmp_path, device):
    """An index directory on ``mem:``, ``hddsim:`` or a hybrid with such a
    tier would keep its nodes in this process only: every later open failed
    ("lives only in its process; rebuild it") after the batches and the
    ``close()`` had returned. Created by insertion, from arrays, from a
    stream or from geometries, it is refused naming the device, and
    nothing is left in the directory; the same device without a path (an
    index in this process) is taken."""
    shapely = pytest.importorskip("shapely")
    boxes = np.array([[0.0, 0.0, 1.0, 1.0], [2.0, 2.0, 3.0, 3.0]])
    makes = {
        "insertion": lambda p: geoflash.Index(p, device=device),
        "arrays": lambda p: geoflash.Index.from_arrays(None, boxes, p, device=device),
        "stream": lambda p: geoflash.Index(p, [(i, tuple(b), None) for i, b in enumerate(boxes)], device=device),
        "geometries": lambda p: geoflash.Index.from_geoseries(shapely.box(*boxes.T), p, device=device),
    }
    for how, make in makes.items():
        path = tmp_path / how
        with pytest.raises(geoflash.RTreeError, match="lives only in its process") as raised:
            make(str(path))
        message = str(raised.value).replace("&engine=auto", "")  # the device as the manifest spells it
        assert f'device "{device}"' in message and str(path) in message, (how, message)
        assert not (path / "manifest.json").exists(), how
    if "file" not in device:  # a file tier needs a directory
        idx = geoflash.Index(device=device)
        idx.insert(1, (0, 0, 1, 1))
        assert list(idx.intersection((0, 0, 2, 2))) == [1]


@pytest.mark.parametrize("kind", ["rstar", "hilbert", "xbr"])
@pytest.mark.parametrize("store", ["efind", "fast"])
def test_update_is_one_operation_of_the_store(tmp_path, kind, store):
    """``update(id, coordinates)`` is one operation (docs/python.md,
    "durable like an insert"), so that a crash keeps it whole or not at
    all: with ``durability="sync"`` it commits one operation and syncs the
    log once, whether it moves the entry in place or far away (the
    xBR+-tree's was a deletion and an insertion, two operations: a crash
    between their commits lost the object)."""
    idx = geoflash.Index(str(tmp_path / "i"), kind=kind, store=store, durability="sync",
                         hilbert_domain=DOMAIN, page_size=1024)
    for i in range(200):
        x, y = (i * 37) % 1000, (i * 91) % 1000
        idx.insert(i, (x, y, x, y))
    for i, (x, y) in [(5, (185.5, 455.5)), (3, (111.5, 5.5)), (4, (900.25, 800.75))]:
        before = idx.stats
        idx.update(i, (x, y, x, y))
        after = idx.stats
        assert (after["ops_committed"] - before["ops_committed"], after["log_syncs"] - before["log_syncs"]) == (1, 1), (kind, i)
    idx.close()
