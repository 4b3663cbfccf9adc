//! Tests of the range rule's keys and map.

use super::*;
use std::ops::Bound::{Excluded, Included, Unbounded};

fn int(i: i128) -> RangeKey {
    RangeKey::Int(i)
}

fn text(s: &str) -> RangeKey {
    RangeKey::Text(s.into())
}

fn bytes(s: &str) -> Value {
    Value::Bytes(s.as_bytes().to_vec())
}

fn tv(s: &str) -> toml::Value {
    toml::Value::String(s.into())
}

/// `[-inf, 100) -> 0, [100, 200) -> 1, [200, 300) -> 0, [300, +inf) -> 2`.
fn ints() -> RangeMap {
    RangeMap::new(
        KeyKind::Int,
        vec![
            (Some(int(100)), 0),
            (Some(int(200)), 1),
            (Some(int(300)), 0),
            (None, 2),
        ],
    )
    .unwrap()
}

fn dates() -> RangeMap {
    let b = |s: &str| Some(KeyKind::Date.bound(&tv(s)).unwrap());
    RangeMap::new(
        KeyKind::Date,
        vec![
            (b("2024-01-01"), 0),
            (b("2024-07-01 12:00:00"), 1),
            (None, 2),
        ],
    )
    .unwrap()
}

fn nodes_for(m: &RangeMap, lo: Bound<RangeKey>, hi: Bound<RangeKey>) -> Vec<usize> {
    m.nodes_for(&Ranges::from_bounds(lo, hi))
}

#[test]
fn int_keys() {
    let k = KeyKind::Int;
    assert_eq!(k.key_of(&Value::Int(-7)), Some(int(-7)));
    assert_eq!(k.key_of(&Value::UInt(u64::MAX)), Some(int(u64::MAX.into())));
    assert_eq!(k.key_of(&bytes("42")), Some(int(42)));
    assert_eq!(k.key_of(&bytes("-7")), Some(int(-7)));
    assert_eq!(k.key_of(&bytes("007")), Some(int(7)));
    assert_eq!(
        k.key_of(&bytes("18446744073709551615")),
        Some(int(u64::MAX.into()))
    );
    assert_eq!(k.key_of(&bytes("18446744073709551616")), None);
    assert_eq!(k.key_of(&bytes("3.50")), None);
    assert_eq!(k.key_of(&bytes("42abc")), None);
    assert_eq!(k.key_of(&bytes(" 42")), None);
    assert_eq!(k.key_of(&bytes("")), None);
    assert_eq!(k.key_of(&Value::Bytes(vec![0xff, b'1'])), None);
    assert_eq!(k.key_of(&Value::Double(42.0)), None);
    assert_eq!(k.key_of(&Value::Float(42.0)), None);
    assert_eq!(k.key_of(&Value::Date(2024, 1, 1, 0, 0, 0, 0)), None);
    assert_eq!(k.key_of(&Value::NULL), None);
}

#[test]
fn date_keys_are_fixed_width() {
    let k = KeyKind::Date;
    let midnight = Some(text("2024-01-31 00:00:00.000000"));
    assert_eq!(k.key_of(&bytes("2024-01-31")), midnight);
    assert_eq!(k.key_of(&bytes("2024-01-31 00:00:00")), midnight);
    assert_eq!(k.key_of(&Value::Date(2024, 1, 31, 0, 0, 0, 0)), midnight);
    assert_eq!(
        k.key_of(&bytes("2024-01-31 13:05:09.5")),
        Some(text("2024-01-31 13:05:09.500000"))
    );
    assert_eq!(
        k.key_of(&bytes("2024-01-31 13:05:09.123456")),
        Some(text("2024-01-31 13:05:09.123456"))
    );
    assert_eq!(
        k.key_of(&Value::Date(2024, 1, 31, 13, 5, 9, 7)),
        Some(text("2024-01-31 13:05:09.000007"))
    );
    assert_eq!(
        k.key_of(&bytes("2024-02-29")),
        Some(text("2024-02-29 00:00:00.000000"))
    );
    // Keys order as time does.
    assert!(k.key_of(&bytes("2024-01-31 09:00:00")) < k.key_of(&bytes("2024-01-31 10:00:00")));
    assert!(k.key_of(&bytes("999-01-01")).is_none());
    for bad in [
        "2023-02-29",
        "2024-13-01",
        "2024-00-10",
        "2024-04-31",
        "2024-01-00",
        "0000-00-00",
        "2024-01-01 24:00:00",
        "2024-01-01 10:60:00",
        "2024-01-01 10:00:60",
        "2024-01-01 10:00",
        "2024-01-01T10:00:00",
        "2024-01-01 10:00:00.",
        "2024-01-01 10:00:00.1234567",
        "2024-01-01 ",
        "2024-1-1",
        "20240101",
        "yesterday",
        "2024-01-01 10:00:0x",
    ] {
        assert_eq!(k.key_of(&bytes(bad)), None, "{bad}");
    }
    assert_eq!(k.key_of(&Value::Date(0, 0, 0, 0, 0, 0, 0)), None);
    assert_eq!(k.key_of(&Value::Date(2024, 2, 30, 0, 0, 0, 0)), None);
    assert_eq!(k.key_of(&Value::Date(2024, 1, 1, 0, 0, 0, 1_000_000)), None);
    assert_eq!(k.key_of(&Value::Int(20240101)), None);
    assert_eq!(k.key_of(&Value::Time(false, 0, 1, 0, 0, 0)), None);
}

#[test]
fn text_keys_fold_case_and_trailing_spaces() {
    let k = KeyKind::Text;
    assert_eq!(k.key_of(&bytes("abc")), Some(text("ABC")));
    assert_eq!(k.key_of(&bytes("AbC  ")), Some(text("ABC")));
    assert_eq!(k.key_of(&bytes("  a b ")), Some(text("  A B")));
    assert_eq!(k.key_of(&bytes("abc\t")), Some(text("ABC\t")));
    // Outside ASCII collations disagree with byte order: no key.
    assert_eq!(k.key_of(&bytes("straße")), None);
    assert_eq!(k.key_of(&bytes("émile")), None);
    assert_eq!(k.key_of(&bytes("")), Some(text("")));
    assert_eq!(k.key_of(&Value::Bytes(vec![b'a', 0xff])), None);
    assert_eq!(k.key_of(&Value::Int(1)), None);
    assert_eq!(k.key_of(&Value::UInt(1)), None);
    assert_eq!(k.key_of(&Value::Date(2024, 1, 1, 0, 0, 0, 0)), None);
    assert_eq!(k.key_of(&Value::NULL), None);
    // Bounds fold the same way.
    assert_eq!(k.bound(&tv("m ")), Ok(text("M")));
}

#[test]
fn bounds_from_the_rules_file() {
    assert_eq!(KeyKind::Int.bound(&toml::Value::Integer(-5)), Ok(int(-5)));
    assert_eq!(
        KeyKind::Date.bound(&tv("2024-01-01")),
        Ok(text("2024-01-01 00:00:00.000000"))
    );
    assert_eq!(
        KeyKind::Date.bound(&tv("2024-01-01 06:30:00")),
        Ok(text("2024-01-01 06:30:00.000000"))
    );
    let native: toml::Value = toml::from_str::<toml::Table>(
        "a = 2024-03-01\nb = 2024-03-01T06:00:00\nc = 2024-03-01T06:00:00Z",
    )
    .unwrap()
    .into();
    assert_eq!(
        KeyKind::Date.bound(&native["a"]),
        Ok(text("2024-03-01 00:00:00.000000"))
    );
    assert_eq!(
        KeyKind::Date.bound(&native["b"]),
        Ok(text("2024-03-01 06:00:00.000000"))
    );
    assert!(KeyKind::Date.bound(&native["c"]).is_err());
    assert_eq!(KeyKind::of_bound(&native["a"]), Ok(KeyKind::Date));
    let err = KeyKind::Date.bound(&tv("2024-02-30")).unwrap_err();
    assert!(
        err.contains("2024-02-30") && err.contains("not a valid date"),
        "{err}"
    );
    assert!(KeyKind::Date.bound(&tv("2024-01-01 10:00:00.5")).is_err());
    let err = KeyKind::Int.bound(&tv("42")).unwrap_err();
    assert!(
        err.contains("a string") && err.contains("integers"),
        "{err}"
    );
    assert!(KeyKind::Text.bound(&toml::Value::Integer(1)).is_err());
    assert!(KeyKind::Int.bound(&toml::Value::Float(1.5)).is_err());

    assert_eq!(
        KeyKind::of_bound(&toml::Value::Integer(1)),
        Ok(KeyKind::Int)
    );
    assert_eq!(KeyKind::of_bound(&tv("2024-01-01")), Ok(KeyKind::Date));
    assert_eq!(
        KeyKind::of_bound(&tv("2024-01-01 10:00:00")),
        Ok(KeyKind::Date)
    );
    // Date-looking but invalid: a Date bound, which `bound` then rejects.
    assert_eq!(KeyKind::of_bound(&tv("2024-02-30")), Ok(KeyKind::Date));
    assert_eq!(KeyKind::of_bound(&tv("m")), Ok(KeyKind::Text));
    assert_eq!(KeyKind::of_bound(&tv("2024")), Ok(KeyKind::Text));
    assert_eq!(KeyKind::of_bound(&tv("42")), Ok(KeyKind::Text));
    let err = KeyKind::of_bound(&toml::Value::Float(1.5)).unwrap_err();
    assert!(err.contains("1.5") && err.contains("a float"), "{err}");
    assert!(KeyKind::of_bound(&toml::Value::Boolean(true)).is_err());
}

#[test]
fn keys_print_as_sql_literals() {
    assert_eq!(key_sql(&int(-42)), "-42");
    assert_eq!(key_sql(&int(u64::MAX.into())), "18446744073709551615");
    assert_eq!(key_sql(&text("ABC")), "'ABC'");
    assert_eq!(
        key_sql(&text("2024-01-01 00:00:00.000000")),
        "'2024-01-01 00:00:00.000000'"
    );
    assert_eq!(key_sql(&text(r"O'B\X")), "_utf8mb4 X'4F27425C58'");
    assert_eq!(key_sql(&text("A\0B")), "_utf8mb4 X'410042'");
}

#[test]
fn validation_errors_name_the_entry() {
    let err = |kind, e| RangeMap::new(kind, e).unwrap_err();
    let e = err(KeyKind::Int, vec![]);
    assert!(e.contains("at least one range"), "{e}");
    let e = err(
        KeyKind::Int,
        vec![(Some(int(10)), 0), (Some(int(5)), 1), (None, 2)],
    );
    assert!(
        e.contains("range 2's bound 5 is less than range 1's bound 10"),
        "{e}"
    );
    let e = err(
        KeyKind::Int,
        vec![(Some(int(10)), 0), (Some(int(10)), 1), (None, 2)],
    );
    assert!(
        e.contains("range 2's bound 10 is equal to range 1's bound 10"),
        "{e}"
    );
    let e = err(
        KeyKind::Text,
        vec![(Some(text("M")), 0), (Some(text("M")), 1), (None, 2)],
    );
    assert!(e.contains("case-insensitively"), "{e}");
    let e = err(KeyKind::Int, vec![(Some(int(10)), 0), (Some(int(20)), 1)]);
    assert!(
        e.contains("the last range (range 2, below 20) must have no `below`"),
        "{e}"
    );
    let e = err(KeyKind::Int, vec![(None, 0), (Some(int(20)), 1), (None, 2)]);
    assert!(e.contains("range 1 of 3 has no `below` bound"), "{e}");
    let e = err(KeyKind::Int, vec![(Some(int(1)), 0), (None, 1), (None, 2)]);
    assert!(e.contains("range 2 of 3 has no `below` bound"), "{e}");
    let e = err(KeyKind::Int, vec![(Some(text("M")), 0), (None, 1)]);
    assert!(
        e.contains("range 1's bound 'M' is not one of this rule's integers"),
        "{e}"
    );
    let e = err(
        KeyKind::Text,
        vec![(Some(text("M")), 0), (Some(int(5)), 1), (None, 2)],
    );
    assert!(
        e.contains("range 2's bound 5 is not one of this rule's strings"),
        "{e}"
    );
    let e = err(
        KeyKind::Date,
        vec![(Some(text("2024-01-01")), 0), (None, 1)],
    );
    assert!(e.contains("not one of this rule's dates"), "{e}");
    // One open-ended range is the whole domain.
    let one = RangeMap::new(KeyKind::Int, vec![(None, 3)]).unwrap();
    assert_eq!(one.node_of(&int(i128::MIN)), 3);
    assert_eq!(one.nodes_for(&Ranges::all()), vec![3]);
    assert_eq!(one.describe(&|n| format!("ds{n}")), "[-inf, +inf) -> ds3");
}

#[test]
fn node_of_at_and_around_each_boundary() {
    let m = ints();
    for (k, node) in [
        (i128::MIN, 0),
        (-1, 0),
        (99, 0),
        (100, 1),
        (101, 1),
        (199, 1),
        (200, 0),
        (299, 0),
        (300, 2),
        (301, 2),
        (i128::MAX, 2),
    ] {
        assert_eq!(m.node_of(&int(k)), node, "{k}");
    }
    let d = dates();
    let at = |s: &str| d.node_of(&KeyKind::Date.key_of(&bytes(s)).unwrap());
    assert_eq!(at("2023-12-31 23:59:59.999999"), 0);
    assert_eq!(at("2024-01-01"), 1);
    assert_eq!(at("2024-07-01"), 1);
    assert_eq!(at("2024-07-01 11:59:59"), 1);
    assert_eq!(at("2024-07-01 12:00:00"), 2);
    assert_eq!(
        d.node_of(
            &KeyKind::Date
                .key_of(&Value::Date(2024, 7, 1, 12, 0, 0, 0))
                .unwrap()
        ),
        2
    );
}

#[test]
fn nodes_for_sets_of_keys() {
    let m = ints();
    let pts = |v: &[i128]| {
        v.iter()
            .fold(Ranges::empty(), |acc, p| acc.union(&Ranges::point(int(*p))))
    };
    assert_eq!(m.nodes_for(&pts(&[5])), vec![0]);
    assert_eq!(m.nodes_for(&pts(&[150])), vec![1]);
    assert_eq!(m.nodes_for(&pts(&[5, 250])), vec![0]);
    assert_eq!(m.nodes_for(&pts(&[5, 300])), vec![0, 2]);
    assert_eq!(m.nodes_for(&pts(&[100, 299, 1000])), vec![0, 1, 2]);
    assert_eq!(m.nodes_for(&Ranges::empty()), Vec::<usize>::new());
    assert_eq!(m.nodes_for(&Ranges::all()), vec![0, 1, 2]);
    // Half-open ranges.
    assert_eq!(nodes_for(&m, Unbounded, Excluded(int(100))), vec![0]);
    assert_eq!(nodes_for(&m, Unbounded, Included(int(100))), vec![0, 1]);
    assert_eq!(nodes_for(&m, Included(int(300)), Unbounded), vec![2]);
    assert_eq!(nodes_for(&m, Included(int(299)), Unbounded), vec![0, 2]);
    assert_eq!(
        nodes_for(&m, Included(int(200)), Excluded(int(300))),
        vec![0]
    );
    // Integers are discrete: `> 299` is `>= 300`, `< 101` is `<= 100`.
    assert_eq!(nodes_for(&m, Excluded(int(299)), Unbounded), vec![2]);
    assert_eq!(nodes_for(&m, Excluded(int(298)), Unbounded), vec![0, 2]);
    assert_eq!(nodes_for(&m, Unbounded, Excluded(int(101))), vec![0, 1]);
    assert_eq!(
        nodes_for(&m, Excluded(int(i128::MAX - 1)), Unbounded),
        vec![2]
    );
    // BETWEEN across two ranges.
    assert_eq!(
        nodes_for(&m, Included(int(150)), Included(int(250))),
        vec![0, 1]
    );
    assert_eq!(
        nodes_for(&m, Included(int(310)), Included(int(320))),
        vec![2]
    );
    // Two parts.
    let two = Ranges::from_bounds(Unbounded, Excluded(int(50)))
        .union(&Ranges::from_bounds(Included(int(120)), Included(int(130))));
    assert_eq!(m.nodes_for(&two), vec![0, 1]);
}

#[test]
fn nodes_for_dates_and_text() {
    let d = dates();
    let key = |s: &str| KeyKind::Date.key_of(&bytes(s)).unwrap();
    assert_eq!(
        nodes_for(&d, Included(key("2023-06-01")), Excluded(key("2024-01-01"))),
        vec![0]
    );
    assert_eq!(
        nodes_for(&d, Included(key("2023-06-01")), Included(key("2024-01-01"))),
        vec![0, 1]
    );
    assert_eq!(
        nodes_for(&d, Excluded(key("2024-07-01 12:00:00")), Unbounded),
        vec![2]
    );
    assert_eq!(
        nodes_for(
            &d,
            Included(key("2024-03-01")),
            Included(key("2024-08-01 10:00:00.5"))
        ),
        vec![1, 2]
    );

    let b = |s: &str| Some(KeyKind::Text.bound(&tv(s)).unwrap());
    let t = RangeMap::new(KeyKind::Text, vec![(b("h"), 0), (b("q"), 1), (None, 2)]).unwrap();
    let tk = |s: &str| KeyKind::Text.key_of(&bytes(s)).unwrap();
    assert_eq!(t.node_of(&tk("apple")), 0);
    assert_eq!(t.node_of(&tk("Hello")), 1);
    assert_eq!(t.node_of(&tk("hello   ")), t.node_of(&tk("HELLO")));
    assert_eq!(t.node_of(&tk("h")), 1);
    assert_eq!(t.node_of(&tk("zebra")), 2);
    assert_eq!(nodes_for(&t, Included(tk("a")), Excluded(tk("H"))), vec![0]);
    assert_eq!(
        nodes_for(&t, Included(tk("g")), Included(tk("i"))),
        vec![0, 1]
    );
}

#[test]
fn remap_and_describe() {
    let m = ints();
    assert_eq!(m.nodes(), vec![0, 1, 2]);
    let r = m.remap(&|n| n + 10);
    assert_eq!(r.nodes, vec![10, 11, 10, 12]);
    assert_eq!(r.uppers, m.uppers);
    assert_eq!(r.nodes(), vec![10, 11, 12]);
    assert_eq!(
        m.describe(&|n| format!("ds{n}")),
        "[-inf, 100) -> ds0, [100, 200) -> ds1, [200, 300) -> ds0, [300, +inf) -> ds2"
    );
    assert_eq!(
        dates().describe(&|n| format!("ds{n}")),
        "[-inf, '2024-01-01') -> ds0, ['2024-01-01', '2024-07-01 12:00:00') -> ds1, \
         ['2024-07-01 12:00:00', +inf) -> ds2"
    );
}

#[test]
fn where_clauses_route_through_the_map() {
    use crate::sql::keys::KeyColumn;
    use crate::sql::parse;
    use crate::sql::ranges::where_ranges;
    use sqlparser::ast::{SetExpr, Statement};

    let route = |m: &RangeMap, cond: &str, params: &[Value]| {
        let p = parse(&format!("SELECT * FROM t WHERE {cond}")).unwrap();
        let Statement::Query(q) = &p.stmt else {
            panic!("not a query")
        };
        let SetExpr::Select(s) = q.body.as_ref() else {
            panic!("not a select")
        };
        let col = KeyColumn {
            column: "k".into(),
            qualifiers: vec!["t".into()],
        };
        let kind = m.kind;
        let r = where_ranges(s.selection.as_ref(), &col, &p, params, &|v| kind.key_of(v));
        m.nodes_for(&r)
    };
    let m = ints();
    assert_eq!(route(&m, "k = 150", &[]), vec![1]);
    assert_eq!(route(&m, "k = '150'", &[]), vec![1]);
    assert_eq!(route(&m, "k BETWEEN 150 AND 250", &[]), vec![0, 1]);
    assert_eq!(route(&m, "k > 299", &[]), vec![2]);
    assert_eq!(route(&m, "k = 1.5", &[]), vec![0, 1, 2]);
    assert_eq!(route(&m, "k = 1 AND k = 2", &[]), Vec::<usize>::new());
    assert_eq!(
        route(&m, "k IN (?, ?)", &[bytes("5"), Value::UInt(301)]),
        vec![0, 2]
    );

    let d = dates();
    assert_eq!(
        route(&d, "k >= '2024-02-01' AND k < '2024-03-01'", &[]),
        vec![1]
    );
    assert_eq!(route(&d, "k < '2024-01-01'", &[]), vec![0]);
    assert_eq!(route(&d, "k <= '2024-01-01'", &[]), vec![0, 1]);
    assert_eq!(
        route(&d, "k = ?", &[Value::Date(2025, 1, 1, 0, 0, 0, 0)]),
        vec![2]
    );
    assert_eq!(route(&d, "k = '2024/01/01'", &[]), vec![0, 1, 2]);

    let b = |s: &str| Some(KeyKind::Text.bound(&tv(s)).unwrap());
    let t = RangeMap::new(KeyKind::Text, vec![(b("h"), 0), (None, 1)]).unwrap();
    assert_eq!(route(&t, "k = 'hat '", &[]), vec![1]);
    assert_eq!(route(&t, "k < 'H'", &[]), vec![0]);
    assert_eq!(route(&t, "k = 5", &[]), vec![0, 1]);
}

#[test]
fn a_split_cuts_a_range_on_its_node_and_a_merge_joins_neighbours_on_one_node() {
    let m = ints();
    let s = m.split_at(&int(250)).unwrap();
    assert_eq!(s.uppers, vec![int(100), int(200), int(250), int(300)]);
    assert_eq!(s.nodes, vec![0, 1, 0, 0, 2]);
    assert_eq!(s.index_of(&int(250)), 3);
    assert_eq!(s.bounds(3), (Some(&int(250)), Some(&int(300))));
    // Merged again: the map it was.
    assert_eq!(s.merge_at(&int(250)).unwrap(), m);
    // A bound that is one already, ranges on two nodes, a bound that is none.
    assert!(m
        .split_at(&int(200))
        .unwrap_err()
        .contains("starts at 200 already"));
    assert!(m
        .merge_at(&int(200))
        .unwrap_err()
        .contains("different nodes"));
    assert!(m
        .merge_at(&int(150))
        .unwrap_err()
        .contains("no range starts"));
    // The first and the last range split too.
    assert_eq!(
        m.split_at(&int(-5)).unwrap().nodes,
        vec![0, 0, 1, 0, 2, 2][..5]
    );
    assert_eq!(m.split_at(&int(900)).unwrap().nodes, vec![0, 1, 0, 2, 2]);
}

#[test]
fn a_moving_range_is_read_at_its_steps_node_and_held_by_its_source_until_cleanup() {
    let mv = |step| RangeMove {
        index: 1,
        from: 1,
        to: 3,
        step,
    };
    let m = ints().with_moves(vec![mv(MoveStep::Capture)]).unwrap();
    assert_eq!((m.nodes[1], m.owner(1)), (1, 1));
    assert_eq!(m.nodes(), vec![0, 1, 2, 3]);
    assert!(m
        .describe(&|n| format!("ds{n}"))
        .contains("[100, 200) -> ds1 moving to ds3 (capture)"));
    assert!(m.split_at(&int(150)).is_err() && m.merge_at(&int(300)).is_err());
    let m = ints().with_moves(vec![mv(MoveStep::ReadTarget)]).unwrap();
    assert_eq!((m.nodes[1], m.owner(1)), (3, 1));
    let m = ints().with_moves(vec![mv(MoveStep::Cleanup)]).unwrap();
    assert_eq!((m.nodes[1], m.owner(1)), (3, 3));
    assert_eq!(m.entries()[1], (Some(int(200)), 3));
    // Only from the node that holds it, elsewhere, once.
    let wrong = RangeMove {
        from: 0,
        ..mv(MoveStep::Capture)
    };
    assert!(ints().with_moves(vec![wrong]).is_err());
    assert!(ints()
        .with_moves(vec![mv(MoveStep::Capture), mv(MoveStep::Hold)])
        .is_err());
}

#[test]
fn an_admins_word_is_read_as_a_rules_bound_and_written_back_the_same() {
    let m = ints();
    assert_eq!(m.key_of_word("250"), Ok(int(250)));
    assert!(m.key_of_word("abc").is_err());
    assert_eq!(m.word(&int(-42)), "-42");
    assert_eq!(m.key_of_word(&m.word_in(0)), Ok(int(i64::MIN.into())));
    assert_eq!(m.word_in(2), "200");
    let d = dates();
    let k = d.key_of_word("2024-03-01").unwrap();
    assert_eq!(d.word(&k), "2024-03-01 00:00:00");
    assert_eq!(d.key_of_word(&d.word(&k)), Ok(k.clone()));
    assert_eq!(d.bound_toml(&k), Some(tv("2024-03-01 00:00:00")));
    assert_eq!(d.index_of(&d.key_of_word(&d.word_in(0)).unwrap()), 0);
    // A fraction the rules cannot spell cannot be a bound.
    let frac = KeyKind::Date
        .key_of(&bytes("2024-03-01 00:00:00.5"))
        .unwrap();
    assert!(d.split_at(&frac).is_err());
    let t = RangeMap::new(KeyKind::Text, vec![(Some(text("M")), 0), (None, 1)]).unwrap();
    assert_eq!(t.key_of_word("abc "), Ok(text("ABC")));
    assert_eq!(t.index_of(&t.key_of_word(&t.word_in(0)).unwrap()), 0);
}
