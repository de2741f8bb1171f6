"""The runtime layer: devices, streams, tensors, launches and compiled-graph executors.

Bottom up: ``_resources`` (the lifecycle contract), ``memory`` (block and
pinned pools), ``_trace`` (the observation hub, importing nothing it
observes), ``scheduler`` (completion lanes), ``descs``, ``context`` (a
device's state), ``capture``, ``stream`` (Stream and THE enqueue transaction,
Tensor and DeviceMemory with its reader/writer notes, Event), ``aliasing``,
``launch`` (``aioge.op``), ``graphs`` (``executable``: CompiledGraph, load +
execute; ``compile``: the compile driver; ``dynamic``: a compile per shape),
``device``.
Public names are re-exported by :mod:`aioge`; C is reached only through
:mod:`aioge._native.acl`.
"""
