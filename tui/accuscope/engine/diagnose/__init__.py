"""Reading a result: the advisor, framework re-runs, preprocessing diagnosis, single-op detail, what the conversion changed in a model."""
