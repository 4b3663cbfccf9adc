// mysql2's session through the proxy: query (text) and execute (prepared), a pool with
// changeUser, the Promise API, a multi-statement query, a transaction, a duplicate key, column
// metadata as mysql2 reads it; TLS when SP_TLS=1 (stderr only). Prints a transcript.
'use strict';
const mysql = require('mysql2/promise');

const env = process.env;
const base = {
  host: env.SP_HOST,
  port: Number(env.SP_PORT),
  user: env.SP_USER,
  password: env.SP_PASSWORD,
  database: env.SP_DB,
  supportBigNumbers: true,
  bigNumberStrings: true,
  dateStrings: false,
  timezone: 'Z',
};
const T = 't_node';

function out(...parts) {
  console.log(parts.join(' '));
}

function val(v) {
  if (v === null) return 'null';
  if (Buffer.isBuffer(v)) return `Buffer:${v.toString('hex')}`;
  if (v instanceof Date) return `Date:${v.toISOString()}`;
  return `${typeof v}:${JSON.stringify(v)}`;
}

function show([rows, fields], meta = true) {
  if (!Array.isArray(rows)) {
    out('  ok', `affected=${rows.affectedRows}`, `warnings=${rows.warningStatus}`);
    return;
  }
  if (meta && fields) {
    for (const f of fields) {
      out('  column', f.name, `type=${f.columnType}`, `length=${f.columnLength}`,
        `decimals=${f.decimals}`, `flags=${f.flags}`, `charset=${f.characterSet}`,
        `table=${f.table}/${f.orgTable}`, `db=${f.schema}`);
    }
  }
  for (const r of rows) out('  row', Object.entries(r).map(([k, v]) => `${k}=${val(v)}`).join(', '));
}

async function session() {
  const conn = await mysql.createConnection({ ...base, multipleStatements: true });
  out('server_version:', conn.connection._handshakePacket?.serverVersion ? 'present' : 'missing');
  show(await conn.query('SELECT VERSION() IS NOT NULL AS has_version'), false);
  await conn.query(`DROP TABLE IF EXISTS ${T}`);
  await conn.query(`CREATE TABLE ${T} (id BIGINT NOT NULL PRIMARY KEY, k INT NOT NULL,
    name VARCHAR(32) NULL, price DECIMAL(10,2) NULL, created DATETIME(3) NULL, data BLOB NULL,
    big BIGINT UNSIGNED NULL)`);
  out('== multi-row insert (query with nested arrays)');
  show(await conn.query(`INSERT INTO ${T} (id, k, name, price, created, data, big) VALUES ?`, [[
    [1, 10, 'alice', '9.99', '2024-01-02 03:04:05.678', Buffer.from([0, 255]), '18446744073709551615'],
    [2, 20, null, null, null, null, null],
    [3, 30, 'ünï', '0.50', '1999-12-31 23:59:59.000', Buffer.alloc(0), '0'],
    [4, 40, 'dave', '100.00', '2024-02-29 12:00:00.001', Buffer.from('x'), '1'],
    [5, 50, 'eve', '5.00', null, null, '5'],
    [6, 60, 'frank', '6.00', null, null, '6'],
  ]]));
  out('== query routed by key');
  show(await conn.query(`SELECT * FROM ${T} WHERE id = ?`, [1]));
  out('== execute (prepared) routed by key, NULLs');
  show(await conn.execute(`SELECT * FROM ${T} WHERE id = ?`, [2]));
  show(await conn.execute(`SELECT * FROM ${T} WHERE id = ?`, [1]));
  show(await conn.execute(`INSERT INTO ${T} (id, k, name, big) VALUES (?, ?, ?, ?)`, [7, 70, null, '18446744073709551614']));
  out('== fanned out');
  show(await conn.query(`SELECT COUNT(*) AS n, SUM(k) AS total, MIN(price) AS cheapest FROM ${T}`));
  show(await conn.execute(`SELECT id, name, created FROM ${T} WHERE k > ? ORDER BY id`, [15]));
  out('== transaction on one node');
  await conn.beginTransaction();
  await conn.execute(`UPDATE ${T} SET k = k + 100 WHERE id = ?`, [1]);
  await conn.rollback();
  await conn.beginTransaction();
  await conn.execute(`UPDATE ${T} SET k = k + 1 WHERE id = ?`, [3]);
  await conn.commit();
  show(await conn.query(`SELECT id, k FROM ${T} WHERE id IN (1, 3) ORDER BY id`), false);
  out('== duplicate key');
  for (const run of [() => conn.query(`INSERT INTO ${T} (id, k) VALUES (5, 0)`),
    () => conn.execute(`INSERT INTO ${T} (id, k) VALUES (?, ?)`, [5, 0])]) {
    try {
      await run();
      out('  no error');
    } catch (e) {
      out('  error', e.code, e.errno, e.sqlState, e.sqlMessage);
    }
  }
  out('== warnings');
  show(await conn.query(`INSERT IGNORE INTO ${T} (id, k) VALUES (5, 0)`));
  show(await conn.query('SHOW WARNINGS'));
  out('== multiple statements');
  const [results] = await conn.query(`SELECT 1 AS a; SELECT 'two' AS b; UPDATE ${T} SET k = k WHERE id = 6`);
  for (const r of results) out('  result', JSON.stringify(r));
  show(await conn.query('SELECT DATABASE() AS db'), false);
  await conn.end();
}

async function pool() {
  out('== pool');
  const p = mysql.createPool({ ...base, connectionLimit: 3 });
  const ids = [1, 2, 3, 4, 5, 6];
  const rows = await Promise.all(ids.map((id) => p.execute(`SELECT id, k FROM ${T} WHERE id = ?`, [id])));
  for (const [r] of rows) out('  row', JSON.stringify(r));
  const c = await p.getConnection();
  await c.query("SET @who = 'before'");
  await c.changeUser({ user: env.SP_USER, password: env.SP_PASSWORD, database: env.SP_DB });
  show(await c.query('SELECT @who AS who, DATABASE() AS db'), false);
  c.release();
  await p.end();
}

async function tls() {
  if (env.SP_TLS !== '1') return;
  const c = await mysql.createConnection({ ...base, ssl: { rejectUnauthorized: false } });
  const [rows] = await c.execute('SELECT ? AS x', [41]);
  if (rows[0].x !== 41 || !c.connection.stream.encrypted) throw new Error('TLS session failed');
  console.error('tls: ok');
  await c.end();
}

(async () => {
  await session();
  await pool();
  await tls();
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
