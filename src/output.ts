// Terminal output: colour only on a TTY and never with NO_COLOR (https://no-color.org).
export const useColor = Boolean(process.stdout.isTTY) && !('NO_COLOR' in process.env && process.env.NO_COLOR !== '');

const paint = (code: number) => (s: string) => (useColor ? `\x1b[${code}m${s}\x1b[0m` : s);
export const bold = paint(1);
export const red = paint(31);
export const green = paint(32);
export const yellow = paint(33);
export const dim = paint(2);

export function printJson(value: unknown): void {
  process.stdout.write(JSON.stringify(value, null, 2) + '\n');
}

/** Left-aligned "label  value" lines. */
export function keyValues(rows: Array<[string, string]>): string {
  const width = Math.max(...rows.map(([k]) => k.length));
  return rows.map(([k, v]) => `  ${k.padEnd(width)}  ${v}`).join('\n');
}

/** One step of a longer job, reported on stderr (stdout stays clean for --json and pipes). */
export interface Progress {
  /** Known amount of work: draws a bar. */
  update(done: number, total: number): void;
  done(note?: string): void;
  fail(): void;
}

const BAR_WIDTH = 24;

/**
 * A progress line for one step. On a terminal it redraws a bar (or, while the amount of work is
 * unknown, the elapsed time) in place; elsewhere it prints one line when the step ends, unless quiet.
 */
export function progress(label: string, opts: { quiet?: boolean } = {}): Progress {
  const tty = Boolean(process.stderr.isTTY);
  const started = Date.now();
  let done = 0;
  let total = 0;
  let finished = false;
  const seconds = () => ((Date.now() - started) / 1000).toFixed(1);
  const draw = () => {
    if (!tty || finished) return;
    let line = `  ${label} `;
    if (total > 0) {
      const filled = Math.round((done / total) * BAR_WIDTH);
      line += `[${'█'.repeat(filled)}${'░'.repeat(BAR_WIDTH - filled)}] ${done}/${total}`;
    } else {
      line += `… ${seconds()}s`;
    }
    process.stderr.write(`\r\x1b[2K${line}`);
  };
  const timer = tty ? setInterval(draw, 100) : undefined;
  timer?.unref();
  draw();
  const end = (mark: string, note?: string) => {
    if (finished) return;
    finished = true;
    if (timer) clearInterval(timer);
    const line = `  ${mark} ${label} (${seconds()}s)${note ? `: ${note}` : ''}`;
    if (tty) process.stderr.write(`\r\x1b[2K${line}\n`);
    else if (!opts.quiet) process.stderr.write(`${line}\n`);
  };
  return {
    update(d, t) { done = d; total = t; },
    done(note) { end(green('✓'), note); },
    fail() { end(red('✗')); },
  };
}
