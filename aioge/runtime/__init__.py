"""The runtime layer: devices, streams, tensors, launches and compiled-graph executors.

Bottom up: ``_resources`` (the lifecycle contract), ``memory`` (block and
pinned pools), ``_trace`` (the observation hub), ``scheduler`` (completion
lanes), ``tensor`` (Tensor, DeviceMemory and its reader/writer notes),
``event``, ``stream`` (Stream and THE enqueue transaction), ``launch``
(``aioge.op``), ``executable`` (CompiledGraph: load + execute), ``compile``
(the compile driver), ``dynamic`` (a compile per shape), ``device``.
Public names are re-exported by :mod:`aioge`; C is reached only through
:mod:`aioge._native.acl`.
"""
