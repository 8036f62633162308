// A throw-away PostgreSQL database for one test file, process test or benchmark run.
import crypto from 'node:crypto';
import pg from 'pg';

async function admin(adminUrl: string, statement: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    await client.query(statement);
  } finally {
    await client.end();
  }
}

/** Creates `<prefix>_<random>` on the server of `adminUrl`; `drop()` removes it (forcing out sessions). */
export async function createScratchPgDatabase(adminUrl: string, prefix = 'callplane_test'): Promise<{ url: string; name: string; drop: () => Promise<void> }> {
  const name = `${prefix}_${crypto.randomBytes(6).toString('hex')}`;
  await admin(adminUrl, `CREATE DATABASE ${name}`);
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return { url: url.toString(), name, drop: () => admin(adminUrl, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`) };
}
