// The exporter's basic authentication (src/metrics/basic-auth.ts) as an attacker meets it: which attempts
// cost a bcrypt check and which are answered without one. The checks are bcryptjs's own compare, run here
// on the test's thread and counted (the exporter runs them on a thread of its own: metrics/metrics-auth-load.test.ts).
import { describe, it, expect } from 'vitest';
import bcrypt from 'bcryptjs';
import { basicAuth, CHECKS_RUNNING, CHECKS_WAITING, type PasswordCheck } from '../../src/metrics/basic-auth.js';

const users = new Map([
  ['prometheus', bcrypt.hashSync('right', 4).replace(/^\$2b\$/, '$2y$')], // htpasswd writes $2y$
  ['grafana', bcrypt.hashSync('other', 6)],
]);
const header = (pair: string) => `Basic ${Buffer.from(pair).toString('base64')}`;

/** bcryptjs's compare, counted (the hashes it was given); hold() keeps the checks that start after it waiting. */
function countedCheck() {
  const hashes: string[] = [];
  let gate = Promise.resolve();
  const check: PasswordCheck = async (password, hash) => {
    hashes.push(hash);
    await gate;
    return bcrypt.compare(password, hash);
  };
  const hold = () => {
    let release!: () => void;
    gate = new Promise((resolve) => { release = resolve; });
    return release;
  };
  return { check, hashes, hold };
}

describe('basic authentication', () => {
  it('a pair that passed is never checked again; a wrong one repeated is refused without a check', async () => {
    const { check, hashes } = countedCheck();
    const auth = basicAuth(users, check);
    for (let i = 0; i < 3; i++) expect(await auth(header('prometheus:right'))).toBe('passed');
    expect(hashes).toHaveLength(1);
    for (let i = 0; i < 3; i++) expect(await auth(header('prometheus:wrong'))).toBe('refused');
    expect(hashes).toHaveLength(2);
    expect(await auth(header('prometheus:wrong2'))).toBe('refused');
    expect(hashes).toHaveLength(3);
  });

  it('no header, another scheme, no colon: refused without a check', async () => {
    const { check, hashes } = countedCheck();
    const auth = basicAuth(users, check);
    for (const h of [undefined, '', 'Bearer abc', header('prometheus'), 'Basic %%%']) expect(await auth(h)).toBe('refused');
    expect(hashes).toEqual([]);
  });

  it('an unknown user name costs a check against a hash of the users\' highest cost, and never passes', async () => {
    const { check, hashes } = countedCheck();
    const auth = basicAuth(users, check);
    expect(await auth(header('nobody:right'))).toBe('refused');
    expect(await auth(header('nobody:right'))).toBe('refused'); // remembered like any wrong pair
    expect(hashes).toHaveLength(1);
    expect(hashes[0]).toMatch(/^\$2b\$06\$[./A-Za-z0-9]{53}$/);
    expect(await bcrypt.compare('', hashes[0])).toBe(false);
  });

  it(`beyond ${CHECKS_RUNNING} check running and ${CHECKS_WAITING} waiting, a new pair is answered busy at once, without a check; a pair that passed still passes`, async () => {
    const { check, hashes, hold } = countedCheck();
    const auth = basicAuth(users, check);
    expect(await auth(header('prometheus:right'))).toBe('passed'); // the scraper's pair, before the flood
    const release = hold();
    const admitted = CHECKS_RUNNING + CHECKS_WAITING;
    const attempts = [...Array(20).keys()].map((i) => auth(header(`prometheus:wrong-${i}`)));
    const same = auth(header('prometheus:wrong-0')); // joins the check under way for the same pair
    expect(await Promise.all(attempts.slice(admitted))).toEqual(Array(20 - admitted).fill('busy'));
    expect(hashes).toHaveLength(1 + CHECKS_RUNNING); // the rest of those admitted wait in line, unchecked
    expect(await auth(header('prometheus:right'))).toBe('passed');
    expect(await auth(header('grafana:other'))).toBe('busy'); // a pair never seen, right or wrong, waits for room
    release();
    expect(await Promise.all(attempts.slice(0, admitted))).toEqual(Array(admitted).fill('refused'));
    expect(await same).toBe('refused');
    expect(hashes).toHaveLength(1 + admitted);
    expect(await auth(header('grafana:other'))).toBe('passed');
  });

  it('remembers only the latest refused pairs', async () => {
    const { check, hashes } = countedCheck();
    const auth = basicAuth(users, check, { running: 1, waiting: 4, refusedRemembered: 2 });
    for (const p of ['a', 'b', 'c', 'c', 'b']) await auth(header(`prometheus:${p}`));
    expect(hashes).toHaveLength(3);
    await auth(header('prometheus:a')); // forgotten: checked again
    expect(hashes).toHaveLength(4);
  });
});
