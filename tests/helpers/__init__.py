"""Helpers shared by the test modules (oracles, reference data, small builders)."""
