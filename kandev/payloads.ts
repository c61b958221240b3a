// Seeded text of the sizes and characters kandev's tool payloads carry: shell commands joined with
// `&&`, redirections, diffs and source with `<` and `>`, HTML from web fetches. Go's encoder turns
// every `<`, `>` and `&` into a \u escape, which is what capture's filters must see through cheaply.

const IDENT = ['session', 'turn', 'message', 'repo', 'worker', 'handler', 'config', 'result', 'task', 'client', 'queue', 'index'];
const FILES = ['apps/backend/internal/task/service.go', 'apps/backend/internal/agent/acp/client.go', 'apps/web/src/board/Card.tsx',
  'apps/web/src/session/Messages.tsx', 'apps/backend/internal/task/repository/sqlite/message.go', 'scripts/release.sh'];

const pick = <T>(rnd: () => number, xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)];

/** A size in bytes, log-uniform in [min, max]: many small payloads, a long tail of large ones. */
export function payloadSize(rnd: () => number, min = 300, max = 20_000): number {
  return Math.round(min * Math.pow(max / min, rnd()));
}

function sourceLine(rnd: () => number): string {
  const a = pick(rnd, IDENT), b = pick(rnd, IDENT);
  switch (Math.floor(rnd() * 8)) {
    case 0: return `\tif ${a} != nil && len(${b}.Items) > 0 {`;
    case 1: return `\tfor i := 0; i < len(${a}); i++ {`;
    case 2: return `  if (${a}.length > 0 && ${b} !== undefined) return <${a[0].toUpperCase()}${a.slice(1)} key={${b}.id} />;`;
    case 3: return `\t\treturn fmt.Errorf("${a}: %w", err)`;
    case 4: return `  const ${a} = items.filter((x) => x.${b} >= limit && x.ok);`;
    case 5: return `\t// ${a} -> ${b}: keep the <${b}> order & the ${a} lock`;
    case 6: return `\t${a}, err := r.db.QueryContext(ctx, "SELECT * FROM ${b}s WHERE id = $1", id)`;
    default: return `\t}`;
  }
}

function stdoutLine(rnd: () => number): string {
  const f = pick(rnd, FILES);
  switch (Math.floor(rnd() * 6)) {
    case 0: return `ok  \tgithub.com/kandev/kandev/${f.split('/').slice(0, 4).join('/')}\t${(rnd() * 9).toFixed(3)}s`;
    case 1: return `--- FAIL: Test${pick(rnd, IDENT)} (0.${Math.floor(rnd() * 99)}s)`;
    case 2: return `    ${f}:${Math.floor(rnd() * 900)}: expected <nil>, got &errors.errorString{s:"${pick(rnd, IDENT)} closed"}`;
    case 3: return `${f}:${Math.floor(rnd() * 900)}:${Math.floor(rnd() * 80)}: warning: ${pick(rnd, IDENT)} > ${pick(rnd, IDENT)} may overflow`;
    case 4: return `npm warn deprecated ${pick(rnd, IDENT)}@1.${Math.floor(rnd() * 9)}.0: use <${pick(rnd, IDENT)}> & friends`;
    default: return `PASS ${f} (${Math.floor(rnd() * 400)} ms)`;
  }
}

function htmlLine(rnd: () => number): string {
  const a = pick(rnd, IDENT);
  return `<div class="${a}"><a href="/docs/${a}?v=2&amp;lang=en">${a} &amp; ${pick(rnd, IDENT)}</a> <code>${a} &lt; 10</code></div>`;
}

function fill(rnd: () => number, bytes: number, line: (rnd: () => number) => string): string {
  const out: string[] = [];
  let n = 0;
  while (n < bytes) {
    const l = line(rnd);
    out.push(l);
    n += l.length + 1;
  }
  return out.join('\n').slice(0, bytes);
}

export const sourceText = (rnd: () => number, bytes: number) => fill(rnd, bytes, sourceLine);
export const stdoutText = (rnd: () => number, bytes: number) => fill(rnd, bytes, stdoutLine);
export const htmlText = (rnd: () => number, bytes: number) => fill(rnd, bytes, htmlLine);

/** A unified diff of about `bytes`. */
export function diffText(rnd: () => number, bytes: number): string {
  return fill(rnd, bytes, (r) => {
    const l = sourceLine(r);
    const k = r();
    return k < 0.15 ? `@@ -${Math.floor(r() * 400)},7 +${Math.floor(r() * 400)},8 @@` : k < 0.45 ? `-${l}` : k < 0.75 ? `+${l}` : ` ${l}`;
  });
}

export function shellCommand(rnd: () => number): string {
  const dir = pick(rnd, ['apps/backend', 'apps/web', '.']);
  return pick(rnd, [
    `cd ${dir} && go test ./... 2>&1 | tail -n 80`,
    `cd ${dir} && npm run lint && npm test -- --run > /tmp/test.log 2>&1; tail -50 /tmp/test.log`,
    `git diff --stat HEAD~1 && git log --oneline -5`,
    `grep -rn "${pick(rnd, IDENT)}" ${dir} | head -40`,
    `make build && ./bin/kandev migrate --dry-run < migrations/plan.txt`,
  ]);
}

export function prose(rnd: () => number, bytes: number): string {
  return fill(rnd, bytes, (r) => `I looked at ${pick(r, FILES)}: the ${pick(r, IDENT)} path checks ${pick(r, IDENT)} > 0 && ${pick(r, IDENT)} < limit before it writes.`);
}

export { pick, FILES, IDENT };
