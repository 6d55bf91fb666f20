// Compiled (never run) by the suite with `tsc -p tsconfig.test.json`: the spec 000 example
// and the call options type-check against the published declarations.
import { Sbx, SbxError, SbxStreamError, type ExecEvent } from '../dist/index.js';

export async function specExample(): Promise<void> {
  const client = new Sbx({ apiKey: process.env.SBX_API_KEY! });
  const sb = await client.sandboxes.create({ ttl_seconds: 1800 });
  await client.sandboxes.files.put(sb.id, 'in/date.csv', 'client,suma\nSC Exemplu SRL,1200\n');
  for await (const ev of client.sandboxes.execStream(sb.id, {
    shell: 'python3 -c "import pandas as pd; print(pd.read_csv(\'in/date.csv\'))"',
  })) {
    if (ev.type === 'stdout') process.stdout.write(ev.data);
    if (ev.type === 'exit') console.log('exit', ev.exit_code, ev.receipt.command_sha256);
  }
  const { data } = await client.sandboxes.artifacts(sb.id);
  console.log(data.map((a) => a.sha256));
  await client.sandboxes.delete(sb.id, { timeoutMs: 5000, signal: AbortSignal.timeout(9000) });
}

export async function errors(client: Sbx, ev: ExecEvent): Promise<string> {
  try {
    await client.sandboxes.exec('sb_x', { shell: 'true' }, { idempotencyKey: 'k' });
  } catch (e) {
    if (e instanceof SbxStreamError) return e.execId ?? '';
    if (e instanceof SbxError) return `${e.status} ${e.code} ${e.message} ${e.requestId}`;
  }
  return ev.type;
}
