"""The protos' operation map for the filter (opmap.py) and its tests."""
