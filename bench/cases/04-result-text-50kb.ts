// Target 4: completed subagent frames carrying a 50 KB result_text (a subagent's whole report), the
// trigger against kandev's writer. The calls' earlier frames are written first, untimed; the timed
// part is the completed frames alone.
import { QUICK, alternate, ratios, ratioMetrics, perUnit, measure, openEach, closeAll, each, setSync, type BenchCase } from '../harness.js';
import { smallStores, completedCalls, relabel } from '../stores.js';
import { createRows, writeSession, isFinal, type WriteMode } from '../replay.js';
import { SHAPE } from '../../kandev/traffic-plan.js';

const VARIANTS = ['trigger', 'writer'] as const;
const MODE: Record<typeof VARIANTS[number], WriteMode> = { trigger: 'messages', writer: 'kandev-writer' };


const kase: BenchCase = {
  id: '04-result-text-50kb',
  title: "completed frames with a 50 KB result_text: trigger vs kandev's writer",
  targets: [
    { name: 'T4 wall, durable', metric: 'wall_ratio_sync_on', comparator: '<=', limit: 0.8 },
  ],
  async run(ctx) {
    const urls = await smallStores(ctx);
    const calls = completedCalls();
    const store = { trigger: urls.on, writer: urls.writer };
    const rounds = QUICK ? 3 : 15;
    const clients = await openEach(VARIANTS, store);
    let frames = 0;
    const samples = await alternate(VARIANTS, rounds, async (v, sync, round) => {
      const c = clients[v];
      const s = relabel(calls, `c4-${v}-${round}`);
      await setSync(c, 'off');
      await createRows(c, s);
      await writeSession(c, s, MODE[v], (w) => w.class === 'subagent' && !isFinal(w));
      await setSync(c, sync);
      let n = 0;
      const sample = await measure([c], async () => { n = await writeSession(c, s, MODE[v], isFinal); });
      frames = n;
      return each(sample, n);
    });
    await closeAll(clients);
    const r = ratios(samples, 'trigger', 'writer');
    return {
      metrics: {
        completed_frames_per_round: frames, rounds, result_text_bytes: SHAPE.maxResultText,
        ...ratioMetrics(r).metrics,
        ...perUnit(samples, 1),
      },
      spread: ratioMetrics(r).spread,
    };
  },
};
export default kase;
