"""The program: the command line, `doctor`, the server built from its parts, the serving loop, the worker's entry."""
