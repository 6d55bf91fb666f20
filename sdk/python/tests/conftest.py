"""SBX_URL and SBX_API_KEY (an admin key) come from the suite that started sbxd
(tests/e2e/test_sdk.py); the transport tests need neither."""

import os

import pytest

from sbx import Sbx


@pytest.fixture(scope="session")
def client():
    if not os.environ.get("SBX_URL"):
        pytest.skip("no SBX_URL: run through tests/run.py -k suite_python")
    with Sbx() as c:
        yield c


@pytest.fixture(scope="module")
def sb(client):
    with client.sandbox(ttl_seconds=900) as s:
        yield s
