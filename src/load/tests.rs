use std::time::Duration;

use super::*;

fn hot() -> HotSection {
    HotSection {
        seconds: 2,
        slot_statements: 10,
        keys: 4,
        ..HotSection::default()
    }
}

fn run(load: &Load, slot: u16, n: u64, key: &str) {
    let t = load.table("t");
    for _ in 0..n {
        t.hit(slot, 30);
        t.spent(slot, 1, Duration::from_micros(200), || {
            Some(key.as_bytes().to_vec())
        });
    }
}

#[test]
fn a_busy_slot_turns_hot_and_its_keys_are_counted_only_then() {
    let load = Load::default();
    let h = hot();
    run(&load, 3, 20, "cold-time");
    assert!(load.tick(vec![], &h).hot.is_empty());
    assert!(load.keys(None, 5).is_empty());
    run(&load, 3, 20, "k1");
    run(&load, 4, 2, "other");
    let c = load.tick(vec![], &h);
    assert_eq!(c.hot, vec![("t".into(), 3)]);
    // Hot now: its keys feed the sketch; the cool slot's do not.
    run(&load, 3, 6, "k1");
    run(&load, 3, 2, "k2");
    run(&load, 4, 9, "other");
    let keys = load.keys(Some("T"), 5);
    let got: Vec<(&[u8], u64)> = keys.iter().map(|k| (&k.key[..], k.count)).collect();
    assert_eq!(got, vec![(&b"k1"[..], 6), (&b"k2"[..], 2)]);
    assert!(keys.iter().all(|k| k.slot == 3 && k.total == 8));
    // The report lists the hot slot first, with its rates over the last 2 seconds.
    let slots = load.slots(&h, 10);
    assert_eq!(slots[0].slot, 3);
    assert_eq!(slots[0].hot_for, Some(2));
    assert_eq!(slots[0].rate[detect::STATEMENTS], 20);
    assert_eq!(slots[0].rate[detect::ROWS], 20);
    assert_eq!(slots[0].rate[detect::BYTES], 600);
    assert_eq!(slots[0].rate[detect::MICROS], 4000);
    // Everything counted, the open window's too, stays in the totals.
    assert_eq!(load.table("t").counts(3)[detect::STATEMENTS], 48);
}

#[test]
fn a_cooled_slot_forgets_its_keys() {
    let load = Load::default();
    let h = hot();
    for _ in 0..2 {
        run(&load, 3, 20, "k");
        load.tick(vec![], &h);
    }
    run(&load, 3, 1, "k");
    assert_eq!(load.keys(None, 5).len(), 1);
    load.tick(vec![], &h);
    let c = load.tick(vec![], &h);
    assert_eq!(c.cool, vec![("t".into(), 3)]);
    assert!(load.keys(None, 5).is_empty());
    assert!(load.slots(&h, 10).iter().all(|s| s.hot_for.is_none()));
}

#[test]
fn node_load_is_the_difference_of_their_running_sums() {
    let load = Load::default();
    let h = hot();
    load.tick(
        vec![
            ("a".into(), [100, 5_000_000]),
            ("b".into(), [10, 1_000_000]),
        ],
        &h,
    );
    load.tick(
        vec![
            ("a".into(), [400, 5_900_000]),
            ("b".into(), [40, 1_100_000]),
        ],
        &h,
    );
    load.tick(
        vec![
            ("a".into(), [700, 6_800_000]),
            ("b".into(), [70, 1_200_000]),
        ],
        &h,
    );
    let n = load.nodes(&h);
    assert_eq!(n[0].name, "a");
    // The first tick only starts the sums: 2 windows of 300 statements and 900 ms... over
    // the last 2 windows.
    assert_eq!((n[0].statements, n[0].micros), (300, 900_000));
    assert_eq!((n[1].statements, n[1].micros), (30, 100_000));
    assert!((n[0].of_mean - 1.8).abs() < 1e-9);
    assert!(n[0].hot_for.is_some() && n[1].hot_for.is_none());
}

#[test]
fn a_slot_hot_only_in_the_clusters_sum_is_hot_once_the_other_proxies_are_added() {
    let (mine, theirs, alone) = (Load::default(), Load::default(), Load::default());
    let h = hot();
    let mut hot_in_sum = Vec::new();
    let mut hot_alone = Vec::new();
    for second in 1..=3u64 {
        // 7 statements a second on each proxy: under the threshold of 10 on either.
        run(&mine, 3, 7, "k");
        run(&alone, 3, 7, "k");
        run(&theirs, 3, 7, "k");
        let nodes = vec![("ds1".to_string(), [7 * second, 1400 * second])];
        let other = Seconds::of(&theirs.close(nodes.clone()));
        assert_eq!(other.slots[&("t".to_string(), 3)][detect::STATEMENTS], 7);
        let mut w = mine.close(nodes.clone());
        mine.add(&mut w, &other);
        assert_eq!(w.slots[&("t".into(), 3)][detect::STATEMENTS], 14);
        if second > 1 {
            assert_eq!(w.nodes, vec![("ds1".to_string(), [14, 2800])]);
        }
        hot_in_sum.extend(mine.judge(w, &h).hot);
        hot_alone.extend(alone.tick(nodes, &h).hot);
    }
    assert_eq!(hot_in_sum, vec![("t".into(), 3)]);
    assert!(hot_alone.is_empty());
}
