"""The demo workspace and the Ascend dump simulator it uses."""
