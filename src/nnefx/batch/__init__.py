"""Batch inference over data sets: ``nnefx batch`` and :func:`run`.

A job runs one model over every row of a source (``.npy``/``.npz`` files, Parquet, images),
writes the outputs as shards that are each complete or absent, and can be rerun to finish
what an interrupted run left.  In this process by default; on a Ray cluster (Ray Data actor
pools, ``pip install 'nnefx[ray]'``) with ``ray=``.  See :mod:`.job` for the design.
"""

from .job import Summary, run
from .shards import read_shard

__all__ = ["Summary", "read_shard", "run"]
