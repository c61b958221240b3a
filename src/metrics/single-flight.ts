// Scrapes share evaluations (docs/dashboards.md, "metrics"): a result younger than the cache time is
// served again; while an evaluation runs, every scrape that arrives waits for that one instead of starting
// its own; and when every scrape waiting for it has gone away, it is cancelled, server-side query included.
import type { Evaluation } from './evaluate.js';
import { scrubSecrets } from '../secrets.js';

/** What a scrape gets when its own client went away first (nobody reads it). */
export class ScrapeAbandoned extends Error {}

interface Flight { promise: Promise<Evaluation>; waiters: number; controller: AbortController }

export class SharedEvaluation {
  private cached: Evaluation | null = null;
  private flight: Flight | null = null;

  /**
   * @param run       one evaluation; `signal` aborts when no scrape waits for it any more
   * @param cacheMs   how long a finished evaluation is served again (0: only to the scrapes that waited for it)
   * @param finished  called once per evaluation that finished (not one that was cancelled)
   */
  constructor(
    private readonly run: (signal: AbortSignal) => Promise<Evaluation>,
    private readonly cacheMs: number,
    private readonly finished: (evaluation: Evaluation) => void = () => {},
  ) {}

  /** How many evaluations are running right now (0 or 1). */
  get running(): number { return this.flight ? 1 : 0; }

  /** The evaluation for one scrape; `signal` says this scrape's client went away. */
  get(signal?: AbortSignal): Promise<Evaluation> {
    const now = Date.now();
    if (this.cached && now - this.cached.finishedAt < this.cacheMs) return Promise.resolve(this.cached);
    const flight = this.flight ?? this.start();
    flight.waiters++;
    return new Promise<Evaluation>((resolve, reject) => {
      const leave = () => {
        flight.waiters--;
        if (flight.waiters === 0) {
          flight.controller.abort();
          if (this.flight === flight) this.flight = null; // the next scrape starts afresh
        }
        reject(new ScrapeAbandoned('the scrape went away'));
      };
      if (signal?.aborted) { leave(); return; }
      signal?.addEventListener('abort', leave, { once: true });
      void flight.promise.then((evaluation) => {
        signal?.removeEventListener('abort', leave);
        resolve(evaluation);
      });
    });
  }

  private start(): Flight {
    const controller = new AbortController();
    const flight: Flight = { waiters: 0, controller, promise: Promise.resolve(null as unknown as Evaluation) };
    flight.promise = this.run(controller.signal).catch((err: unknown): Evaluation => ({
      // run() reports faults as evaluations; this only keeps a bug from leaving every scrape waiting.
      up: false, status: null, installedVersion: null, upgradeRequired: null, row: null,
      error: scrubSecrets(String((err as Error)?.message ?? err)), finishedAt: Date.now(),
    })).then((evaluation) => {
      if (this.flight === flight) this.flight = null;
      if (!controller.signal.aborted) {
        this.cached = evaluation;
        this.finished(evaluation);
      }
      return evaluation;
    });
    this.flight = flight;
    return flight;
  }

  /** Cancels the evaluation running now, if any (the exporter is stopping). */
  cancel(): void {
    this.flight?.controller.abort();
    this.flight = null;
  }
}
