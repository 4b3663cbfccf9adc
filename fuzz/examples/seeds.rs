//! Writes the seed inputs of every target to `fuzz/seeds/<target>/` (committed; libFuzzer
//! grows its working corpus in the ignored `fuzz/corpus/<target>/` from them):
//!
//! ```sh
//! cd fuzz && cargo +nightly run --example seeds
//! ```

use std::path::Path;

use mysql_common::constants::CapabilityFlags;
use mysql_common::proto::MySerialize;
use mysql_common::scramble::{scramble_native, scramble_sha256};
use shardproxy_fuzz::client::{command, frame, handshake_response, login_capabilities};
use shardproxy_fuzz::{node, SALT, STATEMENTS};

fn write(target: &str, name: &str, bytes: &[u8]) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("seeds")
        .join(target);
    std::fs::create_dir_all(&dir).expect("create the seeds directory");
    std::fs::write(dir.join(name), bytes).expect("write a seed");
}

fn query(sql: &str, out: &mut Vec<u8>) {
    command(0x03, sql.as_bytes(), out);
}

fn lenenc_str(s: &[u8], out: &mut Vec<u8>) {
    assert!(s.len() < 251);
    out.push(s.len() as u8);
    out.extend_from_slice(s);
}

/// A COM_STMT_EXECUTE body after the statement id: no cursor, one iteration, the NULL
/// bitmap, and the types when `types` (values: (type, flags, bytes); `None` is NULL).
fn execute_body(values: &[Option<(u8, Vec<u8>)>], types: bool) -> Vec<u8> {
    let mut b = vec![0x00];
    b.extend_from_slice(&1u32.to_le_bytes());
    if values.is_empty() {
        return b;
    }
    let mut bitmap = vec![0u8; values.len().div_ceil(8)];
    for (i, v) in values.iter().enumerate() {
        if v.is_none() {
            bitmap[i / 8] |= 1 << (i % 8);
        }
    }
    b.extend_from_slice(&bitmap);
    b.push(u8::from(types));
    if types {
        for v in values {
            let ty = v.as_ref().map_or(0x06, |(t, _)| *t);
            b.extend_from_slice(&[ty, 0]);
        }
    }
    for (_, bytes) in values.iter().flatten() {
        b.extend_from_slice(bytes);
    }
    b
}

fn longlong(i: i64) -> Option<(u8, Vec<u8>)> {
    Some((0x08, i.to_le_bytes().to_vec()))
}

fn string(s: &str) -> Option<(u8, Vec<u8>)> {
    let mut b = Vec::new();
    lenenc_str(s.as_bytes(), &mut b);
    Some((0xFD, b))
}

fn date(y: u16, m: u8, d: u8) -> Option<(u8, Vec<u8>)> {
    let mut b = vec![4];
    b.extend_from_slice(&y.to_le_bytes());
    b.extend_from_slice(&[m, d]);
    Some((0x0A, b))
}

fn double(f: f64) -> Option<(u8, Vec<u8>)> {
    Some((0x05, f.to_le_bytes().to_vec()))
}

fn packet_seeds() {
    let t = "packet";
    let mut b = Vec::new();
    command(0x0E, b"", &mut b);
    command(0x01, b"", &mut b);
    write(t, "ping_quit", &b);

    for (name, sql) in [
        ("point_select", "SELECT * FROM t_order WHERE user_id = 7"),
        ("scatter_merge", "SELECT status, COUNT(*) FROM t_order GROUP BY status ORDER BY 2 DESC LIMIT 3"),
        ("batch", "BEGIN; INSERT INTO t_order (user_id, status) VALUES (1, 'a'), (2, 'b'); UPDATE t_order SET status = 'c' WHERE user_id IN (1, 2); COMMIT"),
        ("set_autocommit", "SET autocommit = 0, @x = 1, sql_mode = 'ANSI'"),
        ("executable_comment", "/*!40101 SET NAMES utf8mb4 */"),
        ("tier_page", "SELECT txn_id, amount FROM t_txn ORDER BY txn_date DESC LIMIT 100, 20"),
        ("dual_write", "UPDATE t_mv SET v = 2 WHERE id = 5"),
        ("directory_lookup", "SELECT * FROM t_user_dir WHERE uid = 9"),
        ("sequence", "INSERT INTO t_seq (v) VALUES (1), (2), (3)"),
        ("insert_select", "INSERT INTO t_order_item (item_id, order_id, user_id) SELECT order_id, order_id, user_id FROM t_order WHERE status = 'x'"),
        ("join_gather", "SELECT o.order_id, m.name FROM t_order o JOIN t_merchant m ON m.id = o.merchant_id WHERE o.user_id > 3"),
        ("xa", "XA START 'x'; XA END 'x'; XA PREPARE 'x'; XA COMMIT 'x'"),
        ("savepoints", "BEGIN; SAVEPOINT a; DELETE FROM t_account WHERE account_id BETWEEN 10 AND 2000; ROLLBACK TO a; COMMIT"),
        ("locks", "LOCK TABLES t_order READ, t_merchant AS m WRITE; UNLOCK TABLES"),
        ("show", "SHOW TABLES"),
        ("kill", "KILL QUERY 5"),
        ("ddl", "CREATE TABLE t_country (code CHAR(2) PRIMARY KEY, name VARCHAR(64))"),
    ] {
        let mut b = Vec::new();
        query(sql, &mut b);
        write(t, name, &b);
    }

    let mut b = Vec::new();
    command(
        0x16,
        b"SELECT * FROM t_order WHERE user_id = ? AND status = ?",
        &mut b,
    );
    let mut exec = 1u32.to_le_bytes().to_vec();
    exec.extend_from_slice(&execute_body(&[longlong(7), string("paid")], true));
    command(0x17, &exec, &mut b);
    let mut exec = 1u32.to_le_bytes().to_vec();
    exec.extend_from_slice(&execute_body(&[longlong(8), None], false));
    command(0x17, &exec, &mut b);
    command(0x19, &1u32.to_le_bytes(), &mut b);
    write(t, "prepare_execute_close", &b);

    let mut b = Vec::new();
    command(
        0x16,
        b"INSERT INTO t_order (user_id, status) VALUES (?, ?)",
        &mut b,
    );
    let mut long = 1u32.to_le_bytes().to_vec();
    long.extend_from_slice(&1u16.to_le_bytes());
    long.extend_from_slice(b"a long status");
    command(0x18, &long, &mut b);
    let mut exec = 1u32.to_le_bytes().to_vec();
    exec.extend_from_slice(&execute_body(&[longlong(3), string("")], true));
    command(0x17, &exec, &mut b);
    command(0x1A, &1u32.to_le_bytes(), &mut b);
    write(t, "long_data", &b);

    let mut b = Vec::new();
    command(0x02, b"shop", &mut b);
    command(0x04, b"t_order\0", &mut b);
    command(0x1B, &[1, 0], &mut b);
    query("SELECT 1; SELECT 2", &mut b);
    command(0x1B, &[0, 0], &mut b);
    command(0x1F, b"", &mut b);
    command(0x0C, &5u32.to_le_bytes(), &mut b);
    command(0x99, b"", &mut b);
    write(t, "commands", &b);

    let mut change = b"app\0".to_vec();
    change.push(0); // empty auth response
    change.extend_from_slice(b"shop\0");
    change.extend_from_slice(&45u16.to_le_bytes());
    change.extend_from_slice(b"mysql_native_password\0");
    let mut b = Vec::new();
    command(0x11, &change, &mut b);
    query("SELECT DATABASE()", &mut b);
    write(t, "change_user", &b);

    // Over max_allowed_packet (3000 in rules.toml): MySQL's 1153, then the end.
    let mut b = Vec::new();
    let len = 3500usize;
    b.extend_from_slice(&[len as u8, (len >> 8) as u8, 0, 0, 0x03]);
    b.extend_from_slice(&vec![b' '; len - 1]);
    write(t, "too_large", &b);
}

fn handshake_seeds() {
    let t = "handshake_response";
    let caps = login_capabilities();
    let native = |pw: &[u8]| {
        scramble_native(&SALT, pw)
            .map(|s| s.to_vec())
            .unwrap_or_default()
    };
    let framed = |payload: Vec<u8>| {
        let mut b = Vec::new();
        frame(1, &payload, &mut b);
        b
    };
    write(
        t,
        "native",
        &framed(handshake_response(
            "app",
            Some("shop"),
            b"mysql_native_password",
            native(b"secret"),
            caps,
        )),
    );
    let sha = scramble_sha256(&SALT, b"secret")
        .map(|s| s.to_vec())
        .unwrap_or_default();
    write(
        t,
        "caching_sha2",
        &framed(handshake_response(
            "app",
            None,
            b"caching_sha2_password",
            sha,
            caps,
        )),
    );
    write(
        t,
        "no_password",
        &framed(handshake_response(
            "nopw",
            None,
            b"mysql_native_password",
            Vec::new(),
            caps,
        )),
    );
    write(
        t,
        "hashed_user",
        &framed(handshake_response(
            "ro",
            Some("shop"),
            b"mysql_native_password",
            native(b"password"),
            caps,
        )),
    );
    write(
        t,
        "wrong_password",
        &framed(handshake_response(
            "app",
            None,
            b"mysql_native_password",
            native(b"wrong"),
            caps,
        )),
    );
    // Another plugin: switched to mysql_native_password, answered (with a scramble of
    // the wrong salt: the switch's salt is fresh).
    let mut b = framed(handshake_response(
        "app",
        None,
        b"client_ed25519",
        vec![1; 64],
        caps,
    ));
    frame(3, &native(b"secret"), &mut b);
    write(t, "switch", &b);
    // A named plugin and no scramble: asked again.
    let mut b = framed(handshake_response(
        "app",
        None,
        b"caching_sha2_password",
        Vec::new(),
        caps,
    ));
    frame(3, &[], &mut b);
    write(t, "ask_again", &b);
    // An SSLRequest (TLS is not offered here).
    let mut ssl = (caps | CapabilityFlags::CLIENT_SSL)
        .bits()
        .to_le_bytes()
        .to_vec();
    ssl.extend_from_slice(&(1u32 << 24).to_le_bytes());
    ssl.push(45);
    ssl.extend_from_slice(&[0; 23]);
    write(t, "ssl_request", &framed(ssl));
    // The login, then a COM_CHANGE_USER.
    let mut b = framed(handshake_response(
        "nopw",
        None,
        b"mysql_native_password",
        Vec::new(),
        caps,
    ));
    let mut change = vec![0x11];
    change.extend_from_slice(b"app\0");
    let s = native(b"secret");
    change.push(s.len() as u8);
    change.extend_from_slice(&s);
    change.extend_from_slice(b"shop\0");
    change.extend_from_slice(&33u16.to_le_bytes());
    change.extend_from_slice(b"mysql_native_password\0");
    frame(0, &change, &mut b);
    write(t, "change_user", &b);
    // With connection attributes and every capability the server offers.
    let mut payload = Vec::new();
    mysql_common::packets::HandshakeResponse::new(
        Some(native(b"secret")),
        (8, 0, 36),
        Some(&b"app"[..]),
        Some(&b"shop"[..]),
        Some(mysql_common::packets::AuthPlugin::MysqlNativePassword),
        shardproxy::protocol::auth::server_capabilities(false),
        Some(
            [("_client_name".to_string(), "libmysql".to_string())]
                .into_iter()
                .collect(),
        ),
        1 << 24,
    )
    .serialize(&mut payload);
    write(t, "attributes", &framed(payload));
    write(t, "malformed", &framed(vec![0x01, 0x02]));
}

fn stmt_execute_seeds() {
    let t = "stmt_execute";
    for (i, sql) in STATEMENTS.iter().enumerate() {
        let n = node::placeholders(sql);
        let mut values = Vec::new();
        for k in 0..n {
            values.push(match (i, k) {
                (5, 0) => date(2026, 1, 31),
                (5, 1) => date(2026, 12, 1),
                (12, _) => date(2023, 12, 31),
                (11, _) => string("harry"),
                (3, 0) => double(2.5),
                (_, k) if k % 3 == 2 => None,
                (_, k) if k % 2 == 1 => string("paid"),
                (_, k) => longlong(7 + k as i64),
            });
        }
        let mut input = vec![i as u8];
        let body = execute_body(&values, true);
        input.push(0);
        input.push(body.len() as u8);
        input.extend_from_slice(&body);
        // The same again without the types: the ones sent first hold.
        let again = execute_body(&values, false);
        input.push(1);
        input.push(again.len() as u8);
        input.extend_from_slice(&again);
        if n > 0 {
            // Long data for the first parameter, then an execute that uses it.
            let mut long = 0u16.to_le_bytes().to_vec();
            long.extend_from_slice(b"42");
            input.push(2);
            input.push(long.len() as u8);
            input.extend_from_slice(&long);
            input.push(0);
            input.push(body.len() as u8);
            input.extend_from_slice(&body);
            input.push(3);
            input.push(0);
        }
        write(t, &format!("stmt{i:02}"), &input);
    }
}

fn plan_seeds() {
    let t = "plan";
    for (name, sql) in [
        ("point", "SELECT * FROM t_order WHERE user_id = 7"),
        ("in_list", "SELECT order_id FROM t_order WHERE user_id IN (1, 2, 3) AND status <> 'x' ORDER BY order_id DESC LIMIT 5"),
        ("aggregate", "SELECT status, COUNT(*), SUM(amount), AVG(amount), MAX(order_id) FROM t_order GROUP BY status HAVING COUNT(*) > 1 ORDER BY 2"),
        ("distinct", "SELECT COUNT(DISTINCT status) FROM t_order"),
        ("join_same_key", "SELECT o.order_id, i.item_id FROM t_order o JOIN t_order_item i ON i.user_id = o.user_id AND i.order_id = o.order_id WHERE o.user_id = 5"),
        ("join_gather", "SELECT o.order_id, m.name FROM t_order o JOIN t_merchant m ON m.id = o.merchant_id"),
        ("subquery", "SELECT * FROM t_order WHERE user_id IN (SELECT id FROM t_merchant WHERE kind = 'x')"),
        ("union", "SELECT user_id FROM t_order UNION ALL SELECT user_id FROM t_order_item ORDER BY 1 LIMIT 10"),
        ("window", "SELECT status, ROW_NUMBER() OVER (PARTITION BY status ORDER BY order_id) FROM t_order"),
        ("insert_keygen", "INSERT INTO t_order (user_id, status) VALUES (1, 'a'), (2, 'b'), (3, 'c')"),
        ("insert_sequence", "INSERT INTO t_seq (v) VALUES (1), (2), (3)"),
        ("insert_select", "INSERT INTO t_order_item SELECT order_id, order_id, user_id FROM t_order"),
        ("upsert", "INSERT INTO t_order (order_id, user_id, status) VALUES (1, 2, 'x') ON DUPLICATE KEY UPDATE status = VALUES(status)"),
        ("range", "SELECT * FROM t_account WHERE account_id BETWEEN 500 AND 1500 OR account_id > 9000"),
        ("range_string", "SELECT * FROM t_name WHERE name >= 'g' AND name < 'q'"),
        ("range_date", "UPDATE t_day SET v = 1 WHERE day < '2024-02-01'"),
        ("directory", "SELECT * FROM t_tenant_doc WHERE tenant_id IN (42, 43)"),
        ("directory_lookup", "DELETE FROM t_user_dir WHERE uid IN (7, 8, 9)"),
        ("tier_page", "SELECT txn_id, amount FROM t_txn WHERE txn_date >= '2024-06-01' ORDER BY txn_date DESC LIMIT 100, 20"),
        ("tier_poll", "UPDATE t_txn SET amount = 0 WHERE serial_no = 'S1'"),
        ("moving", "UPDATE t_mv SET v = v + 1 WHERE id IN (5, 600)"),
        ("broadcast", "INSERT INTO t_country VALUES ('fr', 'France')"),
        ("session", "SET @x = 1, autocommit = 0, NAMES utf8mb4"),
        ("batch", "BEGIN; UPDATE t_order SET status = 'b' WHERE user_id = 1; COMMIT"),
        ("executable_comment", "/*!40101 SET character_set_client = utf8 */"),
        ("locks", "LOCK TABLES t_order READ, t_merchant m WRITE"),
        ("xa", "XA START 'a'"),
        ("ddl", "ALTER TABLE t_order ADD COLUMN note TEXT"),
        ("show", "SHOW CREATE TABLE t_order"),
        ("cast", "SELECT CAST(user_id AS SIGNED), LAST_INSERT_ID() FROM t_order WHERE user_id = -7 FOR UPDATE"),
    ] {
        write(t, name, sql.as_bytes());
    }
    // Prepared shapes with parameter values after a NUL (tag, value: 1 Int, 6 Bytes, 4 Date).
    let mut b = b"SELECT * FROM t_order WHERE user_id = ? AND status = ?\0".to_vec();
    b.push(1);
    b.extend_from_slice(&7i64.to_le_bytes());
    b.extend_from_slice(&[6, 4]);
    b.extend_from_slice(b"paid");
    write(t, "params_point", &b);
    let mut b = b"SELECT * FROM t_txn WHERE txn_date BETWEEN ? AND ? LIMIT ?\0".to_vec();
    b.push(4);
    b.extend_from_slice(&2025u16.to_le_bytes());
    b.extend_from_slice(&[6, 30, 0, 0, 0]);
    b.push(0);
    b.push(5);
    b.push(20);
    write(t, "params_tier", &b);
    let mut b = b"INSERT INTO t_order (user_id, status) VALUES (?, ?), (?, ?)\0".to_vec();
    for i in 0..4i64 {
        b.push(1);
        b.extend_from_slice(&i.to_le_bytes());
    }
    write(t, "params_insert", &b);
}

fn rules_seeds() {
    let t = "rules";
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    write(
        t,
        "fuzz_rules",
        shardproxy_fuzz::RULES.replace("@PORT@", "3311").as_bytes(),
    );
    for name in ["demo.toml", "docker.toml"] {
        let text =
            std::fs::read(root.join("../rules").join(name)).expect("a rules file of the repo");
        write(t, name.trim_end_matches(".toml"), &text);
    }
    write(
        t,
        "minimal",
        b"version = 2\ndefault_node = \"ds0\"\n[server]\nlisten = \"127.0.0.1:3307\"\nusers = [{ name = \"app\", password = \"app\" }]\n[nodes]\nds0 = \"mysql://root:root@127.0.0.1:3311/shop\"\n",
    );
    write(
        t,
        "moving",
        b"version = 3\ndefault_node = \"ds0\"\n[server]\nlisten = \"127.0.0.1:3307\"\nusers = [{ name = \"app\", password_hash = \"*2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19\" }]\ntransaction_mode = \"best_effort\"\n[nodes]\nds0 = \"mysql://root:root@127.0.0.1:3311/shop\"\nds1 = \"mysql://root:root@127.0.0.1:3312/shop\"\nds2 = \"mysql://root:root@127.0.0.1:3313/shop?pool_max=4\"\n[tables.t]\nrule = \"hash_slot\"\ncolumn = \"id\"\nslots = [{ slots = \"0-511\", node = \"ds0\", to = \"ds2\", step = \"freeze\" }, { slots = \"512-1023\", node = \"ds1\" }]\n[tables.d]\nrule = \"directory\"\ncolumn = \"k\"\nentries = { \"a\" = \"ds1\" }\nmoving = [{ key = \"42\", node = \"ds0\", to = \"ds2\", step = \"read_target\" }]\nlookup = { node = \"ds0\", table = \"dir\", key_column = \"k\", node_column = \"n\", cache_size = 10, ttl_secs = 5 }\nfallback = { rule = \"range\", ranges = [{ below = 10, node = \"ds0\" }, { node = \"ds1\" }] }\n",
    );
}

fn main() {
    packet_seeds();
    handshake_seeds();
    stmt_execute_seeds();
    plan_seeds();
    rules_seeds();
}
