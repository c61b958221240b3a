// Secrets never reach a terminal, a log line or an HTTP response (docs/security.md, "What the metrics
// exporter exposes"). Two layers: a connection URL is shown parsed, with its password and password-like
// query parameters replaced; and any other text that leaves the process (an error from pg or Node, a
// scrape error) has every password this process knows of cut out of it, wherever it appears.

const HIDDEN = '***';

/** Query parameters that carry a secret (libpq's `password` and `sslpassword`, and their look-alikes). */
const SECRET_PARAM = /pass|secret|token/i;

/** Every password this process has seen: in the URLs it redacted, PGPASSWORD, one pg read from a pgpass file. */
const known = new Set<string>();

function safeDecode(s: string): string | undefined {
  try { return decodeURIComponent(s); } catch { return undefined; }
}

/** Remembers a secret, so that scrubSecrets() removes it from any text (a pgpass password pg read, say). */
export function rememberSecret(secret: string | undefined | null): void {
  if (!secret) return;
  for (const form of [secret, encodeURIComponent(secret), safeDecode(secret)]) if (form && form !== HIDDEN) known.add(form);
}

/**
 * A connection URL as it may be shown: the password (an empty user's too, one holding `@` too) and every
 * password-like query parameter replaced by ***. The secrets it hides are remembered for scrubSecrets().
 */
export function redactUrl(url: string): string {
  let parsed: URL | undefined;
  try { parsed = new URL(url); } catch { /* not a URL: the text rules below */ }
  if (!parsed || !parsed.host || misplacedAt(url)) return redactLoosely(url);
  if (parsed.password) {
    rememberSecret(parsed.password);
    parsed.password = HIDDEN;
  }
  for (const [key, value] of [...parsed.searchParams]) {
    if (SECRET_PARAM.test(key)) {
      rememberSecret(value);
      parsed.searchParams.set(key, HIDDEN);
    }
  }
  return parsed.toString();
}

/**
 * Whether a URL has an `@` after where its host begins, as a URL parser reads it: a password holding `/`, `?`
 * or `#` unencoded, which ends the authority early (postgres://u:12/ab@host/db reads as host "u", port 12).
 * Such a URL names the wrong server and shows part of the password where the path or query goes.
 */
export function misplacedAt(url: string): boolean {
  const scheme = url.indexOf('://');
  if (scheme < 0) return false;
  const rest = url.slice(scheme + 3);
  const end = rest.search(/[/?#]/);
  return end >= 0 && rest.lastIndexOf('@') > end;
}

/** Characters that cannot be in a user name written in a URL as given: there they are the password's. */
const NOT_A_USER = /[/?#@]/;

/**
 * What a string that does not parse as a URL (or has an `@` where no URL puts one) may show: everything
 * between `://` and the last `@` (where the host begins, whatever the password holds) becomes user:***,
 * or *** alone when the user part holds `/`, `?`, `#` or `@` itself; password-like `key=value` pairs (a
 * libpq connection string's too, quoted or not) lose their value.
 */
function redactLoosely(text: string): string {
  return text
    // Greedy: up to the last `@`, so a password holding @ / ? # (or spaces) is hidden whole.
    .replace(/(\b[a-z][a-z0-9+.-]*:\/\/)(.*)@/gi, (_m, scheme: string, userinfo: string) => {
      const colon = userinfo.indexOf(':');
      const user = colon < 0 ? userinfo : userinfo.slice(0, colon);
      if (NOT_A_USER.test(user)) {
        rememberSecret(userinfo);
        return `${scheme}${HIDDEN}@`;
      }
      if (colon < 0) return `${scheme}${userinfo}@`;
      rememberSecret(userinfo.slice(colon + 1));
      return `${scheme}${user}:${HIDDEN}@`;
    })
    // libpq's connection string quotes a value that holds spaces: 'a b', with \' and \\ inside.
    .replace(/([?&;\s]|^)([\w-]*(?:pass|secret|token)[\w-]*)(\s*=\s*)('(?:[^'\\]|\\.)*'?|[^&\s"']*)/gi,
      (_m, lead: string, key: string, eq: string, value: string) => {
        rememberSecret(value.startsWith("'") ? value.replace(/^'|'$/g, '').replace(/\\(.)/g, '$1') : value);
        return `${lead}${key}${eq}${HIDDEN}`;
      });
}

/** The environment's secrets, read when asked (they may be set after this module loaded). */
function rememberEnvironment(): void {
  rememberSecret(process.env.PGPASSWORD);
  if (process.env.DATABASE_URL) redactUrl(process.env.DATABASE_URL);
}

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * `text` with every known secret cut out; `urls` adds the secrets of URLs the caller knows of (the
 * command's --database-url). URLs in the text are not parsed here: the messages' own examples
 * (postgres://user:password@host/database) are not secrets, and the URLs a message names are shown
 * through redactUrl() where it is made. A secret shorter than 4 characters is cut only
 * where it stands alone, so that a password like "pg" does not shred every word holding those letters. A
 * password that is also the user or database name is cut there too: safe first, readable second.
 */
export function scrubSecrets(text: string, ...urls: Array<string | undefined>): string {
  for (const url of urls) if (url) redactUrl(url);
  rememberEnvironment();
  let out = text;
  // Longest first: a secret that contains another is cut whole.
  for (const secret of [...known].sort((a, b) => b.length - a.length)) {
    const pattern = secret.length >= 4 ? escapeRegExp(secret) : `(?<![A-Za-z0-9])${escapeRegExp(secret)}(?![A-Za-z0-9])`;
    out = out.replace(new RegExp(pattern, 'g'), HIDDEN);
  }
  return out;
}
