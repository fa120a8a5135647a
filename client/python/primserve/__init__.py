"""Python client for primserve: GPU scan, reduce and stream compaction over gRPC.

numpy arrays in and out (int32, int64, uint32, uint64, float32, float64; 1-D
and contiguous). ``primserve.Client`` blocks; ``primserve.aio.Client`` is the
same API on asyncio; ``client.multiplex()`` sends many calls on one stream.

>>> import numpy as np, primserve
>>> client = primserve.Client("localhost:50051")
>>> client.scan(np.array([3, 1, 4, 1, 5], dtype=np.int32))
array([ 3,  4,  8,  9, 14], dtype=int32)
>>> client.select(np.array([0.1, 0.7, 0.9]), ("gt", 0.5), output="indices")
array([1, 2])
"""

from primserve._buffers import Buffer
from primserve._pipeline import Pipeline
from primserve._steps import StepOutput
from primserve.client import Client
from primserve.errors import ServerError
from primserve.results import ArgExtreme, KeyedReduction, Partition, Runs, Selection, Sorted

__version__ = "0.1.0"

__all__ = ["Buffer", "Client", "Pipeline", "StepOutput", "ServerError", "ArgExtreme", "KeyedReduction", "Partition", "Runs", "Selection",
           "Sorted"]
