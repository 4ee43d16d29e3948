"""Test ordering: the slow end-to-end book tests (marker ``book``) run after everything else,
so a library failure is reported within seconds.  Shared data: ``tiny_xy``.

The suite's default dtype is float64, set once here, before any test module is imported: each
test file then runs alone as it runs in the whole suite (a default set in some modules only
would hold for every module collected after them, and for none when a file runs by itself)."""
import pytest
import torch

torch.set_default_dtype(torch.float64)


def pytest_collection_modifyitems(config, items):
    items.sort(key=lambda item: item.get_closest_marker("book") is not None)


@pytest.fixture
def tiny_xy() -> tuple[torch.Tensor, torch.Tensor]:
    """A tiny float64 regression set for the training loops and their closed forms:
    x (7, 6, 2), y (7, 6, 1), both N(0, 1) from seed 0."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(7, 6, 2, generator=g, dtype=torch.float64)
    y = torch.randn(7, 6, 1, generator=g, dtype=torch.float64)
    return x, y
