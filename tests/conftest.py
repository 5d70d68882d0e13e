"""One SparkSession for the whole test run (kit.spark() reuses it)."""

import pytest

import kit
from kit import jvm
from kit.spark import log_file


@pytest.fixture(scope="session")
def spark():
    session = kit.spark()
    if not jvm.available(session, "Chain"):   # every Java fast path off: the tests would pass on the twins, slowly
        pytest.exit(f"the session lacks the kit's Java helpers (did kit/jvm/*.java not compile?): {log_file()} "
                    "says why", returncode=1)
    return session
