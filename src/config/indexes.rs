//! Global secondary indexes (`[tables.t.indexes.<name>]`): a table of its own, placed by the
//! indexed value's hash, that maps each value of a column to the shard keys of the rows that
//! hold it, so a read by that column goes to the nodes of those rows only, and a UNIQUE one
//! holds each value once over every node.
//!
//! The index table has three columns: `v_hash` (the value as the proxy compares it: see
//! [`GlobalIndex::hash_of`]), the indexed column and the base table's shard key, both typed
//! as in the base table. It is a `hash_slot` table on `v_hash` declared in the rules like any
//! other (so it moves like any other); its primary key is `(v_hash)` for a unique index,
//! `(v_hash, <shard key>)` otherwise. A NULL value is not indexed (MySQL's unique keys hold
//! any number of NULLs).

use std::collections::BTreeMap;

use mysql_common::value::Value;
use serde::Deserialize;

use crate::routing::weights::Weights;
use crate::routing::TableRule;

/// `[tables.t.indexes.<name>]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct IndexSection {
    /// The indexed column (default: the index's name).
    pub(super) column: Option<String>,
    #[serde(default)]
    pub(super) unique: bool,
    /// The index table (default: `<table>_<name>_gsi`).
    pub(super) table: Option<String>,
    /// "integer" or "string" (default): how values compare.
    pub(super) kind: Option<String>,
    /// A string column's collation when it is not a binary one (`utf8mb4_general_ci`):
    /// values are compared by its weights, read from a node (`crate::routing::weights`).
    pub(super) collation: Option<String>,
    /// "write_only" (default: every write keeps it, no read uses it, uniqueness is not
    /// enforced yet) or "public" (built: reads use it, UNIQUE is enforced).
    pub(super) state: Option<String>,
    /// An INSERT that leaves the column out stores NULL there (no entry): what CREATE
    /// read of the column's default.
    #[serde(default)]
    pub(super) default_null: bool,
}

/// How an indexed column's values compare, so that values equal to MariaDB have one hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IndexKind {
    /// An integer column: `'012'`, `12` and `12.0` are the integer 12.
    Integer,
    /// A string column in a binary collation (`*_bin`, `binary`): equal strings are equal
    /// bytes but for trailing spaces, which PAD SPACE collations ignore (the hash drops
    /// them; a NO PAD column's values that differ only there share a hash and are told
    /// apart by the index table's own comparison).
    Bytes,
    /// A string column in another collation: equal strings are those of equal weights in
    /// it (case, accents, trailing spaces), as read from a node.
    Collated(String),
}

/// A global secondary index of a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GlobalIndex {
    /// The index's name (as in `SHOW GLOBAL INDEXES`, and in a duplicate's 1062).
    pub name: String,
    /// The base table (lower-cased).
    pub table: String,
    /// The indexed column (lower-cased).
    pub column: String,
    /// The base table's shard key (lower-cased).
    pub shard_column: String,
    pub unique: bool,
    pub kind: IndexKind,
    /// Reads use it and uniqueness is enforced (the index has been built).
    pub public: bool,
    /// The index table (lower-cased).
    pub index_table: String,
    /// A row that leaves the column out holds NULL (its default), so it has no entry.
    pub default_null: bool,
}

/// The hash column of every index table.
pub const HASH_COLUMN: &str = "v_hash";

/// The longest key kept as it is in `v_hash`; a longer one is its SHA-256, padded to one
/// byte more (so no short key is ever equal to a long one's): the primary key of `v_hash`
/// and a shard key stays within InnoDB's 3,072 bytes.
const KEPT: usize = 255;

/// A hash as a literal the index table's `v_hash` takes (`_binary X'..'`), through the
/// proxy's one literal writer.
pub fn hash_literal(h: &[u8]) -> String {
    let mut s = String::new();
    crate::sql::write::string(&mut s, h, "binary");
    s
}

fn bounded(key: Vec<u8>) -> Vec<u8> {
    use sha2::Digest;
    if key.len() <= KEPT {
        return key;
    }
    let mut d = sha2::Sha256::digest(&key).to_vec();
    d.resize(KEPT + 1, 0);
    d
}

impl GlobalIndex {
    /// The value as the index compares it (the index table's `v_hash`, the key its rows are
    /// placed by), or why it has none. `charset` is the connection's character set, in which
    /// a string value arrives. `read`: a value a WHERE compares the column with (a number
    /// compared with a string column matches many texts: no single hash), rather than one
    /// written into it.
    pub fn hash_of(
        &self,
        v: &Value,
        charset: &str,
        read: bool,
        weights: Option<&Weights>,
    ) -> Result<Vec<u8>, String> {
        self.key_of(v, charset, read, weights).map(bounded)
    }

    fn key_of(
        &self,
        v: &Value,
        charset: &str,
        read: bool,
        weights: Option<&Weights>,
    ) -> Result<Vec<u8>, String> {
        match &self.kind {
            IndexKind::Integer => match v {
                Value::NULL => Err("NULL is not indexed".into()),
                Value::Int(_) | Value::UInt(_) => {
                    Ok(crate::value::text_form(v).unwrap_or_default())
                }
                Value::Bytes(b) => {
                    if let Some(a) = crate::value::integer_alias(v) {
                        return Ok(crate::value::text_form(&a).unwrap_or_default());
                    }
                    let text = std::str::from_utf8(b).map_err(|_| "not an integer".to_string())?;
                    match text.parse::<i128>() {
                        Ok(i) => Ok(i.to_string().into_bytes()),
                        Err(_) => Err(format!(
                            "`{}` is not an integer value of `{}`",
                            String::from_utf8_lossy(b),
                            self.column
                        )),
                    }
                }
                _ => Err(format!("not an integer value of `{}`", self.column)),
            },
            IndexKind::Bytes | IndexKind::Collated(_) => {
                let b = match v {
                    Value::NULL => return Err("NULL is not indexed".into()),
                    Value::Bytes(b) => b.clone(),
                    _ if read => {
                        return Err(format!(
                            "a number compared with the string column `{}` matches many texts",
                            self.column
                        ))
                    }
                    other => crate::value::text_form(other).unwrap_or_default(),
                };
                let utf8 = matches!(
                    charset.to_ascii_lowercase().as_str(),
                    "utf8" | "utf8mb3" | "utf8mb4"
                );
                let text = match std::str::from_utf8(&b) {
                    Ok(t) if utf8 || b.is_ascii() => t,
                    _ => {
                        return Err(format!(
                            "a value of `{}` not in UTF-8 (the connection's character set is {charset})",
                            self.column
                        ))
                    }
                };
                match (&self.kind, weights) {
                    (IndexKind::Collated(_), Some(w)) => Ok(w.key(text)),
                    (IndexKind::Collated(c), None) => {
                        Err(format!("the weights of {c} are not read"))
                    }
                    _ => Ok(text.trim_end_matches(' ').as_bytes().to_vec()),
                }
            }
        }
    }

    /// The collation whose weights [`GlobalIndex::hash_of`] needs, if any.
    pub fn collation(&self) -> Option<&str> {
        match &self.kind {
            IndexKind::Collated(c) => Some(c),
            _ => None,
        }
    }

    /// The index table's definition, given the base table's column definitions as `SHOW
    /// CREATE TABLE` writes them (`` `email` varchar(64) COLLATE utf8mb4_bin DEFAULT NULL ``
    /// without what makes them nullable, default or generated).
    pub fn create_sql(&self, column_type: &str, key_type: &str) -> String {
        let q = crate::sql::write::quoted;
        let key = if self.unique {
            format!("PRIMARY KEY ({})", q(HASH_COLUMN))
        } else {
            format!(
                "PRIMARY KEY ({}, {})",
                q(HASH_COLUMN),
                q(&self.shard_column)
            )
        };
        format!(
            "CREATE TABLE IF NOT EXISTS {} ({} VARBINARY(256) NOT NULL, {} {column_type} NOT NULL, {} {key_type} NOT NULL, {key})",
            q(&self.index_table),
            q(HASH_COLUMN),
            q(&self.column),
            q(&self.shard_column),
        )
    }
}

/// The indexes of one table's section, checked against its rule; the index tables' own
/// rules are checked once every table is read ([`check_index_tables`]).
pub(super) fn table_indexes(
    table: &str,
    rule: &TableRule,
    sections: &BTreeMap<String, IndexSection>,
) -> Result<Vec<GlobalIndex>, String> {
    let table = table.to_ascii_lowercase();
    let Some(shard) = rule.column() else {
        return Err(format!(
            "a global index needs a table sharded by a column; rule \"{}\" has none",
            rule.kind()
        ));
    };
    if !matches!(rule, TableRule::HashSlot { .. } | TableRule::Range { .. }) {
        return Err(format!(
            "global indexes are kept for hash_slot and range tables only, not \"{}\"",
            rule.kind()
        ));
    }
    let mut out = Vec::new();
    for (name, s) in sections {
        let err = |m: String| format!("index `{name}`: {m}");
        let column = s.column.as_deref().unwrap_or(name).to_ascii_lowercase();
        if column.eq_ignore_ascii_case(shard) {
            return Err(err(format!(
                "`{column}` is the shard key: reads by it already go to its node"
            )));
        }
        let kind = match s.kind.as_deref().unwrap_or("string") {
            "integer" if s.collation.is_some() => {
                return Err(err("an integer index has no collation".into()))
            }
            "integer" => IndexKind::Integer,
            "string" => match s.collation.as_deref() {
                Some(c) if !c.to_ascii_lowercase().ends_with("_bin") => {
                    IndexKind::Collated(c.to_ascii_lowercase())
                }
                _ => IndexKind::Bytes,
            },
            other => {
                return Err(err(format!(
                    "kind \"{other}\" (expected \"integer\" or \"string\")"
                )))
            }
        };
        let public = match s.state.as_deref().unwrap_or("write_only") {
            "write_only" => false,
            "public" => true,
            other => {
                return Err(err(format!(
                    "state \"{other}\" (expected \"write_only\" or \"public\")"
                )))
            }
        };
        if out.iter().any(|i: &GlobalIndex| i.column == column) {
            return Err(err(format!("a second index on `{column}`")));
        }
        out.push(GlobalIndex {
            name: name.clone(),
            table: table.clone(),
            column,
            shard_column: shard.to_ascii_lowercase(),
            unique: s.unique,
            kind,
            public,
            index_table: s
                .table
                .clone()
                .unwrap_or_else(|| format!("{table}_{name}_gsi"))
                .to_ascii_lowercase(),
            default_null: s.default_null,
        });
    }
    Ok(out)
}

/// Each index table must be a `hash_slot` table on `v_hash` of its own, without indexes.
pub(super) fn check_index_tables(
    tables: &std::collections::HashMap<String, TableRule>,
    indexes: &std::collections::HashMap<String, Vec<GlobalIndex>>,
) -> Result<(), String> {
    let mut seen: Vec<&str> = Vec::new();
    for list in indexes.values() {
        for i in list {
            let at = format!("table `{}`, index `{}`", i.table, i.name);
            match tables.get(&i.index_table) {
                Some(TableRule::HashSlot { column, map })
                    if column.eq_ignore_ascii_case(HASH_COLUMN) && map.salt().is_none() => {}
                Some(_) => {
                    return Err(format!(
                        "{at}: its index table `{}` must be a hash_slot table on `{HASH_COLUMN}`, without salted keys",
                        i.index_table
                    ))
                }
                None => {
                    return Err(format!(
                        "{at}: its index table `{}` has no [tables.{}] (rule = \"hash_slot\", column = \"{HASH_COLUMN}\", its slots): CREATE GLOBAL INDEX writes both",
                        i.index_table, i.index_table
                    ))
                }
            }
            if indexes.contains_key(&i.index_table) {
                return Err(format!(
                    "{at}: an index table cannot have indexes of its own"
                ));
            }
            if seen.contains(&i.index_table.as_str()) {
                return Err(format!(
                    "{at}: the index table `{}` serves another index too",
                    i.index_table
                ));
            }
            seen.push(&i.index_table);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::test_topology;

    const RULES: &str = r#"
[tables.t_user]
rule = "hash_slot"
column = "user_id"
slots = [{ slots = "0-511", node = "ds0" }, { slots = "512-1023", node = "ds1" }]
[tables.t_user.indexes.email]
unique = true
state = "public"
[tables.t_user.indexes.phone]
kind = "integer"
[tables.t_user.indexes.name]
collation = "utf8mb4_general_ci"
[tables.t_user_name_gsi]
rule = "hash_slot"
column = "v_hash"
slots = [{ slots = "0-1023", node = "ds0" }]
[tables.t_user_email_gsi]
rule = "hash_slot"
column = "v_hash"
slots = [{ slots = "0-1023", node = "ds1" }]
[tables.t_user_phone_gsi]
rule = "hash_slot"
column = "v_hash"
slots = [{ slots = "0-1023", node = "ds0" }]
"#;

    #[test]
    fn indexes_are_read_with_their_tables_and_states() {
        let topo = test_topology(1, 2, RULES);
        let ix = topo.indexes_of("T_USER").expect("indexes");
        assert_eq!(ix.len(), 3);
        let email = ix.iter().find(|i| i.name == "email").expect("email");
        assert!(email.unique && email.public && email.kind == IndexKind::Bytes);
        let name = ix.iter().find(|i| i.name == "name").expect("name");
        assert_eq!(name.kind, IndexKind::Collated("utf8mb4_general_ci".into()));
        assert_eq!(email.index_table, "t_user_email_gsi");
        assert_eq!(email.shard_column, "user_id");
        let phone = ix.iter().find(|i| i.name == "phone").expect("phone");
        assert!(!phone.unique && !phone.public && phone.kind == IndexKind::Integer);
        assert!(topo.indexes_of("t_user_email_gsi").is_none());
    }

    fn refused(rules: &str) -> String {
        let s = format!(
            "version = 1\ndefault_node = \"ds0\"\n[server]\nlisten = \"127.0.0.1:3307\"\n\
             users = [{{ name = \"app\", password = \"app\" }}]\n[nodes]\n\
             ds0 = \"mysql://root:root@127.0.0.1:3311/shop\"\n{rules}"
        );
        match crate::config::parse(&s, "t.toml") {
            Ok(_) => panic!("accepted:\n{rules}"),
            Err(e) => e.message,
        }
    }

    #[test]
    fn an_index_without_its_table_or_on_the_shard_key_is_refused() {
        let no_table = refused(
            "[tables.t]\nrule = \"hash_slot\"\ncolumn = \"id\"\nslots = [{ slots = \"0-1023\", node = \"ds0\" }]\n[tables.t.indexes.email]\n",
        );
        assert!(no_table.contains("t_email_gsi"), "{no_table}");
        let on_key = refused(
            "[tables.t]\nrule = \"hash_slot\"\ncolumn = \"id\"\nslots = [{ slots = \"0-1023\", node = \"ds0\" }]\n[tables.t.indexes.id]\n",
        );
        assert!(on_key.contains("shard key"), "{on_key}");
        let broadcast = refused("[tables.t]\nrule = \"broadcast\"\n[tables.t.indexes.email]\n");
        assert!(
            broadcast.contains("`indexes` does not apply"),
            "{broadcast}"
        );
        let wrong_column = refused(
            "[tables.t]\nrule = \"hash_slot\"\ncolumn = \"id\"\nslots = [{ slots = \"0-1023\", node = \"ds0\" }]\n[tables.t.indexes.email]\n\
             [tables.t_email_gsi]\nrule = \"hash_slot\"\ncolumn = \"email\"\nslots = [{ slots = \"0-1023\", node = \"ds0\" }]\n",
        );
        assert!(wrong_column.contains("v_hash"), "{wrong_column}");
    }

    fn index(kind: IndexKind) -> GlobalIndex {
        GlobalIndex {
            name: "e".into(),
            table: "t".into(),
            column: "e".into(),
            shard_column: "id".into(),
            unique: true,
            kind,
            public: true,
            index_table: "t_e_gsi".into(),
            default_null: false,
        }
    }

    #[test]
    fn equal_values_hash_alike() {
        let i = index(IndexKind::Integer);
        let h = |v: Value| i.hash_of(&v, "utf8mb4", true, None);
        assert_eq!(h(Value::Int(12)), Ok(b"12".to_vec()));
        assert_eq!(h(Value::Bytes(b"012".to_vec())), Ok(b"12".to_vec()));
        assert_eq!(h(Value::Bytes(b"12.0".to_vec())), Ok(b"12".to_vec()));
        assert_eq!(h(Value::UInt(12)), Ok(b"12".to_vec()));
        assert!(h(Value::Bytes(b"12abc".to_vec())).is_err());
        assert!(h(Value::NULL).is_err());

        let s = index(IndexKind::Bytes);
        let h = |v: &[u8], cs: &str| s.hash_of(&Value::Bytes(v.to_vec()), cs, true, None);
        assert_eq!(h(b"a@x  ", "utf8mb4"), Ok(b"a@x".to_vec()));
        assert_eq!(h(b"a@x", "latin1"), Ok(b"a@x".to_vec()));
        assert_eq!(h("é".as_bytes(), "utf8mb4"), Ok("é".as_bytes().to_vec()));
        assert!(h(&[0xe9], "latin1").is_err());
        assert!(h(&[0xe9], "utf8mb4").is_err());
        assert!(s.hash_of(&Value::Int(5), "utf8mb4", true, None).is_err());
        assert_eq!(
            s.hash_of(&Value::Int(5), "utf8mb4", false, None),
            Ok(b"5".to_vec())
        );
        let c = index(IndexKind::Collated("utf8mb4_general_ci".into()));
        assert!(c
            .hash_of(&Value::Bytes(b"a".to_vec()), "utf8mb4", true, None)
            .is_err());
        // A long value: its digest, one byte longer than any key kept as it is.
        let long = |c: u8| Value::Bytes(vec![c; 300]);
        let a = s.hash_of(&long(b'a'), "utf8mb4", false, None).unwrap();
        assert_eq!(a.len(), 256);
        assert_ne!(a, s.hash_of(&long(b'b'), "utf8mb4", false, None).unwrap());
        assert_eq!(
            s.hash_of(&Value::Bytes(vec![b'a'; 255]), "utf8mb4", false, None)
                .unwrap()
                .len(),
            255
        );
    }

    #[test]
    fn the_index_table_is_keyed_by_the_hash_and_for_a_plain_index_the_shard_key() {
        let mut i = index(IndexKind::Bytes);
        let sql = i.create_sql("varchar(64) COLLATE utf8mb4_bin", "int(11)");
        assert!(sql.ends_with("PRIMARY KEY (`v_hash`))"), "{sql}");
        assert!(
            sql.contains("`e` varchar(64) COLLATE utf8mb4_bin NOT NULL"),
            "{sql}"
        );
        i.unique = false;
        let sql = i.create_sql("bigint(20)", "int(11)");
        assert!(sql.ends_with("PRIMARY KEY (`v_hash`, `id`))"), "{sql}");
    }
}
