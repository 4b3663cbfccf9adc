//! The unique keys a DDL statement declares: `CREATE TABLE` (a column's `UNIQUE` or `PRIMARY
//! KEY`, a table's `UNIQUE [KEY] name (...)` or `PRIMARY KEY (...)`), `ALTER TABLE ... ADD`
//! (a column or a constraint) and `CREATE UNIQUE INDEX`. Whether its rule's nodes enforce
//! such a key for the whole table is for the rules to say (`config/unique.rs`).

use sqlparser::ast::{
    AlterTableOperation, ColumnDef, ColumnOption, CreateIndex, CreateTable, Expr, IndexColumn,
    Statement, TableConstraint,
};

use super::table_name;

/// A unique key a statement declares: its table (lower-cased), its name as MariaDB would
/// give it (`PRIMARY`; an unnamed key is named after its first column) and its columns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Declared {
    pub table: String,
    pub name: String,
    pub columns: Vec<String>,
}

fn columns(cols: &[IndexColumn]) -> Vec<String> {
    cols.iter()
        .map(|c| match &c.column.expr {
            Expr::Identifier(i) => i.value.clone(),
            Expr::CompoundIdentifier(p) => p.last().map(|i| i.value.clone()).unwrap_or_default(),
            // A prefix `email(10)` is parsed as a call.
            Expr::Function(f) => f.name.to_string(),
            _ => String::new(),
        })
        .collect()
}

fn named(name: Option<&sqlparser::ast::Ident>, cols: &[String]) -> String {
    name.map(|i| i.value.clone())
        .or_else(|| cols.first().cloned())
        .unwrap_or_default()
}

fn of_constraint(table: &str, c: &TableConstraint, out: &mut Vec<Declared>) {
    match c {
        TableConstraint::PrimaryKey(p) => out.push(Declared {
            table: table.into(),
            name: "PRIMARY".into(),
            columns: columns(&p.columns),
        }),
        TableConstraint::Unique(u) => {
            let cols = columns(&u.columns);
            out.push(Declared {
                table: table.into(),
                name: named(u.index_name.as_ref().or(u.name.as_ref()), &cols),
                columns: cols,
            })
        }
        _ => {}
    }
}

fn of_column(table: &str, c: &ColumnDef, out: &mut Vec<Declared>) {
    for o in &c.options {
        let name = match &o.option {
            ColumnOption::PrimaryKey(_) => "PRIMARY".to_string(),
            ColumnOption::Unique(_) => c.name.value.clone(),
            _ => continue,
        };
        out.push(Declared {
            table: table.into(),
            name,
            columns: vec![c.name.value.clone()],
        });
    }
}

/// The unique keys `stmt` declares (none for any other statement).
pub fn declared(stmt: &Statement) -> Vec<Declared> {
    let mut out = Vec::new();
    match stmt {
        Statement::CreateTable(CreateTable {
            name,
            columns,
            constraints,
            ..
        }) => {
            let t = table_name(name);
            for c in columns {
                of_column(&t, c, &mut out);
            }
            for c in constraints {
                of_constraint(&t, c, &mut out);
            }
        }
        Statement::AlterTable(a) => {
            let t = table_name(&a.name);
            for op in &a.operations {
                match op {
                    AlterTableOperation::AddConstraint { constraint, .. } => {
                        of_constraint(&t, constraint, &mut out)
                    }
                    AlterTableOperation::AddColumn { column_def, .. } => {
                        of_column(&t, column_def, &mut out)
                    }
                    _ => {}
                }
            }
        }
        Statement::CreateIndex(CreateIndex {
            name,
            table_name: on,
            columns: cols,
            unique: true,
            ..
        }) => {
            let cols = columns(cols);
            out.push(Declared {
                table: table_name(on),
                name: name
                    .as_ref()
                    .and_then(|n| n.0.last())
                    .and_then(|p| p.as_ident())
                    .map(|i| i.value.clone())
                    .unwrap_or_else(|| named(None, &cols)),
                columns: cols,
            });
        }
        _ => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(sql: &str) -> Vec<(String, String, Vec<String>)> {
        let p = crate::sql::parse(sql).unwrap_or_else(|e| panic!("{sql}: {e:?}"));
        declared(&p.stmt)
            .into_iter()
            .map(|d| (d.table, d.name, d.columns))
            .collect()
    }

    fn k(t: &str, n: &str, c: &[&str]) -> (String, String, Vec<String>) {
        (
            t.into(),
            n.into(),
            c.iter().map(|c| c.to_string()).collect(),
        )
    }

    #[test]
    fn the_unique_keys_a_statement_declares() {
        assert_eq!(
            keys("CREATE TABLE T_U (user_id INT PRIMARY KEY, email VARCHAR(64) UNIQUE, phone INT, code INT, UNIQUE KEY by_phone (phone, user_id), UNIQUE (code), KEY (phone))"),
            vec![
                k("t_u", "PRIMARY", &["user_id"]),
                k("t_u", "email", &["email"]),
                k("t_u", "by_phone", &["phone", "user_id"]),
                k("t_u", "code", &["code"]),
            ]
        );
        assert_eq!(
            keys("CREATE TABLE t (id INT, e VARCHAR(9), PRIMARY KEY (id, e))"),
            vec![k("t", "PRIMARY", &["id", "e"])]
        );
        assert_eq!(
            keys(
                "ALTER TABLE t_u ADD UNIQUE KEY e2 (email), ADD COLUMN n INT UNIQUE, ADD INDEX (n)"
            ),
            vec![k("t_u", "e2", &["email"]), k("t_u", "n", &["n"])]
        );
        assert_eq!(
            keys("CREATE UNIQUE INDEX ue ON t_u (email)"),
            vec![k("t_u", "ue", &["email"])]
        );
        assert!(keys("CREATE INDEX ie ON t_u (email)").is_empty());
        assert!(keys("SELECT 1").is_empty());
    }
}
