"""rtree's own test-suite (tests/test_index.py of Toblerity/rtree, MIT
licence) run against geoflash's rtree-compatible API; see conftest.py."""
