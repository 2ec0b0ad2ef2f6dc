#!/usr/bin/env python
"""Runs the benchmark suite: the same code as `python -m aclnn_cpu bench` (see README.md here)."""
import sys

from aclnn_cpu import bench

if __name__ == "__main__":
    sys.exit(bench.main(sys.argv[1:]))
