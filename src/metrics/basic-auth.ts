// Basic authentication for the exporter (the basic_auth_users of --web-config-file), built so that failed
// attempts are cheap and never delay an authorized scrape (docs/security.md, "The metrics exporter"):
// - a pair that passed is remembered (by its SHA-256, never in clear) and never checked again, so the
//   scraper that sends it every 15 s pays for one bcrypt check in the exporter's life, before any line;
// - a pair that failed is remembered the same way (the latest REFUSED_REMEMBERED) and refused again unchecked;
// - identical attempts at the same moment share one check;
// - checks run on a thread of their own (bcrypt-thread.ts), at most CHECKS_RUNNING at a time with
//   CHECKS_WAITING more in line; an attempt beyond that is answered `busy` at once, without a check;
// - an unknown user name is checked against a decoy hash of the users' highest cost, so that a wrong name
//   costs what a wrong password costs.
import { createHash } from 'node:crypto';
import { checkOffThread } from './bcrypt-thread.js';

export const CHECKS_RUNNING = 1;
export const CHECKS_WAITING = 4;
export const REFUSED_REMEMBERED = 10_000;

/** `busy`: too many checks at once; this one was not made. */
export type AuthVerdict = 'passed' | 'refused' | 'busy';

/** Whether a password matches a bcrypt hash. */
export type PasswordCheck = (password: string, hash: string) => Promise<boolean>;

export interface AuthLimits { running: number; waiting: number; refusedRemembered: number }

const LIMITS: AuthLimits = { running: CHECKS_RUNNING, waiting: CHECKS_WAITING, refusedRemembered: REFUSED_REMEMBERED };

/** The salt and digest of a bcrypt hash no password is known to match; the cost is put in front. */
const DECOY_TAIL = 'RsIp6PZ8xb5mDEBWwhhnAe6Ge0wWNALad.zPtPq1NUE6/gyWxR39q';

/** Runs at most `running` tasks at once with at most `waiting` more in line; run() returns null when the line is full. */
class CheckLine {
  private active = 0;
  private readonly line: Array<() => void> = [];
  constructor(private readonly running: number, private readonly waiting: number) {}

  run<T>(task: () => Promise<T>): Promise<T> | null {
    if (this.active < this.running) {
      this.active++;
      return this.go(task);
    }
    if (this.line.length >= this.waiting) return null;
    return new Promise<void>((resolve) => this.line.push(resolve)).then(() => this.go(task));
  }

  private async go<T>(task: () => Promise<T>): Promise<T> {
    try {
      return await task();
    } finally {
      const next = this.line.shift();
      if (next) next(); // the place passes to the first in line
      else this.active--;
    }
  }
}

function credentials(header: string | undefined): { name: string; password: string } | null {
  const m = /^Basic ([A-Za-z0-9+/=]+)$/i.exec(header ?? '');
  if (!m) return null;
  const decoded = Buffer.from(m[1], 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon < 0 ? null : { name: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
}

/** Checks an Authorization header against the users (user name → bcrypt hash). */
export function basicAuth(users: Map<string, string>, check: PasswordCheck = checkOffThread, limits: AuthLimits = LIMITS):
  (header: string | undefined) => Promise<AuthVerdict> {
  const cost = Math.max(...[...users.values()].map((hash) => Number(hash.slice(4, 6))));
  const decoy = `$2b$${String(cost).padStart(2, '0')}$${DECOY_TAIL}`;
  const passed = new Set<string>();
  const refused = new Set<string>(); // in the order refused: the oldest is forgotten first
  const checking = new Map<string, Promise<boolean>>();
  const line = new CheckLine(limits.running, limits.waiting);

  return async (header) => {
    const pair = credentials(header);
    if (!pair) return 'refused';
    const hash = users.get(pair.name);
    const key = createHash('sha256').update(`${hash ?? ''}\0${pair.name}\0${pair.password}`).digest('base64');
    if (passed.has(key)) return 'passed';
    if (refused.has(key)) return 'refused';
    let verdict = checking.get(key);
    if (!verdict) {
      const checked = line.run(() => check(pair.password, hash ?? decoy));
      if (!checked) return 'busy';
      verdict = checked.then((ok) => {
        const pass = ok && hash !== undefined;
        if (pass) passed.add(key);
        else {
          refused.add(key);
          if (refused.size > limits.refusedRemembered) refused.delete(refused.values().next().value!);
        }
        return pass;
      }).finally(() => checking.delete(key));
      checking.set(key, verdict);
    }
    return (await verdict) ? 'passed' : 'refused';
  };
}
