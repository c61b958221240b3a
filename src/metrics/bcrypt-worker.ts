// The thread that checks passwords against bcrypt hashes (bcrypt-thread.ts starts it). bcrypt is slow on
// purpose; on the exporter's event loop each check would hold up every scrape for its whole duration.
import { readlinkSync } from 'node:fs';
import { setPriority } from 'node:os';
import { parentPort } from 'node:worker_threads';
import bcrypt from 'bcryptjs';

export interface CheckRequest { id: number; password: string; hash: string }
export interface CheckAnswer { id: number; ok: boolean }

// Below normal CPU priority (nice 10; on Linux a thread has its own): someone trying passwords gets about a
// tenth of what scrapes, PostgreSQL and kandev on the same machine would give up to a thread of normal
// priority, while a check still finishes when the machine is busy (nice 19 would wait for an idle CPU).
try {
  setPriority(Number(readlinkSync('/proc/thread-self').split('/').pop()), 10);
} catch {
  // not Linux: checks run at the exporter's priority
}

parentPort?.on('message', ({ id, password, hash }: CheckRequest) => {
  parentPort!.postMessage({ id, ok: bcrypt.compareSync(password, hash) } satisfies CheckAnswer);
});
