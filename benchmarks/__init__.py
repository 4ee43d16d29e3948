"""Speed benchmarks: ratios of the library's fast paths against their references (run: python -m benchmarks.run)."""
