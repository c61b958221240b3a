// The one progress display: a line on stderr for one step of a longer job (stdout stays clean for --json
// and pipes). On a terminal it repaints a spinner with a bar (known amount of work) or the elapsed time
// (one long statement), on a timer; elsewhere it writes nothing until the step ends, and then one line
// unless quiet.
import { formatCount } from './count.js';

export interface ProgressStream {
  isTTY?: boolean;
  write(chunk: string): unknown;
}

export interface Progress {
  /** Known amount of work: draws a bar instead of the elapsed time. */
  update(done: number, total: number): void;
  /** The step succeeded: "✓ label (1.2s): note". */
  done(note?: string): void;
  /** The step failed: "✗ label (1.2s)". */
  fail(note?: string): void;
  /** Removes the line and prints nothing: the caller reports the outcome itself. */
  clear(): void;
}

export interface ProgressOptions {
  stream?: ProgressStream;
  /** Off a terminal, print nothing at all (not even the closing line). */
  quiet?: boolean;
  intervalMs?: number;
  /** Wraps the ✓ / ✗ marks, e.g. in colour. */
  mark?: { ok(s: string): string; failed(s: string): string };
}

const FRAMES = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
const BAR_WIDTH = 24;

export function formatElapsed(ms: number): string {
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)}s`;
  const m = Math.floor(s / 60);
  return `${m}m${String(Math.floor(s % 60)).padStart(2, '0')}s`;
}

export function progress(label: string, opts: ProgressOptions = {}): Progress {
  const stream = opts.stream ?? process.stderr;
  const tty = Boolean(stream.isTTY);
  const mark = opts.mark ?? { ok: (s: string) => s, failed: (s: string) => s };
  const started = Date.now();
  let frame = 0;
  let done = 0;
  let total = 0;
  let finished = false;
  const elapsed = () => formatElapsed(Date.now() - started);
  const paint = () => {
    if (finished) return;
    let line = `\r\x1b[K${FRAMES[frame++ % FRAMES.length]} ${label}  `;
    if (total > 0) {
      const filled = Math.round((Math.min(done, total) / total) * BAR_WIDTH);
      line += `[${'█'.repeat(filled)}${'░'.repeat(BAR_WIDTH - filled)}] ${formatCount(done)}/${formatCount(total)}`;
    } else {
      line += elapsed();
    }
    stream.write(line);
  };
  const timer = tty ? setInterval(paint, opts.intervalMs ?? 250) : undefined;
  timer?.unref();
  if (tty) paint();
  const end = (line: string | undefined) => {
    if (finished) return;
    finished = true;
    if (timer) clearInterval(timer);
    if (tty) stream.write(`\r\x1b[K${line === undefined ? '' : `${line}\n`}`);
    else if (line !== undefined && !opts.quiet) stream.write(`${line}\n`);
  };
  return {
    update(d, t) { done = d; total = t; },
    done(note) { end(`${mark.ok('✓')} ${label} (${elapsed()})${note ? `: ${note}` : ''}`); },
    fail(note) { end(`${mark.failed('✗')} ${label} (${elapsed()})${note ? `: ${note}` : ''}`); },
    clear() { end(undefined); },
  };
}
