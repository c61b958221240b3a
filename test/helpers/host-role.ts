// kandev's application role as commonly set up (docs/security.md#the-trust-boundary): it owns schema
// public (the database owner does on PostgreSQL 15) and kandev's tables, and can so plant code there. For
// the files that run our commands as a superuser beside such a role.
import { randomBytes } from 'node:crypto';
import type pg from 'pg';

/** A new login role (a random name) made the owner of schema public and of every table in it, on `admin`'s database. */
export async function hostRoleOwningPublic(admin: pg.ClientBase): Promise<string> {
  const role = `kandev_app_${randomBytes(3).toString('hex')}`;
  await admin.query(`CREATE ROLE ${role} LOGIN`);
  await admin.query(`ALTER SCHEMA public OWNER TO ${role}`);
  const { rows } = await admin.query(`SELECT tablename FROM pg_tables WHERE schemaname = 'public'`);
  for (const { tablename } of rows) await admin.query(`ALTER TABLE public.${tablename} OWNER TO ${role}`);
  return role;
}

/** Drops the role: what it owns in `c`'s database (dropped after the file anyway) first. */
export async function dropHostRole(c: pg.ClientBase, role: string): Promise<void> {
  await c.query(`REASSIGN OWNED BY ${role} TO CURRENT_USER`);
  await c.query(`DROP OWNED BY ${role}`);
  await c.query(`DROP ROLE IF EXISTS ${role}`).catch(() => {});
}
