"""The services' protos and what is generated from them: the descriptor set, the Go code and the
filter's operation map (opmap.py)."""
