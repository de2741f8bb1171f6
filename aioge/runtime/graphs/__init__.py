"""Compiled-graph executors: ``dynamic`` (a compile per shape) over ``compile`` (graph + target ->
a loaded CompiledGraph) over ``executable`` (CompiledGraph: load + execute, sunk or per op)."""
