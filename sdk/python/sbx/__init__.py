"""sbx: Python clients for the sbx sandbox service.

    from sbx import Sbx            # or AsyncSbx
    client = Sbx()                 # SBX_URL, SBX_API_KEY
    with client.sandbox(ttl_seconds=600) as sb:
        for ev in client.sandboxes.exec_stream(sb["id"], shell="echo hi"):
            ...
"""

from ._async_client import AsyncSbx, AsyncTerminal
from ._errors import (AuthenticationError, BadRequestError, ConflictError, NotFoundError,
                      PermissionDeniedError, RateLimitError, SbxError, SbxStreamError,
                      SbxTimeoutError, ServerError)
from ._sync_client import Sbx, Terminal

__all__ = [
    "Sbx", "AsyncSbx", "Terminal", "AsyncTerminal", "SbxError", "SbxStreamError", "SbxTimeoutError", "BadRequestError",
    "AuthenticationError", "PermissionDeniedError", "NotFoundError", "ConflictError",
    "RateLimitError", "ServerError",
]
