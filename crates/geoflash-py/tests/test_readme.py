"""The Python examples of the README and of ``docs/*.md`` run as written.

Each document's ``python`` blocks run in order as one script, ``python
example.py`` (a later block may use what an earlier one defined, as a
reader would; run as a file, so that an example starting worker processes
must guard its main code as a script must: Dask's and multiprocessing's
workers import the script that made them), in a temporary directory that
holds what the examples read: the repository's ``workloads/``, and the
files a document names but does not make itself (``buildings.gpkg`` and
``roads.gpkg`` of docs/scaleout.md, ``results.sqlite``), made here. A block marked
```` ```python no-run ```` is left out; no block is at present.
``crates/geoflash-cli/tests/doc_examples.rs`` runs the other languages and
says which test runs each. The ``>>>`` examples in the package's own
docstrings run here too (doctest), as the Rust crates' run under ``cargo
test``.
"""
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
DOCUMENTS = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
FENCE = re.compile(r"^```(\S*)([^\n]*)\n(.*?)^```[ \t]*$", re.S | re.M)


def python_blocks(path):
    """(``file:line`` of the fence, code) of each python block of ``path``
    not marked ``no-run``."""
    text = path.read_text()
    name = path.relative_to(ROOT).as_posix()
    out = []
    for m in FENCE.finditer(text):
        if m.group(1) == "python" and "no-run" not in m.group(2).split():
            out.append((f"{name}:{text.count(chr(10), 0, m.start()) + 1}", m.group(3)))
    return out


EXAMPLES = {d.relative_to(ROOT).as_posix(): python_blocks(d) for d in DOCUMENTS}
EXAMPLES = {name: blocks for name, blocks in EXAMPLES.items() if blocks}

def script(blocks):
    """The blocks as one script, each after a comment naming its place, and
    the (first line, place) of each."""
    lines, starts = [], []
    for place, code in blocks:
        lines.append(f"# {place}")
        starts.append((len(lines) + 1, place))
        lines.extend(code.rstrip("\n").split("\n"))
    return "\n".join(lines) + "\n", starts


def failed_place(stderr, starts):
    """The place of the block of the last line of example.py a traceback
    names, or None."""
    lines = [int(n) for n in re.findall(r'example\.py", line (\d+)', stderr)]
    if not lines:
        return None
    return [place for first, place in starts if first <= lines[-1]][-1]


def boxes_gdf(rng, n, x0, y0, span, size, crs):
    """``n`` random rectangles in ``[x0, x0 + span]`` × ``[y0, y0 + span]``."""
    import geopandas
    import shapely

    xy = rng.uniform(0, span, (n, 2))
    return geopandas.GeoDataFrame(
        {"name": [f"b{i}" for i in range(n)]},
        geometry=shapely.box(x0 + xy[:, 0], y0 + xy[:, 1], x0 + xy[:, 0] + size, y0 + xy[:, 1] + size),
        crs=crs,
    )


def buildings_and_roads_in_metres(directory):
    """``buildings.gpkg`` (3,000 boxes of 5 m in a 1,000 m square, a
    projected CRS) and ``roads.gpkg`` (200 straight lines), for
    docs/scaleout.md."""
    import geopandas
    import numpy as np
    import shapely

    rng = np.random.default_rng(4)
    boxes_gdf(rng, 3_000, 0.0, 0.0, 1_000.0, 5.0, "EPSG:3857").to_file(directory / "buildings.gpkg")
    ends = rng.uniform(0, 1_000, (200, 4))
    roads = geopandas.GeoDataFrame(
        {"road": list(range(200))},
        geometry=[shapely.LineString([(a, b), (c, d)]) for a, b, c, d in ends],
        crs="EPSG:3857",
    )
    roads.to_file(directory / "roads.gpkg")


def results_store(directory):
    """``results.sqlite``: the smoke workload's configurations on simulated
    flash, run by the workbench."""
    import geoflash.bench

    geoflash.bench.run(
        str(ROOT / "workloads" / "smoke.toml"),
        str(directory / "results.sqlite"),
        scale="smoke",
        only=["*[device=flashsim:preset=seed-tc58]"],
    )


# The files each document's examples read, by document.
FILES = {
    "docs/scaleout.md": [buildings_and_roads_in_metres],
    "docs/results-schema.md": [results_store],
    "docs/workbench.md": [results_store],
}


def test_the_documents_have_python_examples():
    assert "README.md" in EXAMPLES and "docs/python.md" in EXAMPLES, sorted(EXAMPLES)
    assert sum(len(b) for b in EXAMPLES.values()) >= 8


@pytest.mark.parametrize("document", sorted(EXAMPLES))
def test_the_python_examples_of_a_document_run(tmp_path, document):
    (tmp_path / "workloads").symlink_to(ROOT / "workloads")
    for make in FILES.get(document, []):
        make(tmp_path)
    code, starts = script(EXAMPLES[document])
    (tmp_path / "example.py").write_text(code)
    run = subprocess.run(
        [sys.executable, "example.py"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=600,
    )
    place = failed_place(run.stderr, starts)
    assert run.returncode == 0, f"the example at {place} failed:\n" + run.stdout + run.stderr


def test_the_docstring_examples_of_the_package_run():
    """The ``>>>`` examples in the docstrings of the installed package (its
    ``__init__``'s tour, any other module's) run and print what they say."""
    import doctest
    import importlib
    import pkgutil

    import geoflash

    names = ["geoflash"] + [m.name for m in pkgutil.walk_packages(geoflash.__path__, "geoflash.")]
    attempted = 0
    for name in names:
        result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
        assert result.failed == 0, f"{name}: {result.failed} of its docstring examples failed"
        attempted += result.attempted
    assert attempted >= 6  # the tour in geoflash/__init__.py
