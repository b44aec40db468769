"""A local stand-in for the judge: load the built file by path, check it on every shape, time it on the H200."""
