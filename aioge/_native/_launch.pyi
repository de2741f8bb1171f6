# The CPython extension aioge/_native/_launch.c: the prepared launch of aioge.op in one C call.
from collections.abc import Callable, Sequence
from typing import Any

def init(execute_address: int, cdata_type: type, raise_for: Callable[[int, str], None], tensor: type,
         memory: type, completion: type, poll_every: int, trace: Any, enqueue: type,
         progress_address: int, lane: type) -> None: ...  # fmt: skip
def launch(enq: Any, op_type: str, inputs: Sequence[Any], outputs: Sequence[Any], attrs: Any,
           name: str | None) -> Any: ...  # fmt: skip
def note(comp: Any, reads: Sequence[Any], writes: Sequence[Any], stream: Any) -> None: ...
def address(cdata: Any) -> int: ...
def submit_seq(lane: Any, keep: Any, what: str, name: str | None, tseq: int) -> Any: ...
def op(op_type: str, inputs: Sequence[Any], outputs: Sequence[Any], attrs: Any, stream: Any) -> list[Any] | None: ...
def ring(fd: int) -> None: ...
def node_table(ops: Sequence[Any], nchw_ops: Any, codes: Any, normalize: Callable[[Any], Any],
               formats: tuple[int, int, int, int], node_batch: int,
               const_batch_bytes: int) -> list[Any]: ...  # fmt: skip
def add_table(graph: int, function: int, segments: Any, op_types: Sequence[str], names: Sequence[str],
              n_in: Any, n_out: Any, index: Any, locs: Any, ats: Any, dtypes: Any, formats: Any, ndims: Any,
              dims: Any, consts: Sequence[Any], attrs: Sequence[Any],
              address: Callable[[Any], int]) -> tuple[int, int] | None: ...  # fmt: skip
def attr_key(attrs: dict[str, Any], kind_of: Callable[[Any], tuple[str, Any]]) -> tuple[tuple[Any, ...], ...]: ...
