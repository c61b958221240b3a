// TLS and basic authentication for the exporter, from a web configuration file in the Prometheus exporter
// toolkit's format (https://prometheus.io/docs/prometheus/latest/configuration/https/), so that the file an
// operator already writes for node_exporter works here too. Only the settings below are read; any other
// key is refused by name rather than ignored, since an ignored security setting looks like a working one.
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type { SecureContextOptions, TlsOptions } from 'node:tls';
import { parse as parseYaml } from 'yaml';
import { UserError } from '../errors.js';

export interface WebConfig {
  /** Serve HTTPS with these; null: plain HTTP. */
  tls: (TlsOptions & SecureContextOptions) | null;
  /** User name → bcrypt hash; null: no authentication. */
  users: Map<string, string> | null;
}

const TLS_KEYS = ['cert_file', 'key_file', 'client_ca_file', 'client_auth_type', 'min_version'];
const CLIENT_AUTH = ['NoClientCert', 'RequireAndVerifyClientCert'];
const MIN_VERSION: Record<string, 'TLSv1.2' | 'TLSv1.3'> = { TLS12: 'TLSv1.2', TLS13: 'TLSv1.3' };

function refuse(file: string, what: string): never {
  throw new UserError(`--web-config-file ${file}: ${what}`);
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Reads and checks the file; every problem is one sentence naming the file and the key. */
export function loadWebConfig(file: string): WebConfig {
  let text: string;
  try { text = readFileSync(file, 'utf8'); } catch (err) { refuse(file, `cannot read it (${(err as NodeJS.ErrnoException).code ?? err}).`); }
  let doc: unknown;
  try { doc = parseYaml(text) ?? {}; } catch (err) { refuse(file, `not valid YAML: ${(err as Error).message.split('\n')[0]}`); }
  if (!isObject(doc)) refuse(file, 'expected a mapping with tls_server_config and/or basic_auth_users.');
  for (const key of Object.keys(doc)) {
    if (!['tls_server_config', 'basic_auth_users'].includes(key)) {
      refuse(file, `${key} is not supported by subagent-context metrics (only tls_server_config and basic_auth_users are); remove it.`);
    }
  }
  // Paths are relative to the file, as the exporter toolkit reads them.
  const path = (p: unknown, key: string) => {
    if (typeof p !== 'string' || p === '') refuse(file, `tls_server_config.${key} must be a file path.`);
    return resolve(dirname(file), p);
  };
  const read = (p: string, key: string) => {
    try { return readFileSync(p); } catch (err) { refuse(file, `tls_server_config.${key}: cannot read ${p} (${(err as NodeJS.ErrnoException).code ?? err}).`); }
  };

  let tls: WebConfig['tls'] = null;
  const t = doc.tls_server_config;
  if (t !== undefined && t !== null) {
    if (!isObject(t)) refuse(file, 'tls_server_config must be a mapping.');
    for (const key of Object.keys(t)) {
      if (!TLS_KEYS.includes(key)) refuse(file, `tls_server_config.${key} is not supported (supported: ${TLS_KEYS.join(', ')}); remove it.`);
    }
    tls = { cert: read(path(t.cert_file, 'cert_file'), 'cert_file'), key: read(path(t.key_file, 'key_file'), 'key_file') };
    const auth = t.client_auth_type ?? 'NoClientCert';
    if (typeof auth !== 'string' || !CLIENT_AUTH.includes(auth)) refuse(file, `tls_server_config.client_auth_type must be one of ${CLIENT_AUTH.join(', ')}.`);
    if (auth === 'RequireAndVerifyClientCert') {
      if (t.client_ca_file === undefined) refuse(file, 'tls_server_config.client_auth_type RequireAndVerifyClientCert needs client_ca_file.');
      Object.assign(tls, { ca: read(path(t.client_ca_file, 'client_ca_file'), 'client_ca_file'), requestCert: true, rejectUnauthorized: true });
    }
    if (t.min_version !== undefined) {
      const v = MIN_VERSION[String(t.min_version)];
      if (!v) refuse(file, `tls_server_config.min_version must be one of ${Object.keys(MIN_VERSION).join(', ')}.`);
      tls.minVersion = v;
    }
  }

  let users: WebConfig['users'] = null;
  const u = doc.basic_auth_users;
  if (u !== undefined && u !== null) {
    if (!isObject(u)) refuse(file, 'basic_auth_users must map user names to bcrypt hashes.');
    users = new Map();
    for (const [name, hash] of Object.entries(u)) {
      if (typeof hash !== 'string' || !/^\$2[aby]\$\d\d\$[./A-Za-z0-9]{53}$/.test(hash)) {
        refuse(file, `basic_auth_users.${name} must be a bcrypt hash (e.g. from \`htpasswd -nBC 10 "" | tr -d ':\\n'\`), not a password.`);
      }
      users.set(name, hash);
    }
    if (users.size === 0) users = null;
  }
  return { tls, users };
}
