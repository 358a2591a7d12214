"""Tests of the knowdp Python package (run: python3 -m unittest discover -s tests -t .)."""
