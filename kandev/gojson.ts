// JSON text exactly as kandev writes it: Go's encoding/json (json.Marshal of map[string]any), not
// JSON.stringify. The differences matter to capture's filters: Go sorts map keys, and escapes `<`, `>`,
// `&`, U+2028 and U+2029 as \u003c, \u003e, \u0026, \u2028, \u2029, so shell commands, diffs and HTML
// in tool payloads carry `\u` escapes that JSON.stringify would never write.

const HEX = '0123456789abcdef';

function u4(code: number): string {
  return '\\u' + HEX[(code >> 12) & 15] + HEX[(code >> 8) & 15] + HEX[(code >> 4) & 15] + HEX[code & 15];
}

/** A JSON string literal the way Go's encodeState.string writes it with HTML escaping on (Go ≥ 1.22). */
export function goString(s: string): string {
  let out = '"';
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 0x22) out += '\\"';
    else if (c === 0x5c) out += '\\\\';
    else if (c < 0x20) {
      // Go 1.22 added \b and \f; the other control characters stay \u00XX, lower-case hex.
      out += c === 0x0a ? '\\n' : c === 0x0d ? '\\r' : c === 0x09 ? '\\t' : c === 0x08 ? '\\b' : c === 0x0c ? '\\f' : u4(c);
    } else if (c === 0x3c || c === 0x3e || c === 0x26 || c === 0x2028 || c === 0x2029) out += u4(c);
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      out += s[i] + s[i + 1]; // a valid surrogate pair: one UTF-8 code point, written as is
      i++;
    } else if (c >= 0xd800 && c <= 0xdfff) out += '\\ufffd'; // a lone surrogate is invalid UTF-8: Go writes the escape \ufffd
    else out += s[i];
  }
  return out + '"';
}

/** A float64 the way Go's floatEncoder writes it ('f' format inside [1e-6, 1e21), else 'e' with e-7, not e-07). */
function goNumber(n: number): string {
  if (!Number.isFinite(n)) throw new Error(`json: unsupported value: ${n}`);
  if (Object.is(n, -0)) return '-0';
  // JavaScript's shortest round-trip digits are Go's too ('g'-like with precision -1); only the
  // switch to exponent form and its spelling differ.
  const abs = Math.abs(n);
  if (abs !== 0 && (abs < 1e-6 || abs >= 1e21)) {
    return n.toExponential(); // Go writes e-07 then trims it to e-7: the same text
  }
  return String(n);
}

/** json.Marshal of a value built from maps (plain objects), slices (arrays), strings, numbers, bools and nil. */
export function goMarshal(v: unknown): string {
  if (v === null || v === undefined) return 'null';
  switch (typeof v) {
    case 'string': return goString(v);
    case 'number': return goNumber(v);
    case 'bigint': return v.toString();
    case 'boolean': return v ? 'true' : 'false';
    case 'object': {
      if (Array.isArray(v)) return '[' + v.map(goMarshal).join(',') + ']';
      // Go sorts map keys by their bytes; for these keys UTF-16 order and UTF-8 byte order agree
      // except above U+FFFF, which no kandev key uses.
      const keys = Object.keys(v as object).filter((k) => (v as Record<string, unknown>)[k] !== undefined).sort();
      return '{' + keys.map((k) => goString(k) + ':' + goMarshal((v as Record<string, unknown>)[k])).join(',') + '}';
    }
    default: throw new Error(`json: unsupported type: ${typeof v}`);
  }
}
