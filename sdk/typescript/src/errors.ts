/** Every failed call throws an SbxError: the API's error code and message, the HTTP status
 * and the x-request-id of the answer (quote it when reporting a problem). */
export class SbxError extends Error {
  readonly status: number;
  readonly code: string;
  readonly requestId: string | null;

  constructor(status: number, code: string, message: string, requestId: string | null) {
    super(message);
    this.name = 'SbxError';
    this.status = status;
    this.code = code;
    this.requestId = requestId;
  }
}

/** A stream (exec, run, run_code, process logs) that ended before its last event: the
 * connection dropped or the server went away. The command may still be running or have
 * finished: read its record with `client.sandboxes.execs.get(sandboxId, execId)`. */
export class SbxStreamError extends SbxError {
  readonly execId: string | null;
  readonly sandboxId: string | null;

  constructor(message: string, execId: string | null, sandboxId: string | null,
              requestId: string | null, cause?: unknown) {
    super(0, 'stream_dropped', message, requestId);
    this.name = 'SbxStreamError';
    this.execId = execId;
    this.sandboxId = sandboxId;
    if (cause !== undefined) (this as { cause?: unknown }).cause = cause;
  }
}
