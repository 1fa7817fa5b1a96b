"""Finding the Dask client to run on, and checking its workers can run geoflash.

``client`` arguments across ``geoflash.dask`` accept a
``distributed.Client``, a scheduler address (``"tcp://host:8786"``,
connected with ``timeout``), or None: the current client if there is one,
else an embedded ``LocalCluster`` started once per process (closed at exit),
announced on standard error with its dashboard's link (its plots need
``bokeh``).
"""

from __future__ import annotations

import atexit
import importlib.util
import sys
from typing import Any, Dict, List, Optional

from ..exceptions import GeoflashError

_EMBEDDED: Dict[str, Any] = {}
_CHECKED: set = set()

# Evaluated on every worker by ``client.run(eval, ...)``: a builtin, so the
# probe reaches a worker that cannot import geoflash and reports why.
_PROBE = "__import__('geoflash._geoflash', fromlist=['_geoflash']).__version__"


class WorkerSetupError(GeoflashError, RuntimeError):
    """A worker of the cluster cannot import geoflash, or runs another version."""


def describe(client: Any) -> str:
    """One line on the cluster of ``client``: its workers and threads and
    its dashboard's link (or how to get a dashboard)."""
    workers = client.sync(client.scheduler.identity, n_workers=-1).get("workers", {})
    threads = sum(int(w.get("nthreads", 0)) for w in workers.values())
    services = client.scheduler_info().get("services", {})
    board = f"dashboard: {client.dashboard_link}" if "dashboard" in services else "no dashboard"
    if importlib.util.find_spec("bokeh") is None:
        board += " (its plots need bokeh>=3.1: pip install bokeh)"
    return f"{len(workers)} workers, {threads} threads; {board}"


def _embedded_client() -> Any:
    from distributed import Client, LocalCluster

    if "client" not in _EMBEDDED:
        # the dashboard on a free port (8787 may be taken by another cluster)
        cluster = LocalCluster(processes=True, dashboard_address=":0")
        _EMBEDDED["cluster"] = cluster
        _EMBEDDED["client"] = Client(cluster)
        print(f"geoflash.dask: started a LocalCluster: {describe(_EMBEDDED['client'])}", file=sys.stderr, flush=True)

        def close() -> None:
            _EMBEDDED["client"].close()
            _EMBEDDED["cluster"].close()

        atexit.register(close)
    return _EMBEDDED["client"]


def get_client(client: Any = None, timeout: float = 10.0) -> Any:
    """The ``distributed.Client`` to run on (see the module docs). An
    unreachable scheduler raises ``ConnectionError`` after ``timeout``
    seconds; a worker without geoflash (or with another version than this
    process) raises ``WorkerSetupError``."""
    from distributed import Client

    if isinstance(client, Client):
        found = client
    elif isinstance(client, str):
        try:
            found = Client(client, timeout=timeout)
        except (OSError, TimeoutError) as e:
            raise ConnectionError(
                f"cannot reach the Dask scheduler at {client} within {timeout} s: {e}"
            ) from None
    elif client is None:
        try:
            from distributed import get_client as current

            found = current()
        except ValueError:
            found = _embedded_client()
    else:
        raise ValueError(
            f"client must be a distributed.Client, a scheduler address or None, not {type(client).__name__}"
        )
    check_workers(found)
    return found


def worker_addresses(client: Any) -> List[str]:
    """The addresses of the cluster's workers, sorted, asked of the
    scheduler. Not ``client.scheduler_info()``: it returns the client's
    cached identity, which the client's periodic refresh (fetching no
    worker details) can overwrite between the fetch and the return, so
    that it lists no workers at all."""
    info = client.sync(client.scheduler.identity, n_workers=-1)
    return sorted(info.get("workers", {}))


def check_workers(client: Any, force: bool = False) -> None:
    """Raises ``WorkerSetupError`` unless every worker imports this
    version of geoflash (checked once per client and set of workers)."""
    from .. import __version__

    workers = tuple(worker_addresses(client))
    key = (id(client), workers)
    if key in _CHECKED and not force:
        return
    found = client.run(eval, _PROBE, on_error="return")
    bad = []
    for worker, version in sorted(found.items()):
        if isinstance(version, BaseException):
            bad.append(f"{worker} cannot import geoflash ({type(version).__name__}: {version})")
        elif version != __version__:
            bad.append(f"{worker} has geoflash {version}, this process {__version__}")
    if bad:
        raise WorkerSetupError(
            "the Dask workers must have the same geoflash installed as the client: " + "; ".join(bad)
        )
    _CHECKED.add(key)


def worker_host(address: str) -> str:
    """The host part of a worker address (``tcp://10.0.0.5:40123`` → ``10.0.0.5``)."""
    rest = address.split("://", 1)[-1]
    return rest.rsplit(":", 1)[0].strip("[]")
