"""SBX_URL and SBX_API_KEY (an admin key) come from the suite that started sbxd
(tests/e2e/test_sdk.py); the transport tests need neither. The `client` fixture checks every
answer against docs/openapi.yaml (openapi_check.py)."""

import os

import httpx
import pytest

from openapi_check import OpenApiChecker
from sbx import Sbx

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "..", "docs", "openapi.yaml")


@pytest.fixture(scope="session")
def checker():
    return OpenApiChecker(DOC)


@pytest.fixture(scope="session")
def client(checker):
    if not os.environ.get("SBX_URL"):
        pytest.skip("no SBX_URL: run through tests/run.py -k suite_python")
    with Sbx(http_client=httpx.Client(timeout=None,
                                      event_hooks={"response": [checker]})) as c:
        yield c


@pytest.fixture(scope="module")
def sb(client):
    with client.sandbox(ttl_seconds=900) as s:
        yield s
