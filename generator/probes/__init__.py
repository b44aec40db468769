"""Probes: small CUDA kernels that isolate one hardware limit the engines' design depends on, each with its
harness and a `python -m generator probe-*` command. They are not part of the submission."""
