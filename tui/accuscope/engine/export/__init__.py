"""Submodel export of a region between two ops, with its data, and its re-test."""
