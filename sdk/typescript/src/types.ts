/* The API's objects (docs/openapi.yaml has them all, with every field). Objects keep an
 * index signature: the server may add fields, and old clients must not break on them. */

export type Env = Record<string, string>;

export interface EgressPolicy {
  mode: 'none' | 'allowlist' | 'preset';
  domains?: string[];
  preset?: 'pypi' | 'npm';
}

export interface SandboxCreate {
  template?: string;
  ttl_seconds?: number;
  env?: Env;
  backend?: 'v1' | 'v2';
  snapshot_id?: string;
  egress?: EgressPolicy;
  enable_default_session?: boolean;
  /** Volumes to mount (docs/volumes.md): a volume's id or name, an absolute path. */
  volumes?: VolumeMount[];
}

export interface VolumeMount {
  volume: string;
  path: string;
  read_only?: boolean;
}

export interface Volume {
  id: string;
  object: 'volume';
  name: string;
  size_mb: number;
  size_bytes: number;
  used_bytes: number | null;
  created_at: number;
  node: string;
  mounted_in: { sandbox_id: string; path: string; read_only: boolean }[];
  [k: string]: unknown;
}

export interface VolumeEntry extends FileEntry {
  object: 'file';
  target?: string;
}

export interface Sandbox {
  id: string;
  object: 'sandbox';
  status: string;
  backend: 'v1' | 'v2';
  runtime: string;
  template: string;
  template_digest?: string;
  created_at: number;
  expires_at: number;
  ttl_seconds: number;
  env?: Env;
  limits?: { memory_mb: number; pids: number; cpu_millicores: number };
  egress?: EgressPolicy;
  restored?: boolean;
  ready_ms?: number;
  /** With status `failed`: why its machine stopped (its files are kept; restart() or the next exec starts it). */
  state_reason?: string;
  [k: string]: unknown;
}

export interface List<T> {
  object: 'list';
  data: T[];
  [k: string]: unknown;
}

export interface Deleted {
  id: string;
  object: string;
  deleted: true;
}

export interface Input {
  path: string;
  content?: string;
  content_base64?: string;
  url?: string;
}

export interface ExecRequest {
  shell?: string;
  language?: 'python' | 'bash' | 'node';
  code?: string;
  timeout_seconds?: number;
  cwd?: string;
  env?: Env;
  session_id?: string;
  inputs?: Input[];
}

export interface Receipt {
  exec_id: string;
  sandbox_id: string;
  template: string;
  image_digest: string;
  language: string;
  command_sha256: string;
  inputs: unknown[];
  outputs: { path: string; sha256: string; size: number }[];
  workspace_generation_before: number;
  workspace_generation_after: number;
  [k: string]: unknown;
}

export interface ApiErrorBody {
  code: string;
  message: string;
}

export interface ExecResult {
  object: 'exec';
  id: string;
  sandbox_id: string;
  status?: 'running' | 'exited' | 'timed_out' | 'interrupted' | 'failed';
  exit_code: number | null;
  duration_ms: number;
  timed_out: boolean;
  /** The sandbox's memory watcher killed a process of the command (error.code `out_of_memory`). */
  oom_killed?: boolean;
  /** The sandbox's process guard killed the command's session at the process limit (error.code `process_limit`). */
  process_limit_killed?: boolean;
  stdout: string;
  stderr: string;
  stdout_encoding?: 'base64';
  stderr_encoding?: 'base64';
  stdout_truncated?: boolean;
  stderr_truncated?: boolean;
  receipt?: Receipt;
  artifacts?: Artifact[];
  error?: ApiErrorBody;
  [k: string]: unknown;
}

export type ExecEvent =
  | { type: 'start'; exec_id: string; sandbox_id: string }
  | { type: 'stdout' | 'stderr'; data: string; encoding?: 'base64' }
  | { type: 'truncated'; stream: 'stdout' | 'stderr'; limit_bytes: number }
  | ({ type: 'exit'; exit_code: number | null; timed_out: boolean; duration_ms: number;
       receipt: Receipt } & Record<string, unknown>)
  | ({ type: 'error'; code: string; message: string } & Record<string, unknown>);

export interface RunRequest extends SandboxCreate, ExecRequest {}

export interface FileEntry {
  path: string;
  type: 'file' | 'directory' | 'symlink' | 'other';
  size: number;
  mode: string;
  mtime: number;
}

export interface FileList extends List<FileEntry> {
  path: string;
  recursive: boolean;
  truncated: boolean;
}

export interface FileWritten {
  object: 'file';
  path: string;
  size: number;
}

export interface Artifact {
  path: string;
  size: number;
  mime: string;
  sha256: string;
  scan: 'clean' | 'infected' | 'error';
  url?: string;
  expires_at?: number;
  [k: string]: unknown;
}

export interface SessionCreate {
  id?: string;
  env?: Env;
  cwd?: string;
  command_timeout_ms?: number;
}

export interface Session {
  id: string;
  object: 'session';
  cwd: string;
  env?: Env;
  command_timeout_ms: number | null;
  created_at: number;
  default: boolean;
  [k: string]: unknown;
}

export interface ProcessStart {
  command: string;
  session_id?: string;
  env?: Env;
  cwd?: string;
}

export interface Process {
  id: string;
  object: 'process';
  pid: number;
  command: string;
  cwd: string;
  session_id: string | null;
  status: 'running' | 'completed' | 'failed' | 'killed';
  exit_code: number | null;
  signal: number | null;
  started_at: number;
  ended_at: number | null;
  [k: string]: unknown;
}

export interface ProcessLogs {
  object: 'process_logs';
  id: string;
  status: string;
  exit_code: number | null;
  stdout: string;
  stderr: string;
  stdout_truncated: boolean;
  stderr_truncated: boolean;
  [k: string]: unknown;
}

export type ProcessLogEvent =
  | ({ type: 'start' } & Process)
  | { type: 'stdout' | 'stderr'; data: string; encoding?: 'base64' }
  | ({ type: 'exit' } & Process);

export interface RunCodeRequest {
  code: string;
  timeout_seconds?: number;
}

export interface RunCodeResult {
  object: 'run_code';
  stdout: string;
  stderr: string;
  result: string | null;
  error: { name: string; value: string; traceback: unknown } | null;
  duration_ms: number;
  execution_count: number;
  kernel_restarted: boolean;
  timed_out: boolean;
  oom_killed?: boolean;
  restart_reason?: 'timed_out' | 'out_of_memory' | 'process_limit' | 'reset' | 'kernel_died';
  outputs?: { mime: string; data: string }[];
  [k: string]: unknown;
}

export type RunCodeEvent =
  | { type: 'start'; [k: string]: unknown }
  | { type: 'stdout' | 'stderr'; data: string }
  | { type: 'output'; mime: string; data: string }
  | ({ type: 'result' } & Partial<RunCodeResult>)
  | ({ type: 'error' } & Record<string, unknown>);

export interface KernelState {
  object: 'kernel';
  status?: 'ready';
  restarted?: boolean;
  start_ms?: number;
  interrupted?: boolean;
}

export interface PtyCreate {
  command: string;
  rows?: number;
  cols?: number;
  grace_seconds?: number;
}

export interface PtyOutput {
  object: 'pty';
  session_id?: string;
  pid: number;
  stdout: string;
  stdout_encoding?: 'base64';
  cursor: number;
  status: 'running' | 'exited';
  alive: boolean;
  exit_code: number | null;
  [k: string]: unknown;
}

export interface ForkResult {
  object: 'list';
  parent_id: string;
  data: { id: string; restored?: boolean; ready_ms?: number; error?: ApiErrorBody }[];
}

export interface Snapshot {
  id: string;
  object: 'snapshot';
  sandbox_id: string;
  size_bytes: number;
  created_at: number;
}

export interface Preview {
  object: 'preview';
  sandbox_id: string;
  port: number;
  url: string;
  expires_at: number;
}

export interface EgressConnection {
  object: 'egress_connection';
  id: string | number;
  method: string;
  host: string;
  address: string;
  port: number;
  verdict: string;
  reason: string | null;
  [k: string]: unknown;
}

export interface EgressLog extends List<EgressConnection> {
  sandbox_id: string;
  policy: EgressPolicy;
  has_more: boolean;
}

export interface AuditEntry {
  seq: number;
  ts_ms: number;
  user: string;
  key_id: string;
  action: string;
  sandbox_id: string | null;
  outcome: string;
  request_id: string | null;
  details: unknown;
}

export interface AuditQuery {
  sandbox_id?: string;
  user?: string;
  action?: string;
  since?: number;
  until?: number;
  limit?: number;
  after?: number;
}

export interface AuditPage extends List<AuditEntry> {
  has_more: boolean;
  next_after?: number;
}

export interface Key {
  id: string;
  object: 'key';
  user: string;
  role: 'admin' | 'member';
  tool_level: 'none' | 'basic' | 'sandbox';
  created_at: number;
}

export interface KeyCreated extends Key {
  key: string;
}
