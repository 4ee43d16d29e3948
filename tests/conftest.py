"""Test ordering: the slow end-to-end book tests (marker ``book``) run after everything else,
so a library failure is reported within seconds."""


def pytest_collection_modifyitems(config, items):
    items.sort(key=lambda item: item.get_closest_marker("book") is not None)
