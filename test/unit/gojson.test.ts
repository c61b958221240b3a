// kandev writes metadata with Go's encoding/json; the traffic model must write the same bytes, or every
// filter measured on it measures a host that does not exist. Golden outputs: test/fixtures/go-json
// (json.Marshal, printed by a real Go toolchain).
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { goMarshal, goString } from '../../kandev/gojson.js';
import { subagentMetadata } from '../../kandev/host.js';
import { PACKAGE_ROOT } from '../../src/paths.js';

const golden = readFileSync(join(PACKAGE_ROOT, 'test', 'fixtures', 'go-json', 'golden.txt'), 'utf8').trim().split('\n');

describe('goMarshal', () => {
  it.each(golden.map((line) => [line.slice(0, 60), line]))('writes what json.Marshal wrote: %s', (_, line) => {
    expect(goMarshal(JSON.parse(line))).toBe(line);
  });

  it('differs from JSON.stringify where Go differs (so the golden test can fail)', () => {
    const v = { b: 'x && y > z', a: 1 };
    expect(JSON.stringify(v)).toBe('{"b":"x && y > z","a":1}');
    expect(goMarshal(v)).toBe('{"a":1,"b":"x \\u0026\\u0026 y \\u003e z"}');
  });

  it('writes \\b and \\f short, as Go 1.22+ does, and invalid UTF-16 as the \\ufffd escape', () => {
    expect(goString('\b\f')).toBe('"\\b\\f"');
    expect(goString('x\ud800y')).toBe('"x\\ufffdy"');
    expect(goString('😀')).toBe('"😀"');
  });

  it('subagentMetadata is Go-encoded', () => {
    const text = subagentMetadata({ tool_call_id: 'toolu_1', status: 'pending', subagent: { prompt: 'a && b', description: '<x>' } });
    expect(text).toBe('{"normalized":{"kind":"subagent_task","subagent_task":{"description":"\\u003cx\\u003e","prompt":"a \\u0026\\u0026 b"}},'
      + '"status":"pending","title":"Task","tool_call_id":"toolu_1"}');
  });
});
