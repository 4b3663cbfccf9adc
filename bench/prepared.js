// The queries of a bench as prepared statements (mysql2's `execute`: COM_STMT_PREPARE once,
// COM_STMT_EXECUTE each time), one session, in order:
//   node bench/prepared.js PORT USER PASSWORD SQL USERS QUERIES OUT
// SQL has one `?`, bound to (i * 37) % USERS for the i-th of QUERIES executions; each row
// goes to OUT as a JSON line, and the seconds the executions took to stdout.
'use strict';
const path = require('path');
const mysql = require(path.join(__dirname, '../tests/clients/node/node_modules/mysql2/promise'));
const fs = require('fs');

(async () => {
    const [port, user, password, sql, users, queries, out] = process.argv.slice(2);
    const conn = await mysql.createConnection({
        host: '127.0.0.1', port: Number(port), user, password, database: 'shop',
        decimalNumbers: false, dateStrings: true,
    });
    const lines = [];
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < Number(queries); i++) {
        const [rows] = await conn.execute(sql, [(i * 37) % Number(users)]);
        for (const r of rows) lines.push(JSON.stringify(r));
    }
    const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
    fs.writeFileSync(out, lines.join('\n') + '\n');
    console.log(seconds.toFixed(6));
    await conn.end();
})().catch((e) => {
    console.error(`prepared.js: ${e.message}`);
    process.exit(1);
});
