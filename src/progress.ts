// Progress of one long statement on a terminal: what is being scanned and for how long. The work stays
// in the database (one statement); this only repaints a line on a timer while it runs. Writes nothing
// unless the stream is a TTY, so pipes, logs and --json output stay clean.

export interface ProgressStream {
  isTTY?: boolean;
  write(chunk: string): unknown;
}

export interface Progress {
  /** Replaces the progress line with a final one (or just clears it). */
  stop(finalLine?: string): void;
}

const FRAMES = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

export function formatElapsed(ms: number): string {
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)}s`;
  const m = Math.floor(s / 60);
  return `${m}m${String(Math.floor(s % 60)).padStart(2, '0')}s`;
}

/**
 * Shows `label` with a spinner and the elapsed time, repainted every `intervalMs`, until stop().
 * The first frame is painted at once.
 */
export function startProgress(stream: ProgressStream, label: string, intervalMs = 250): Progress {
  if (!stream.isTTY) return { stop() {} };
  const started = Date.now();
  let frame = 0;
  const paint = () => {
    stream.write(`\r\x1b[K${FRAMES[frame++ % FRAMES.length]} ${label}  ${formatElapsed(Date.now() - started)}`);
  };
  paint();
  const timer = setInterval(paint, intervalMs);
  timer.unref();
  return {
    stop(finalLine) {
      clearInterval(timer);
      stream.write(`\r\x1b[K${finalLine === undefined ? '' : `${finalLine} (${formatElapsed(Date.now() - started)})\n`}`);
    },
  };
}
