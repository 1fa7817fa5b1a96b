"""The id map of an index written before its changes went to the store's
log (eFIND with a log of superblock version 7: the map in ``pyrecords.dat``
and its own ``pyrecords.log``), recovered by the command line's ``geoflash
recover`` before the package opens it again.

A power loss between the store's group commit and the sync of
``pyrecords.log`` keeps operations in the tree whose frames the map's log
lost. The package's open repairs that when the store's restart replayed
operations; ``recover`` replays and checkpoints first, so the package's
open saw no replay, and after a move (a delete and an insert: the counts
agree) it served a map that disagreed with the tree: a query reaching the
moved entry raised ``CorruptIndexError`` ("record key ... is in the tree but
not in the id map"). The engine's writable open now marks ``pyrecords.log``
when it replays such an index, so the package's open repairs it either way
(``crates/geoflash/src/records/log.rs``, ``mark_tree_recovered``; the Rust
test ``index_dir::records_review_tests`` covers the same at the engine)."""
import os
import signal
import subprocess
import sys
import warnings

import pytest

import geoflash
from test_errors import _crc32c
from test_osm_import import geoflash_bin

PAGE = 1024
N = 60


def _box(i):
    x, y = float(i % 10) * 3, float(i // 10) * 3
    return (x, y, x + 1, y + 1)


def _varint(v):
    """`v` as an unsigned LEB128 varint (the log payload codec's)."""
    out = bytearray()
    while True:
        b, v = v & 0x7F, v >> 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def _set_crc(page):
    """The log superblock's CRC-32C (bytes 8..12, of the page with them zero)."""
    page[8:12] = bytes(4)
    page[8:12] = _crc32c(bytes(page)).to_bytes(4, "little")


def _as_written_before_the_map_went_to_the_store_log(path):
    """Rewrites the closed eFIND index in `path`, whose id map is in the
    store's log, as the builds before that wrote it: both log superblocks of
    version 7 whose checkpoint names no generation of the map, the snapshot
    of format 4 (the layout of 5), and the map's own log, empty, of the
    snapshot's generation."""
    records = bytearray(open(os.path.join(path, "pyrecords.dat"), "rb").read())
    assert int.from_bytes(records[8:10], "little") == 5
    generation = int.from_bytes(records[16:24], "little")
    records[8:10] = (4).to_bytes(2, "little")
    records[-4:] = _crc32c(bytes(records[:-4])).to_bytes(4, "little")
    open(os.path.join(path, "pyrecords.dat"), "wb").write(bytes(records))
    with open(os.path.join(path, "log.dat"), "r+b") as f:
        slots = bytearray(f.read(2 * PAGE))
        for at in (0, PAGE):
            page = memoryview(slots)[at:at + PAGE]
            # Version 11: version 9 with interleaved regions (byte 14).
            assert bytes(page[:4]) == b"GFLS" and int.from_bytes(page[4:6], "little") == 11
            assert page[12] & 1, "a clean checkpoint keeps its CHECKPOINT in the superblock"
            length = int.from_bytes(page[104:108], "little")
            end = 108 + length
            # The generation ends the CHECKPOINT payload (a varint in the
            # compact log's payload codec, 8 bytes in the fixed one).
            tail = next(t for t in (_varint(generation), generation.to_bytes(8, "little"))
                        if bytes(page[end - len(t):end]) == t)
            page[104:108] = (length - len(tail)).to_bytes(4, "little")
            page[end - len(tail):end] = bytes(len(tail))
            # Version 7 lays its regions out one after the other; the
            # closed log's live region is empty, so no page has to move.
            page[4:6] = (7).to_bytes(2, "little")
            page[14] = 0
            buf = bytearray(page)
            _set_crc(buf)
            page[:] = buf
        f.seek(0)
        f.write(bytes(slots))
    # The map's log: magic, format 2, the generation, its header's CRC-32C.
    header = bytearray(b"GFPYRLG\0" + (2).to_bytes(2, "little") + bytes(6))
    header += generation.to_bytes(8, "little") + bytes(8)
    header[28:32] = _crc32c(bytes(header[:28])).to_bytes(4, "little")
    open(os.path.join(path, "pyrecords.log"), "wb").write(bytes(header))


def _contents(idx):
    return {it.id: (tuple(it.bbox), it.object) for it in idx.intersection((-1e9, -1e9, 1e9, 1e9), objects=True)}


@pytest.mark.parametrize("recover_first", [False, True])
def test_an_old_format_index_recovered_by_the_command_line_opens_repaired(tmp_path, recover_first):
    """See the module docs: opened by the package first, or after ``geoflash
    recover``, the index answers the tree's prefix of the operations with
    its ids and objects, repaired with a ``RuntimeWarning``, never an error
    or a map apart from its tree."""
    bin_ = geoflash_bin()
    assert bin_, "the geoflash command is not built (cargo build -p geoflash-cli)"
    path = str(tmp_path / "old")
    idx = geoflash.Index(path, page_size=PAGE, durability="sync")
    for i in range(N):
        idx.insert(100 + i, _box(i), obj=f"o{i}")
    idx.close()
    _as_written_before_the_map_went_to_the_store_log(path)
    with geoflash.Index(path) as idx:  # the old protocol reads it, and checkpoints it as it was
        before = _contents(idx)
    assert sorted(before) == list(range(100, 100 + N))
    assert os.path.getsize(os.path.join(path, "pyrecords.log")) == 32
    # A writer moves id 117 (a delete and an insert), each operation made
    # durable by the store's log (durability "sync"); killed, and the frames
    # of the map's log since its snapshot lost, as a power loss between the
    # store's group commit and the map's sync leaves them.
    code = f"""
import os, signal, geoflash
idx = geoflash.Index({path!r})
idx.delete(117, {_box(17)!r})
idx.insert(117, (90.0, 90.0, 91.0, 91.0), obj="moved")
os.kill(os.getpid(), signal.SIGKILL)
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == -signal.SIGKILL, r.stderr
    os.truncate(os.path.join(path, "pyrecords.log"), 32)
    if recover_first:
        r = subprocess.run([bin_, "recover", "--index", path, "--json"], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        assert '"recovered":true' in r.stdout.replace(" ", ""), r.stdout
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        idx = geoflash.Index(path)
    try:
        got = _contents(idx)
    finally:
        idx.close()
    # The tree decides: the durable delete stays, the insert whose id the
    # map never logged is dropped (a prefix of the operations).
    want = {k: v for k, v in before.items() if k != 117}
    assert got == want
    assert any("disagreed after a crash" in str(w.message) for w in caught), [str(w.message) for w in caught]
    with geoflash.Index(path, readonly=True) as idx:
        assert _contents(idx) == want
