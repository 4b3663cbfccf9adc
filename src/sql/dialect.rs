//! sqlparser's MySQL dialect as the session's `sql_mode` reads text: without backslash
//! escapes under `NO_BACKSLASH_ESCAPES`, with `"` quoting names under `ANSI_QUOTES`. The
//! proxy reads a statement's keys and shape the way the node will, so a string that ends
//! early in that mode cannot route or merge as if it went on.

use std::any::TypeId;

use sqlparser::ast::{Expr, Statement};
use sqlparser::dialect::{BindPlaceholderStyle, Dialect, MySqlDialect};
use sqlparser::keywords::Keyword;
use sqlparser::parser::{Parser, ParserError};

use super::lex::Mode;

/// MySQL's dialect in a mode. To sqlparser it is the MySQL dialect (its `dialect_of!`
/// checks), with every behaviour MySQL's has but the two the mode changes.
#[derive(Debug, Clone, Copy, Default)]
pub struct ModeDialect(pub Mode);

macro_rules! same_as_mysql {
    ($($name:ident),* $(,)?) => {
        $(fn $name(&self) -> bool {
            MySqlDialect {}.$name()
        })*
    };
}

impl Dialect for ModeDialect {
    fn dialect(&self) -> TypeId {
        TypeId::of::<MySqlDialect>()
    }

    fn is_delimited_identifier_start(&self, ch: char) -> bool {
        ch == '`' || (self.0.ansi_quotes && ch == '"')
    }

    fn identifier_quote_style(&self, _identifier: &str) -> Option<char> {
        Some('`')
    }

    fn supports_string_literal_backslash_escape(&self) -> bool {
        !self.0.no_backslash_escapes
    }

    fn supports_string_literal_table_alias(&self, explicit: bool) -> bool {
        MySqlDialect {}.supports_string_literal_table_alias(explicit)
    }

    fn is_identifier_start(&self, ch: char) -> bool {
        MySqlDialect {}.is_identifier_start(ch)
    }

    fn is_identifier_part(&self, ch: char) -> bool {
        MySqlDialect {}.is_identifier_part(ch)
    }

    fn ordered_bind_placeholder_style(&self) -> Option<BindPlaceholderStyle> {
        MySqlDialect {}.ordered_bind_placeholder_style()
    }

    fn parse_infix(
        &self,
        parser: &mut Parser,
        expr: &Expr,
        precedence: u8,
    ) -> Option<Result<Expr, ParserError>> {
        MySqlDialect {}.parse_infix(parser, expr, precedence)
    }

    fn parse_statement(&self, parser: &mut Parser) -> Option<Result<Statement, ParserError>> {
        MySqlDialect {}.parse_statement(parser)
    }

    fn is_table_factor_alias(&self, explicit: bool, kw: &Keyword, parser: &mut Parser) -> bool {
        MySqlDialect {}.is_table_factor_alias(explicit, kw, parser)
    }

    fn get_next_precedence(&self, parser: &Parser) -> Option<Result<u8, ParserError>> {
        MySqlDialect {}.get_next_precedence(parser)
    }

    same_as_mysql!(
        supports_string_literal_concatenation,
        ignores_wildcard_escapes,
        supports_numeric_prefix,
        supports_literal_prefix_in_qualified_name,
        supports_bitwise_shift_operators,
        supports_singular_value_keyword,
        supports_multiline_comment_hints,
        require_interval_qualifier,
        supports_limit_comma,
        supports_create_table_select,
        supports_insert_set,
        supports_user_host_grantee,
        supports_table_hints,
        requires_single_line_comment_whitespace,
        supports_hash_comment,
        supports_match_against,
        supports_select_modifiers,
        supports_set_names,
        supports_comma_separated_set_assignments,
        supports_alter_column_position,
        supports_update_order_by,
        supports_data_type_signed_suffix,
        supports_data_type_zerofill_suffix,
        supports_cross_join_constraint,
        supports_double_ampersand_operator,
        supports_binary_kw_as_cast,
        supports_table_partitions,
        supports_comment_optimizer_hint,
        supports_constraint_keyword_without_name,
        supports_key_column_option,
        supports_group_by_with_modifier,
        supports_left_associative_joins_without_parens,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlparser::ast::{SetExpr, Value as V};

    fn where_of(sql: &str, mode: Mode) -> Option<Expr> {
        let mut stmts = Parser::parse_sql(&ModeDialect(mode), sql).ok()?;
        match stmts.remove(0) {
            Statement::Query(q) => match *q.body {
                SetExpr::Select(s) => s.selection,
                _ => None,
            },
            _ => None,
        }
    }

    #[test]
    fn strings_and_names_read_as_the_mode_says() {
        let nbe = Mode {
            no_backslash_escapes: true,
            ansi_quotes: false,
        };
        // `'a\'` is a whole string without backslash escapes; the rest is SQL.
        let w = where_of(r"SELECT 1 FROM t WHERE v = 'a\' OR v = 'b'", nbe).unwrap();
        assert!(matches!(w, Expr::BinaryOp { .. }));
        assert_eq!(w.to_string(), r"v = 'a\' OR v = 'b'");
        // With escapes the same text is one unterminated string.
        assert!(where_of(
            r"SELECT 1 FROM t WHERE v = 'a\' OR v = 'b'",
            Mode::default()
        )
        .is_none());
        let ansi = Mode {
            no_backslash_escapes: false,
            ansi_quotes: true,
        };
        let w = where_of("SELECT 1 FROM t WHERE \"v\" = 'x'", ansi).unwrap();
        let Expr::BinaryOp { left, right, .. } = w else {
            panic!()
        };
        assert!(matches!(*left, Expr::Identifier(_)));
        assert!(matches!(&*right, Expr::Value(v) if v.value == V::SingleQuotedString("x".into())));
        // The MySQL dialect's own forms still parse (LOCK TABLES, DIV, LIMIT a, b).
        for sql in ["LOCK TABLES t READ", "SELECT 7 DIV 2 FROM t LIMIT 1, 2"] {
            assert!(Parser::parse_sql(&ModeDialect(ansi), sql).is_ok(), "{sql}");
        }
    }
}
