"""Exceptions: every failed call raises an SbxError with the API's code and message, the
HTTP status and the request id of the answer."""

from typing import Dict, Optional, Type


class SbxError(Exception):
    """An error answer of the API (`{"error": {"code", "message"}}`), or a client-side
    failure (status 0: timeout, dropped stream, refused path)."""

    def __init__(self, status: int, code: str, message: str, request_id: Optional[str]):
        super().__init__("%s (%s, status %d, request %s)" % (message, code, status, request_id))
        self.status = status
        self.code = code
        self.message = message
        self.request_id = request_id


class BadRequestError(SbxError):
    """400: the request is wrong; do not retry it unchanged."""


class AuthenticationError(SbxError):
    """401: missing, wrong or deleted API key."""


class PermissionDeniedError(SbxError):
    """403: the key may not do this."""


class NotFoundError(SbxError):
    """404: no such object (or another user's)."""


class ConflictError(SbxError):
    """409: the object's state does not allow it now (busy, paused, …)."""


class RateLimitError(SbxError):
    """429: a limit was reached."""


class ServerError(SbxError):
    """5xx."""


class SbxTimeoutError(SbxError):
    """No answer within the call's timeout."""

    def __init__(self, message: str, request_id: Optional[str] = None):
        super().__init__(0, "timeout", message, request_id)


class SbxStreamError(SbxError):
    """A stream ended before its last event (the connection dropped). The command may still
    be running or have finished: read its record with sandboxes.execs.get(sandbox_id, exec_id)."""

    def __init__(self, message: str, exec_id: Optional[str], sandbox_id: Optional[str],
                 request_id: Optional[str]):
        super().__init__(0, "stream_dropped", message, request_id)
        self.exec_id = exec_id
        self.sandbox_id = sandbox_id


_BY_STATUS: Dict[int, Type[SbxError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    429: RateLimitError,
}


def error_for(status: int, code: str, message: str, request_id: Optional[str]) -> SbxError:
    cls = _BY_STATUS.get(status) or (ServerError if status >= 500 else SbxError)
    return cls(status, code, message, request_id)
