// Which release is installed in a schema, read from the database alone, and the one gate every command
// passes before it reads or writes an installation of another release: operators install a new package
// first and run `up` later, while cron checks and dashboards keep calling (docs/upgrade.md#the-upgrade-window).
import type pg from 'pg';
import { installedCode, PACKAGE_VERSION, type InstalledCode } from '#sql';
import { UserError } from './errors.js';

export type { InstalledCode };

/**
 * The installed release (subagent_context_installation(); 0.1.0, which recorded nothing, by its health
 * function), or null when nothing is installed in `schema`. The same reader the migrations use.
 */
export function readInstalled(client: pg.ClientBase, schema: string): Promise<InstalledCode | null> {
  return installedCode(async (text, values) => (await client.query(text, values as unknown[])).rows, schema);
}

/** -1, 0 or 1 as release `a` is older than, the same as, or newer than `b` (x.y.z, numerically). */
export function compareReleases(a: string, b: string): number {
  const parts = (v: string) => (/^(\d+)\.(\d+)\.(\d+)/.exec(v) ?? []).slice(1).map(Number);
  const [x, y] = [parts(a), parts(b)];
  for (let i = 0; i < 3; i++) if ((x[i] ?? 0) !== (y[i] ?? 0)) return (x[i] ?? 0) < (y[i] ?? 0) ? -1 : 1;
  return a === b ? 0 : a < b ? -1 : 1;
}

/** An installation of another release than this package's: the one sentence every gated command answers with. */
export class OtherRelease extends UserError {
  /** The installation is the older one, so `up` is the answer (else this package is the older one). */
  readonly older: boolean;

  constructor(readonly installed: string, schema: string) {
    const older = compareReleases(installed, PACKAGE_VERSION) < 0;
    super(older
      ? `subagent-context ${installed} is installed in schema "${schema}" and this is ${PACKAGE_VERSION}: ` +
        'run `subagent-context up` to upgrade it in place (docs/upgrade.md).'
      : `subagent-context ${installed} is installed in schema "${schema}", newer than this ${PACKAGE_VERSION}: ` +
        `run subagent-context ${installed} or later, or go back as docs/upgrade.md#rolling-back says.`);
    this.older = older;
  }
}

/**
 * The gate: refuses, before anything is read or written, an installation of another release than this
 * package's (`allow: 'older'`: `up` and `uninstall`, which work on any earlier one, refuse only a newer).
 * Returns what is installed (null: nothing), for the command to go on with.
 */
export async function sameRelease(client: pg.ClientBase, schema: string, allow?: 'older'): Promise<InstalledCode | null> {
  const code = await readInstalled(client, schema);
  if (code && code.version !== PACKAGE_VERSION) {
    const refused = new OtherRelease(code.version, schema);
    if (!(allow === 'older' && refused.older)) throw refused;
  }
  return code;
}
