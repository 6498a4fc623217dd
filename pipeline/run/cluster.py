"""A dask cluster for a profiles run: a client of an existing scheduler, or a loopback LocalCluster this process
starts, owned together by one :class:`Cluster` so that closing it closes both."""

from __future__ import annotations

from pipeline import optional_imports
from pipeline.run.options import ClusterError, UsageError


class Cluster:
    """A dask ``client`` and, when this process started one for it, the LocalCluster it talks to. Close it with
    :meth:`close`, or use it as a context manager. Make one with :func:`open_cluster`."""

    def __init__(self, client, local=None):
        self.client = client
        self.local = local  # the LocalCluster this process started, or None (an existing scheduler's client)

    def close(self) -> None:
        self.client.close()
        if self.local is not None:
            self.local.close()

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_cluster(workers: int | None = None, scheduler: str | None = None, processes: bool = True,
                 timeout: str = "20s") -> Cluster:
    """A client of the dask scheduler at ``scheduler``, or of a new loopback LocalCluster of ``workers`` processes
    (one thread each; threads of this process with ``processes=False``)."""
    distributed = optional_imports.distributed()
    if scheduler:
        try:
            return Cluster(distributed.Client(scheduler, timeout=timeout))
        except (OSError, TimeoutError, ValueError) as exc:
            raise ClusterError(f"cannot reach the dask scheduler at {scheduler!r} ({exc}). Start it with "
                               "`dask scheduler` (and workers with `dask worker ADDRESS`), or use --workers N "
                               "for local worker processes.") from None
    if not workers or workers < 1:
        raise UsageError(f"--workers must be at least 1 (worker processes); got {workers!r}")
    where = {"host": "127.0.0.1"} if processes else {}
    local = distributed.LocalCluster(n_workers=int(workers), threads_per_worker=1, processes=processes,
                                     dashboard_address=None, **where)
    try:
        return Cluster(distributed.Client(local), local)
    except BaseException:
        local.close()
        raise
