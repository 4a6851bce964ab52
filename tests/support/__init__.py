"""What the tests share besides fixtures (those are in the conftest.py files): the CLI runner, the
repository's fixture folders and the helpers that build data, each imported as `from support.X import Y`."""
