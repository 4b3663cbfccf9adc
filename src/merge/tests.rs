use super::*;
use mysql_common::constants::ColumnFlags;

fn b(s: &str) -> Option<Value> {
    Some(Value::Bytes(s.as_bytes().to_vec()))
}

fn col(ty: ColumnType, charset: u16, decimals: u8) -> Column {
    Column::new(ty)
        .with_character_set(charset)
        .with_decimals(decimals)
        .with_flags(ColumnFlags::empty())
}

fn text(rows: &[Row]) -> Vec<Vec<String>> {
    rows.iter()
        .map(|r| {
            r.iter()
                .map(|v| match v {
                    None | Some(Value::NULL) => "NULL".to_string(),
                    Some(Value::Bytes(b)) => String::from_utf8_lossy(b).into_owned(),
                    Some(other) => format!("{other:?}"),
                })
                .collect()
        })
        .collect()
}

#[test]
fn groups_merge_counts_sums_mins_maxes_and_averages() {
    // SELECT grp, COUNT(*), SUM(amount), MIN(amount), MAX(amount), AVG(amount) [, SUM, COUNT hidden]
    let cols = vec![
        col(ColumnType::MYSQL_TYPE_VAR_STRING, 45, 0),
        col(ColumnType::MYSQL_TYPE_LONGLONG, 63, 0),
        col(ColumnType::MYSQL_TYPE_NEWDECIMAL, 63, 3),
        col(ColumnType::MYSQL_TYPE_NEWDECIMAL, 63, 3),
        col(ColumnType::MYSQL_TYPE_NEWDECIMAL, 63, 3),
        col(ColumnType::MYSQL_TYPE_NEWDECIMAL, 63, 7),
        col(ColumnType::MYSQL_TYPE_NEWDECIMAL, 63, 3),
        col(ColumnType::MYSQL_TYPE_LONGLONG, 63, 0),
    ];
    let g = Grouping {
        keys: vec![0],
        columns: vec![
            AggFn::First,
            AggFn::Count,
            AggFn::Sum,
            AggFn::Min,
            AggFn::Max,
            AggFn::Avg { sum: 6, count: 7 },
            AggFn::Sum,
            AggFn::Count,
        ],
    };
    let rows = vec![
        vec![
            b("a"),
            b("2"),
            b("1.500"),
            b("0.500"),
            b("1.000"),
            b("0.7500000"),
            b("1.500"),
            b("2"),
        ],
        vec![
            b("A"),
            b("1"),
            b("-3.000"),
            b("-3.000"),
            b("-3.000"),
            b("-3.0000000"),
            b("-3.000"),
            b("1"),
        ],
        vec![b("b"), b("1"), None, None, None, None, None, b("0")],
    ];
    let out = aggregate(rows, &g, &cols, false, 100).unwrap();
    assert_eq!(
        text(&out),
        vec![
            vec![
                "a",
                "3",
                "-1.500",
                "-3.000",
                "1.000",
                "-0.5000000",
                "-1.500",
                "3"
            ],
            vec!["b", "1", "NULL", "NULL", "NULL", "NULL", "NULL", "0"],
        ]
    );
}

#[test]
fn the_group_cap_is_an_error() {
    let cols = vec![col(ColumnType::MYSQL_TYPE_LONG, 63, 0)];
    let g = Grouping {
        keys: vec![0],
        columns: vec![AggFn::First],
    };
    let rows = (0..10).map(|i| vec![b(&i.to_string())]).collect::<Vec<_>>();
    assert!(aggregate(rows, &g, &cols, false, 5).is_err());
}

#[test]
fn having_distinct_order_and_limit_apply_after_the_merge() {
    // SELECT grp, COUNT(*) ... GROUP BY grp HAVING COUNT(*) > 1 ORDER BY 2 DESC LIMIT 1, 1
    let cols = vec![
        col(ColumnType::MYSQL_TYPE_VAR_STRING, 45, 0),
        col(ColumnType::MYSQL_TYPE_LONGLONG, 63, 0),
    ];
    let m = InMemory {
        grouping: Some(Grouping {
            keys: vec![0],
            columns: vec![AggFn::First, AggFn::Count],
        }),
        having: Some(Cond::Cmp(
            CmpOp::Gt,
            Box::new(Cond::Col(1)),
            Box::new(Cond::Num(Num::Int(1))),
        )),
        distinct: false,
        order: vec![SortKey {
            index: 1,
            desc: true,
            fixed: false,
        }],
    };
    let rows = vec![
        vec![b("x"), b("1")],
        vec![b("y"), b("5")],
        vec![b("z"), b("1")],
        vec![b("X"), b("2")],
        vec![b("w"), b("1")],
    ];
    // LIMIT 1, 1 (the Limit above the merge) cuts the merged, sorted rows.
    let out: Vec<Row> = finish_buffered(rows, &m, 2, &cols, false, 100)
        .unwrap()
        .into_iter()
        .skip(1)
        .take(1)
        .collect();
    assert_eq!(text(&out), vec![vec!["x", "3"]]);

    let m = InMemory {
        distinct: true,
        ..Default::default()
    };
    let rows = vec![
        vec![b("a"), b("1")],
        vec![b("A"), b("1")],
        vec![b("a"), b("2")],
    ];
    assert_eq!(
        finish_buffered(rows, &m, 2, &cols, false, 100)
            .unwrap()
            .len(),
        2
    );
}

#[test]
fn binary_aggregates_take_the_column_type() {
    let cols = vec![col(ColumnType::MYSQL_TYPE_LONGLONG, 63, 0)];
    let g = Grouping {
        keys: vec![],
        columns: vec![AggFn::Count],
    };
    let out = aggregate(
        vec![vec![Some(Value::Int(2))], vec![Some(Value::Int(3))]],
        &g,
        &cols,
        true,
        10,
    )
    .unwrap();
    assert_eq!(out, vec![vec![Some(Value::Int(5))]]);
}

#[test]
fn a_double_of_fixed_decimals_is_written_with_them() {
    // SUM(ROUND(d, 1)) has 1 decimal, so 6.0; of 31, none fixed.
    for (decimals, want) in [(1, "6.0"), (5, "6.00000"), (31, "6")] {
        let cols = vec![col(ColumnType::MYSQL_TYPE_DOUBLE, 63, decimals)];
        let g = Grouping {
            keys: vec![],
            columns: vec![AggFn::Sum],
        };
        let out = aggregate(vec![vec![b("2.5")], vec![b("3.5")]], &g, &cols, false, 10).unwrap();
        assert_eq!(
            text(&out),
            vec![vec![want.to_string()]],
            "decimals {decimals}"
        );
    }
}

#[test]
fn rows_compare_by_several_keys() {
    let classes = vec![Class::Folded { pad: true }, Class::Integer];
    let order = vec![
        SortKey {
            index: 0,
            desc: false,
            fixed: false,
        },
        SortKey {
            index: 1,
            desc: true,
            fixed: false,
        },
    ];
    let a = vec![b("abc"), b("1")];
    let c = vec![b("ABC"), b("2")];
    assert_eq!(cmp_rows(&a, &c, &order, &classes), Ordering::Greater);
    assert_eq!(format_float(1e20), "1e20");
    assert_eq!(format_float(0.5), "0.5");
}

#[test]
fn min_and_max_skip_nodes_without_rows() {
    // Nodes answer MIN(qty) 9, NULL (no matching rows), 10: the merged MIN is 9.
    let cols = vec![
        col(ColumnType::MYSQL_TYPE_LONG, 63, 0),
        col(ColumnType::MYSQL_TYPE_LONG, 63, 0),
    ];
    let g = Grouping {
        keys: vec![],
        columns: vec![AggFn::Min, AggFn::Max],
    };
    let rows = vec![
        vec![b("9"), b("9")],
        vec![Some(Value::NULL), Some(Value::NULL)],
        vec![b("10"), b("10")],
    ];
    assert_eq!(
        text(&aggregate(rows, &g, &cols, false, 10).unwrap()),
        vec![vec!["9", "10"]]
    );
    let rows = vec![
        vec![Some(Value::NULL), Some(Value::NULL)],
        vec![b("-3"), b("-3")],
    ];
    assert_eq!(
        text(&aggregate(rows, &g, &cols, false, 10).unwrap()),
        vec![vec!["-3", "-3"]]
    );
}
