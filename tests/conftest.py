"""One SparkSession for the whole test run (kit.spark() reuses it)."""

import pytest

import kit


@pytest.fixture(scope="session")
def spark():
    return kit.spark()
