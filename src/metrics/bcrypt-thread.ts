// bcrypt checks on a thread of their own (bcrypt-worker.ts), in the order asked: the event loop only posts
// the pair and reads the answer, so a check never holds up a scrape. How many may wait is basic-auth.ts's.
import { Worker } from 'node:worker_threads';
import type { CheckAnswer, CheckRequest } from './bcrypt-worker.js';

let worker: Worker | undefined;
let nextId = 0;
const pending = new Map<number, { resolve: (ok: boolean) => void; reject: (err: Error) => void }>();

function thread(): Worker {
  if (worker) return worker;
  const w = new Worker(new URL('./bcrypt-worker.js', import.meta.url));
  w.on('message', ({ id, ok }: CheckAnswer) => {
    pending.get(id)?.resolve(ok);
    pending.delete(id);
    if (pending.size === 0) w.unref();
  });
  // A thread that died fails what it held; the next check starts a new one.
  const fail = (err: Error) => {
    if (worker === w) worker = undefined;
    for (const p of pending.values()) p.reject(err);
    pending.clear();
  };
  w.on('error', fail);
  w.on('exit', (code) => fail(new Error(`the password-check thread exited (code ${code})`)));
  // Held only while it has checks to answer (after the listeners, which would hold it again): an idle
  // thread never keeps the exporter from exiting.
  w.unref();
  return (worker = w);
}

/** Whether `password` matches the bcrypt `hash`, computed on the password-check thread. */
export function checkOffThread(password: string, hash: string): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const id = nextId++;
    pending.set(id, { resolve, reject });
    const w = thread();
    w.ref();
    w.postMessage({ id, password, hash } satisfies CheckRequest);
  });
}
