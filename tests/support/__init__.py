"""Helpers shared by more than one test directory, imported as ``tests.support.<module>``
(never as a bare ``conftest``: two directories' conftests would shadow each other)."""
