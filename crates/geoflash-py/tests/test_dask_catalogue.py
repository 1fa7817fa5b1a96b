"""geoflash.dask's partitioned indexes as stored data: one writer at a time
(the catalogue's lock and generation), inserts that fail part-way, rebuilds
at the same path, damaged catalogues, durable catalogue writes, builds that
fail, and the input checks of queries, joins and builds
(docs/reliability.md, "partitioned indexes"). On a LocalCluster of 2
worker processes × 1 thread, with 100 to 300 boxes."""

import fcntl
import json
import os
import re
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

import geopandas
import shapely
from distributed import Client, LocalCluster

import geoflash
import geoflash.dask as gd
from geoflash.dask import catalogue, worker
from geoflash.dask.partitioning import from_dict


@pytest.fixture(scope="module")
def client():
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    c = Client(cluster)
    yield c
    c.close()
    cluster.close()


def diagonal(n=100, offset=0.0):
    """n boxes of side 0.5 along the diagonal: box i at (i, i)."""
    return np.array([[i + offset, i + offset, i + offset + 0.5, i + offset + 0.5] for i in range(n)], float)


def part_dirs(path):
    return sorted(n for n in os.listdir(path) if n.startswith("part-"))


def read_cat(path):
    return json.loads((path / "catalogue.json").read_text())


def everything(index):
    return index.intersection((-1e9, -1e9, 1e9, 1e9)).tolist()


# ------------------------------------------------------------ one writer


def test_a_second_writer_with_an_older_catalogue_is_refused(client, tmp_path):
    """Two sessions on one path: the first splits a partition (its old
    directory goes), the second, still holding the catalogue from before,
    inserts. Before the catalogue's generation, the second's write
    recreated the removed partition and dropped the split and its own
    insert (76 ids found of 101)."""
    path = tmp_path / "two"
    p1 = gd.build(diagonal(), path, partitions=4, client=client, progress=False)
    p2 = gd.PartitionedIndex(path, client=client)
    generation = read_cat(path).get("generation")
    assert p1.split(0)
    before = part_dirs(path)
    with pytest.raises(gd.CatalogueError, match=r"catalogue\.json was written by another writer.*open it again"):
        p2.insert(1000, (1.0, 1.0, 1.2, 1.2))
    assert part_dirs(path) == before  # the split's old directory was not made again
    assert read_cat(path)["generation"] == generation + 1
    fresh = gd.PartitionedIndex(path, client=client)
    assert len(fresh) == 100 and everything(fresh) == list(range(100))
    # reopened, the second session's insert goes through
    p2 = gd.PartitionedIndex(path, client=client)
    p2.insert(1000, (1.0, 1.0, 1.2, 1.2))
    assert everything(gd.PartitionedIndex(path, client=client)) == list(range(100)) + [1000]


def test_a_writer_holding_the_lock_keeps_others_out(client, tmp_path):
    path = tmp_path / "locked"
    pidx = gd.build(diagonal(), path, partitions=2, client=client, progress=False)
    fd = os.open(path / "catalogue.lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # another writer at work
        with pytest.raises(gd.CatalogueError, match="being written by another"):
            pidx.insert(1000, (5, 5, 6, 6))
        with pytest.raises(gd.CatalogueError, match="being written by another"):
            pidx.delete(3, tuple(diagonal()[3]))
        with pytest.raises(gd.CatalogueError, match="being written by another"):
            pidx.split(pidx.partitions[0]["id"])
    finally:
        os.close(fd)
    assert len(gd.PartitionedIndex(path, client=client)) == 100
    pidx.insert(1000, (5, 5, 6, 6))
    assert pidx.intersection((5, 5, 6, 6)).tolist() == [5, 6, 1000]


def test_an_insert_into_a_partition_whose_directory_is_gone_is_refused(client, tmp_path):
    """A partition the catalogue names but whose directory is gone is not
    made again empty (which dropped what it held), and the error names it."""
    path = tmp_path / "gone"
    pidx = gd.build(diagonal(), path, partitions=2, by="kd", client=client, progress=False)
    owner = int(from_dict(pidx.catalogue["partitioner"]).assign(np.array([[1.0, 1, 1.2, 1.2]]))[0])
    gone = catalogue.partition_dir(str(path), pidx._entry(owner))
    client.run(worker.forget_under, str(path))
    shutil.rmtree(gone)
    with pytest.raises(Exception, match=re.escape(gone) + ".*holds no geoflash index"):
        pidx.insert(1000, (1.0, 1.0, 1.2, 1.2))
    assert not os.path.exists(gone)


# ------------------------------------------------- inserts that fail part-way


def test_a_bad_box_is_refused_before_anything_is_stored(client, tmp_path):
    """The reviewer's t_insert.py: a batch with a NaN box stored its good
    entry in a partition the catalogue's extents did not reach (found by
    no query), and the retry stored it twice."""
    path = tmp_path / "nan"
    pidx = gd.build(diagonal(), path, partitions=4, client=client, progress=False)
    w = (140, 140, 160, 160)
    for bad, why in (([np.nan, 0, np.nan, 1], "not finite"), ([0, 0, 1e151, 1], "1e150"), ([5, 5, 4, 6], "inverted")):
        with pytest.raises(geoflash.RTreeError, match=rf"row 1 \(id 1001\).*{why}.*nothing was inserted"):
            pidx.insert_batch(np.array([1000, 1001]), np.array([[150, 150, 151, 151], bad]))
    for index in (pidx, gd.PartitionedIndex(path, client=client)):
        assert len(index) == 100 and index.intersection(w).tolist() == []
    held = sorted(i for d in part_dirs(path) for i in geoflash.Index(str(path / d), readonly=True).intersection(w))
    assert held == []
    pidx.insert_batch(np.array([1000]), np.array([[150, 150, 151, 151]]))
    assert pidx.intersection(w).tolist() == [1000] and len(pidx) == 101
    assert gd.join(pidx, np.array([[150.2, 150.2, 150.8, 150.8]]), client=client, progress=False).tolist() == [[1000], [0]]


def test_a_failed_insert_leaves_what_it_stored_findable_and_a_retry_stores_each_entry_once(client, tmp_path):
    """One partition's task fails (its directory is held by another writer)
    after the other's stored an entry far outside the built extent."""
    path = tmp_path / "partial"
    pidx = gd.build(diagonal(), path, partitions=2, by="kd", client=client, progress=False)
    new = np.array([[-50.0, -50, -49, -49], [150, 150, 151, 151]])
    ids = np.array([1000, 1001])
    owners = from_dict(pidx.catalogue["partitioner"]).assign(new)
    assert owners[0] != owners[1]
    blocked = catalogue.partition_dir(str(path), pidx._entry(int(owners[1])))
    client.run(worker.forget_under, str(path))
    holder = geoflash.Index(blocked)  # another process writing that partition
    try:
        with pytest.raises(Exception, match=re.escape(blocked)) as err:
            pidx.insert_batch(ids, new)
    finally:
        holder.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the catalogue counts what the partitions hold
        fresh = gd.PartitionedIndex(path, client=client)
    assert fresh.intersection((-60, -60, -40, -40)).tolist() == [1000]  # stored, so found
    assert len(fresh) == 101
    assert "marked pending" in str(err.value) and "again stores each missing entry once" in str(err.value)
    assert all(p.get("pending") for p in fresh.catalogue["partitions"] if p["id"] in owners)
    pidx.insert_batch(ids, new)  # the same batch again: each entry once
    for index in (pidx, gd.PartitionedIndex(path, client=client)):
        assert everything(index) == list(range(100)) + [1000, 1001]
        assert len(index) == 102
        assert not any(p.get("pending") for p in index.catalogue["partitions"])


def test_a_client_killed_before_its_insert_is_committed_leaves_the_entries_findable(client, tmp_path, monkeypatch):
    """The client dies after the tasks stored their entries, before the
    catalogue names them (its final write fails here): the catalogue
    committed before the tasks already covers them."""
    path = tmp_path / "killed"
    pidx = gd.build(diagonal(), path, partitions=2, by="kd", client=client, progress=False)
    real_write = catalogue.write

    def stored():
        found = []
        for d in part_dirs(path):
            with geoflash.Index(str(path / d), readonly=True) as index:
                found += index.intersection((-1e9, -1e9, 1e9, 1e9))
        return 1000 in found and 1001 in found

    def write(root, cat):
        if stored():  # the tasks have run: the client dies before it names their work
            raise SystemExit("killed")
        real_write(root, cat)

    monkeypatch.setattr(catalogue, "write", write)
    new = np.array([[-50.0, -50, -49, -49], [150, 150, 151, 151]])
    with pytest.raises(SystemExit):
        pidx.insert_batch(np.array([1000, 1001]), new)
    monkeypatch.setattr(catalogue, "write", real_write)
    on_disk = read_cat(path)
    assert on_disk["extent"] == [-50, -50, 151, 151]
    assert all(p.get("pending") for p in on_disk["partitions"])
    with pytest.warns(RuntimeWarning, match="the catalogue says 50 .an insert into it did not finish"):
        fresh = gd.PartitionedIndex(path, client=client)
    assert fresh.intersection((-60, -60, -40, -40)).tolist() == [1000]
    assert fresh.intersection((140, 140, 160, 160)).tolist() == [1001]
    assert len(fresh) == 102
    fresh.insert_batch(np.array([1000, 1001]), new)  # the retry stores nothing twice
    assert everything(gd.PartitionedIndex(path, client=client)) == list(range(100)) + [1000, 1001]


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_split_killed_around_its_catalogue_write_leaves_no_directory_behind(client, tmp_path, monkeypatch, when):
    """A split killed before its catalogue write leaves its two new
    halves, one killed after it the old partition: directories no
    catalogue names, which nothing removed. The next writer removes them;
    the answers are the catalogue's."""
    path = tmp_path / when
    pidx = gd.build(diagonal(), path, partitions=2, client=client, progress=False)
    real_write = catalogue.write

    def write(root, cat):
        if when == "after":
            real_write(root, cat)
        raise SystemExit("killed")

    monkeypatch.setattr(catalogue, "write", write)
    with pytest.raises(SystemExit):
        pidx.split(0)
    monkeypatch.setattr(catalogue, "write", real_write)
    named = lambda: sorted(os.path.basename(p["path"]) for p in read_cat(path)["partitions"])
    assert len(part_dirs(path)) > len(named())  # left behind
    fresh = gd.PartitionedIndex(path, client=client)
    assert everything(fresh) == list(range(100))
    fresh.insert(1000, (1.0, 1.0, 1.2, 1.2))
    assert part_dirs(path) == named()
    assert everything(gd.PartitionedIndex(path, client=client)) == list(range(100)) + [1000]


def test_opening_counts_each_partition_and_says_where_the_catalogue_differs(client, tmp_path):
    path = tmp_path / "counts"
    gd.build(diagonal(), path, partitions=2, by="kd", client=client, progress=False)
    cat = read_cat(path)
    true = cat["partitions"][0]["count"]
    cat["partitions"][0]["count"] = true - 5
    cat["partitions"][0]["extent"][2] -= 10  # narrower than what it holds
    cat["count"] -= 5
    catalogue.write(path, cat)
    with pytest.warns(RuntimeWarning, match=rf"holds {true} entries, the catalogue says {true - 5}.*outside its extent"):
        pidx = gd.PartitionedIndex(path, client=client)
    assert len(pidx) == 100 and everything(pidx) == list(range(100))
    assert pidx.count((0, 0, 1000, 1000)) == 100


# ------------------------------------------------ rebuilds at the same path


def test_a_rebuild_at_the_same_path_never_answers_from_the_old_build(client, tmp_path):
    """Workers kept partitions open by directory only: after a rebuild at
    the same path, a worker that had opened the old build answered with
    its ids (intermittently, by which worker a task ran on)."""
    path = tmp_path / "again"
    boxes = diagonal()
    workers = list(client.scheduler_info()["workers"])
    small = np.array([[2.2, 2.2, 2.3, 2.3]])
    old = gd.build(boxes, path, partitions=2, client=client, progress=False)
    for w in workers:  # every worker opens every partition of the first build
        old._where = [w] * len(old.partitions)
        assert old.intersection((0, 0, 5, 5)).tolist() == [0, 1, 2, 3, 4, 5]
        assert gd.join(old, small, client=client, progress=False).tolist() == [[2], [0]]
    shutil.rmtree(path)
    gd.build((np.arange(500, 600), boxes), path, partitions=2, client=client, progress=False)
    new = gd.PartitionedIndex(path, client=client)
    for w in workers:
        new._where = [w] * len(new.partitions)
        assert new.intersection((0, 0, 5, 5)).tolist() == [500, 501, 502, 503, 504, 505], w
        assert new.nearest((2.2, 2.2), 1).tolist() == [502], w
        assert gd.join(new, small, client=client, progress=False).tolist() == [[502], [0]], w


# --------------------------------------------------------- damaged catalogues


def test_a_damaged_catalogue_is_an_error_naming_it(client, tmp_path):
    """The reviewer's t_misc.py: one digit of an extent changed, and a
    window in the lost part of it answered [] where 6 entries lie."""
    path = tmp_path / "dmg"
    gd.build(diagonal(), path, partitions=4, client=client, progress=False)
    file = path / "catalogue.json"
    text = file.read_text()
    digits = [m.start() for m in re.finditer(r"[0-9]", text)]
    assert len(digits) > 50
    for at in digits:  # every digit of the file changed: never read as another catalogue
        file.write_text(text[:at] + str((int(text[at]) + 1) % 10) + text[at + 1:])
        with pytest.raises(gd.CatalogueError, match=re.escape(str(file)) + ".*(damaged|version|not a partition catalogue)"):
            catalogue.read(path)
    file.write_text(text.replace('"checksum"', '"checksun"'))
    with pytest.raises(gd.CatalogueError, match="damaged: a version 2 catalogue without its checksum"):
        gd.PartitionedIndex(path, client=client)
    i = text.index('"extent"', text.index('"partitions"'))
    j = text.index("24.5", i)
    file.write_text(text[:j] + "1" + text[j + 1:])
    with pytest.raises(gd.CatalogueError, match=re.escape(str(file)) + " is damaged"):
        gd.PartitionedIndex(path, client=client)
    file.write_text(text)
    assert gd.PartitionedIndex(path, client=client).intersection((15, 15, 20, 20)).tolist() == [15, 16, 17, 18, 19, 20]


def test_a_version_1_catalogue_is_read_and_written_as_version_2(client, tmp_path):
    path = tmp_path / "v1"
    gd.build(diagonal(), path, partitions=2, client=client, progress=False)
    cat = read_cat(path)
    for key in ("checksum", "build", "generation"):
        cat.pop(key, None)
    cat["version"] = 1
    (path / "catalogue.json").write_text(json.dumps(cat))
    pidx = gd.PartitionedIndex(path, client=client)
    assert everything(pidx) == list(range(100))
    pidx.insert(1000, (5, 5, 6, 6))
    cat = read_cat(path)
    assert cat["version"] == 2 and cat["checksum"].startswith("sha256:") and cat["generation"] == 2
    assert everything(gd.PartitionedIndex(path, client=client)) == list(range(100)) + [1000]


def test_the_documented_catalogue_has_the_fields_the_code_writes(client, tmp_path):
    doc = (Path(__file__).resolve().parents[3] / "docs" / "scaleout.md").read_text()
    block = re.search(r"```json no-run\n(\{\"format\": \"geoflash-partitioned\".*?)```", doc, re.S).group(1)
    documented = set(re.findall(r'"(\w+)":', block))
    path = tmp_path / "doc"
    gd.build(diagonal(), path, partitions=2, client=client, progress=False, page_size=512)
    cat = read_cat(path)
    written = set(cat) | set(cat["index_options"]) | set(cat["partitioner"]) | {k for p in cat["partitions"] for k in p}
    assert documented == written
    assert f'"version": {cat["version"]}' in block and f'(`catalogue.json`, format version {cat["version"]}' in doc


# ---------------------------------------------------- durable catalogue writes


def test_the_catalogue_is_synced_renamed_then_its_directory_synced(client, tmp_path, monkeypatch):
    path = tmp_path / "durable"
    pidx = gd.build(diagonal(), path, partitions=2, client=client, progress=False)
    events = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(src, dst):
        events.append(("replace", os.fspath(src), os.fspath(dst), sorted(part_dirs(path))))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    old = part_dirs(path)
    assert pidx.split(pidx.partitions[0]["id"])
    target = str(path / "catalogue.json")
    renames = [e for e in events if e[0] == "replace" and e[2] == target]
    assert len(renames) == 1
    _, tmp, _, dirs_then = renames[0]
    assert os.path.dirname(tmp) == str(path) and tmp != target + ".tmp"  # a unique name beside it
    at = events.index(renames[0])
    assert ("fsync", tmp) in events[:at]  # the new catalogue synced before the rename
    assert ("fsync", str(path)) in events[at + 1:]  # the directory synced after it
    assert set(old) <= set(dirs_then)  # the old partition was still there at the rename
    assert len(part_dirs(path)) == 3 and not set(old) <= set(part_dirs(path))  # and gone after
    assert not [n for n in os.listdir(path) if n.endswith(".tmp")]
    # two writes never share a temporary file
    events.clear()
    pidx.insert(1000, (5, 5, 6, 6))
    tmps = [e[1] for e in events if e[0] == "replace" and e[2] == target]
    assert len(tmps) == 2 and len(set(tmps)) == 2


# ----------------------------------------------------------- failed builds


def test_options_are_checked_before_building_and_an_unfinished_build_is_named(client, tmp_path):
    """The reviewer's t_misc.py: page_size=np.int64(4096) failed at the
    catalogue, after the partitions were built, and the next build at
    the path failed with "part-00000 already holds an index"."""
    path = tmp_path / "np"
    pidx = gd.build(diagonal(), path, partitions=3, client=client, progress=False, page_size=np.int64(4096))
    assert read_cat(path)["index_options"] == {"page_size": 4096} and len(pidx) == 100
    with pytest.raises(ValueError, match="index option page_size .* cannot be written to the catalogue"):
        gd.build(diagonal(), tmp_path / "obj", client=client, progress=False, page_size=object())
    assert not os.path.exists(tmp_path / "obj" / "catalogue.json")
    # a build killed before its catalogue: its partitions and no catalogue
    os.unlink(path / "catalogue.json")
    for attempt in (lambda: gd.build(diagonal(), path, partitions=3, client=client, progress=False),
                    lambda: gd.PartitionedIndex(path, client=client)):
        with pytest.raises(ValueError, match="holds 3 partition directories .* but no catalogue.json: "
                                             "an earlier build did not finish; remove the directory"):
            attempt()


def test_a_build_that_fails_removes_its_partitions(client, tmp_path):
    path = tmp_path / "fails"
    boxes = diagonal()
    boxes[99] = [1e200, 0, 1e200, 0]  # beyond what an index stores: its partition's task fails
    with pytest.raises(geoflash.RTreeError, match="exceeds 1e150"):
        gd.build(boxes, path, partitions=3, by="kd", client=client, progress=False)
    assert part_dirs(path) == []
    assert len(gd.build(boxes[:99], path, partitions=3, by="kd", client=client, progress=False)) == 99


# ------------------------------------------------------------ input checks


def test_bad_windows_raise_as_one_index_does(client, tmp_path):
    pidx = gd.build(diagonal(), tmp_path / "w", partitions=3, client=client, progress=False)
    single = geoflash.Index.from_arrays(None, diagonal())
    for w in [(np.nan, 0, 10, 10), (500, 500, 400, 600)]:  # the second lies outside every extent
        with pytest.raises(geoflash.RTreeError, match="invalid input: rectangle"):
            single.intersection(w)
        with pytest.raises(geoflash.RTreeError, match="invalid input: rectangle"):
            pidx.intersection(w)
        with pytest.raises(geoflash.RTreeError, match="invalid input: rectangle"):
            pidx.count(w)
    with pytest.raises(geoflash.RTreeError, match="row 1: rectangle"):
        pidx.intersection_batch(np.array([[0, 0, 1, 1], [np.nan, 0, 1, 1]]))
    with pytest.raises(geoflash.RTreeError, match="rectangle"):
        pidx.nearest((np.nan, 0), 1)
    assert pidx.intersection((-np.inf, -np.inf, np.inf, np.inf)).tolist() == list(range(100))
    # Text is not coordinates, as for one index (it was read digit by digit).
    for text in ["1234", b"ab", ("1", 2, 3, 4)]:
        with pytest.raises(geoflash.InvalidCoordinatesError):
            single.intersection(text)
        with pytest.raises(geoflash.InvalidCoordinatesError):
            pidx.intersection(text)
        with pytest.raises(geoflash.InvalidCoordinatesError):
            pidx.insert(1000, text)
    assert len(gd.PartitionedIndex(tmp_path / "w", client=client)) == 100


def test_a_list_of_geodataframes_joins_and_ids_are_used_or_refused(client, tmp_path):
    boxes = diagonal(60)
    frames = [geopandas.GeoDataFrame(geometry=shapely.box(*boxes[:30].T)),
              geopandas.GeoDataFrame(geometry=shapely.box(*boxes[30:].T))]
    right = np.array([[10.2, 10.2, 10.3, 10.3], [45.1, 45.1, 45.2, 45.2]])
    for broadcast in (0, 100_000):
        got = gd.join(frames, right, client=client, broadcast=broadcast, partitions=2, progress=False)
        assert got.tolist() == [[10, 45], [0, 1]]
    # ids= with a GeoDataFrame: used
    frame = geopandas.GeoDataFrame(geometry=shapely.box(*boxes.T))
    pidx = gd.build(frame, tmp_path / "ids", partitions=2, client=client, progress=False, ids=np.arange(60) + 7000)
    assert pidx.intersection((10, 10, 11, 11)).tolist() == [7010, 7011]
    with pytest.raises(ValueError, match="unique"):
        gd.build(frame, tmp_path / "dup", client=client, progress=False, ids=np.zeros(60, dtype=int))
    with pytest.raises(ValueError, match="ids= is for arrays of boxes and a GeoDataFrame"):
        gd.build(frames, tmp_path / "list", client=client, progress=False, ids=np.arange(60))
    with pytest.raises(ValueError, match="ids given twice"):
        gd.build((np.arange(60), boxes), tmp_path / "twice", client=client, progress=False, ids=np.arange(60))
