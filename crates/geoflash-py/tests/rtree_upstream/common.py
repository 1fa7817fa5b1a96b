"""What rtree's ``tests/common.py`` gives ``test_index.py``, for geoflash.

rtree's version reads libspatialindex's version through ``rtree.core.rt``
(its ctypes handle on the C library) to skip tests the library cannot run.
geoflash has no C library behind its ``rtree`` API; these are the answers
for geoflash itself:

- ``core.rt`` has the two C functions ``test_index.py`` looks for with
  ``hasattr`` (the result-set offset and limit), because ``geoflash.Index``
  implements ``set_result_offset`` / ``set_result_limit``;
- ``skip_sidx_lt_210`` skips nothing: ``intersection_v`` and ``nearest_v``
  (libspatialindex >= 2.1.0 in rtree) are implemented.
"""

from __future__ import annotations

import types

import pytest

from geoflash import index


class _CApi:
    """Stands for rtree's ``core.rt`` in ``test_index.py``'s ``hasattr``
    checks: the functions geoflash's Index implements."""

    Index_GetResultSetOffset = index.Index.get_result_offset
    Index_GetResultSetLimit = index.Index.get_result_limit


#: rtree's ``rtree.core`` as far as ``test_index.py`` uses it.
core = types.SimpleNamespace(rt=_CApi)

#: rtree's mark for libspatialindex < 2.1.0; geoflash has the vectorised queries.
skip_sidx_lt_210 = pytest.mark.skipif(False, reason="geoflash implements intersection_v and nearest_v")
