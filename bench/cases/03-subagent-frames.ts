// Target 3: subagent frames, the trigger against kandev's own writer as it ships (the message write,
// then its upsert as a separate autocommit statement: two commits per frame). One writer, then a burst
// of 16 writers sending subagent frames only.
import { QUICK, alternate, ratios, ratioMetrics, perUnit, measure, openEach, openMany, closeAll, each, setSync, type BenchCase } from '../harness.js';
import { smallStores, benchPlan, relabel } from '../stores.js';
import { createRows, writeSession, isSubagentFrame, type WriteMode } from '../replay.js';
import type { PlannedSession } from '../../kandev/traffic-plan.js';

const VARIANTS = ['trigger', 'writer'] as const;
const MODE: Record<typeof VARIANTS[number], WriteMode> = { trigger: 'messages', writer: 'kandev-writer' };
const WRITERS = 16;

/** The live sessions that launch subagents. */
function sessionsWithSubagents(): PlannedSession[] {
  return benchPlan().sessions.filter((s) => !s.history && s.turns.some((t) => t.subagents.length > 0));
}

const kase: BenchCase = {
  id: '03-subagent-frames',
  title: "subagent frames: trigger vs kandev's writer",
  targets: [
    { name: 'T3 one writer, wall, durable', metric: 'wall_ratio_sync_on', comparator: '<=', limit: 0.8 },
    { name: 'T3 one writer, server CPU, sync off', metric: 'cpu_ratio_sync_off', comparator: '<=', limit: 1.0 },
    { name: 'T3 16-writer burst, wall, durable', metric: 'burst_wall_ratio_sync_on', comparator: '<=', limit: 0.85 },
  ],
  async run(ctx) {
    const urls = await smallStores(ctx);
    const sessions = sessionsWithSubagents();
    const store = { trigger: urls.on, writer: urls.writer };
    const rounds = QUICK ? 3 : 25;
    const one = await openEach(VARIANTS, store);
    let frames = 0;
    const single = await alternate(VARIANTS, rounds, async (v, sync, round) => {
      const c = one[v];
      await setSync(c, sync);
      // Three sessions a round (~60 frames), the next three the next round.
      const mine = [0, 1, 2].map((k) => relabel(sessions[(round * 3 + k) % sessions.length], `c3-${v}-${round}`));
      for (const s of mine) await createRows(c, s);
      let n = 0;
      const sample = await measure([c], async () => {
        for (const s of mine) n += await writeSession(c, s, MODE[v], isSubagentFrame);
      });
      frames = n;
      return each(sample, n);
    });
    await closeAll(one);
    const r = ratios(single, 'trigger', 'writer');

    // The burst: every writer sends the subagent frames of its sessions, nothing else.
    const many = await openMany(VARIANTS, store, WRITERS);
    const burstRounds = QUICK ? 1 : 5;
    let burstFrames = 0;
    const burst = await alternate(VARIANTS, burstRounds, async (v, sync, round) => {
      const cs = many[v];
      for (const c of cs) await setSync(c, sync);
      const mine = sessions.map((s) => relabel(s, `c3b-${v}-${round}`));
      for (const s of mine) await createRows(cs[0], s);
      let n = 0;
      const sample = await measure(cs, () => Promise.all(cs.map(async (c, w) => {
        for (const s of mine.filter((_, i) => i % WRITERS === w)) {
          const k = await writeSession(c, s, MODE[v], isSubagentFrame);
          n += k;
        }
      })));
      burstFrames = n;
      return sample;
    });
    await closeAll(many);
    const b = ratios(burst, 'trigger', 'writer');
    return {
      metrics: {
        frames_per_round: frames, rounds,
        ...ratioMetrics(r).metrics,
        ...perUnit(single, 1),
        burst_frames_per_round: burstFrames, burst_rounds: burstRounds,
        ...ratioMetrics(b, 'burst_').metrics,
        ...Object.fromEntries(Object.entries(perUnit(burst, burstFrames)).map(([k, x]) => [`burst_${k}`, x])),
      },
      spread: { ...ratioMetrics(r).spread, ...ratioMetrics(b, 'burst_').spread },
    };
  },
};
export default kase;
