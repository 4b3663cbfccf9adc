//! The house's layout, checked: the graph of which source file names which (through `crate::`,
//! `super::`, `self::` and child-module paths, in `use` lines and inline) has no circle between
//! files of different folders, and none inside a folder but those `ALLOWED` lists with the
//! README's reason; the top-level modules form layers (no circle between them either); and no
//! Rust file of the source, the tests, the benches or the fuzz harness is over 1,000 lines.
//! `cargo test --test layout -- --nocapture` prints the top-level graph.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Folders whose files may name each other in a circle, because that is the truth of the
/// design; the README's "Layout" says why for each. Every other circle fails.
const ALLOWED: &[(&str, &str)] = &[
    (
        "plan",
        "the planner is one recursive descent over a statement: its parts (select, insert, \
         gather, tier, moving) plan their subqueries and inputs through the Planner",
    ),
    (
        "routing",
        "TableRule is a recursive type: a directory rule falls back to another TableRule",
    ),
];

const MAX_LINES: usize = 1000;

/// One source file: its module path (`exec::door`) and folder (`exec`; a module with a folder
/// of its own, `x.rs` beside `x/` or `x/mod.rs`, belongs to that folder).
struct File {
    rel: String,
    module: Vec<String>,
    folder: String,
    text: String,
}

fn collect(dir: &Path, src: &Path, out: &mut Vec<File>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("read src")
        .map(|e| e.expect("entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            collect(&p, src, out);
            continue;
        }
        if p.extension().and_then(|e| e.to_str()) != Some("rs") {
            continue;
        }
        let rel = p
            .strip_prefix(src)
            .expect("under src")
            .to_string_lossy()
            .into_owned();
        let mut parts: Vec<String> = rel
            .trim_end_matches(".rs")
            .split('/')
            .map(str::to_owned)
            .collect();
        if rel == "main.rs" {
            // The binary is its own crate; `shardproxy::` is how it names the library.
            continue;
        }
        if parts.last().is_some_and(|l| l == "mod" || l == "lib") {
            parts.pop();
        }
        let own_dir = p.with_extension("");
        let folder = if parts.is_empty() {
            String::new()
        } else if rel.ends_with("mod.rs") || own_dir.is_dir() {
            parts.join("/")
        } else {
            parts[..parts.len() - 1].join("/")
        };
        let text = std::fs::read_to_string(&p).expect("read file");
        out.push(File {
            rel,
            module: parts,
            folder,
            text,
        });
    }
}

/// The text with comments, strings and char literals blanked out.
fn code_only(s: &str) -> String {
    let b: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    while i < b.len() {
        let c = b[i];
        let prev_ident = i > 0 && ident(b[i - 1]);
        if c == '/' && b.get(i + 1) == Some(&'/') {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && b.get(i + 1) == Some(&'*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if !prev_ident && (c == 'r' || (c == 'b' && b.get(i + 1) == Some(&'r'))) && {
            let mut j = i + if c == 'b' { 2 } else { 1 };
            while b.get(j) == Some(&'#') {
                j += 1;
            }
            b.get(j) == Some(&'"')
        } {
            let mut j = i + if c == 'b' { 2 } else { 1 };
            let mut hashes = 0;
            while b[j] == '#' {
                hashes += 1;
                j += 1;
            }
            j += 1;
            loop {
                if j >= b.len() {
                    break;
                }
                if b[j] == '"' && (0..hashes).all(|k| b.get(j + 1 + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            i = j;
            out.push_str("\"\"");
        } else if c == '"' {
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' && !prev_ident {
            // A char literal ('x', '\n', '\u{..}'), or a lifetime, kept as it is.
            if b.get(i + 1) == Some(&'\\') {
                let mut j = i + 2;
                while j < b.len() && b[j] != '\'' {
                    j += 1;
                }
                i = j + 1;
                out.push_str("' '");
            } else if b.get(i + 2) == Some(&'\'') {
                i += 3;
                out.push_str("' '");
            } else {
                out.push(c);
                i += 1;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Path,
    Open,
    Close,
    Comma,
    Other(char),
}

fn tokens(code: &str) -> Vec<Tok> {
    let b: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_alphabetic() || c == '_' {
            let s = i;
            while i < b.len() && (b[i].is_alphanumeric() || b[i] == '_') {
                i += 1;
            }
            out.push(Tok::Ident(b[s..i].iter().collect()));
            continue;
        }
        i += 1;
        match c {
            ':' if b.get(i) == Some(&':') => {
                i += 1;
                out.push(Tok::Path);
            }
            '{' => out.push(Tok::Open),
            '}' => out.push(Tok::Close),
            ',' => out.push(Tok::Comma),
            c if c.is_whitespace() => {}
            c => out.push(Tok::Other(c)),
        }
    }
    out
}

/// The paths of a `a::b::{c, d::{e}}` tree starting at `toks[i]` (an identifier), each as its
/// segments; returns them and the index after the tree.
fn path_tree(toks: &[Tok], mut i: usize) -> (Vec<Vec<String>>, usize) {
    let mut prefix = Vec::new();
    loop {
        match toks.get(i) {
            Some(Tok::Ident(s)) => {
                prefix.push(s.clone());
                i += 1;
            }
            _ => return (vec![prefix], i),
        }
        if toks.get(i) != Some(&Tok::Path) {
            return (vec![prefix], i);
        }
        i += 1;
        if toks.get(i) == Some(&Tok::Open) {
            i += 1;
            let mut all = Vec::new();
            loop {
                match toks.get(i) {
                    Some(Tok::Close) => {
                        i += 1;
                        break;
                    }
                    Some(Tok::Comma) => i += 1,
                    Some(Tok::Ident(_)) => {
                        let (sub, j) = path_tree(toks, i);
                        for s in sub {
                            let mut p = prefix.clone();
                            p.extend(s);
                            all.push(p);
                        }
                        i = j;
                    }
                    None => break,
                    _ => i += 1,
                }
            }
            if all.is_empty() {
                all.push(prefix);
            }
            return (all, i);
        }
    }
}

/// Is the `mod` at `toks[i]` under `#[cfg(test)]` (visibility words between)?
fn test_only(toks: &[Tok], i: usize) -> bool {
    let mut j = i;
    while j > 0 {
        match &toks[j - 1] {
            Tok::Ident(w) if w == "pub" || w == "crate" || w == "super" => j -= 1,
            Tok::Other('(') | Tok::Other(')') => j -= 1,
            _ => break,
        }
    }
    j >= 7
        && matches!(
            &toks[j - 7..j],
            [Tok::Other('#'), Tok::Other('['), Tok::Ident(c), Tok::Other('('), Tok::Ident(t), Tok::Other(')'), Tok::Other(']')]
                if c == "cfg" && t == "test"
        )
}

/// The child modules a file declares under `#[cfg(test)]` (`mod tests;`).
fn test_children(f: &File) -> Vec<String> {
    let toks = tokens(&code_only(&f.text));
    (0..toks.len().saturating_sub(2))
        .filter_map(|i| match (&toks[i], &toks[i + 1], &toks[i + 2]) {
            (Tok::Ident(m), Tok::Ident(name), Tok::Other(';'))
                if m == "mod" && test_only(&toks, i) =>
            {
                Some(name.clone())
            }
            _ => None,
        })
        .collect()
}

/// The absolute module paths one file's product code names (inline modules followed, test
/// modules left out: tests may reach any layer).
fn named_paths(f: &File) -> Vec<Vec<String>> {
    let toks = tokens(&code_only(&f.text));
    // Child modules declared by `mod x;` are named by `x::...` without a prefix.
    let mut children = BTreeSet::new();
    for w in toks.windows(3) {
        if let [Tok::Ident(m), Tok::Ident(name), Tok::Other(';')] = w {
            if m == "mod" {
                children.insert(name.clone());
            }
        }
    }
    let mut out = Vec::new();
    // Inline modules (`mod tests { ... }`): (name, brace depth at its opening).
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < toks.len() {
        match &toks[i] {
            Tok::Open => {
                depth += 1;
                i += 1;
                continue;
            }
            Tok::Close => {
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
                i += 1;
                continue;
            }
            Tok::Ident(m) if m == "mod" => {
                if toks.get(i + 2) == Some(&Tok::Open) && test_only(&toks, i) {
                    // Skip the test module's body.
                    let mut d = 0usize;
                    let mut j = i + 2;
                    while j < toks.len() {
                        match toks[j] {
                            Tok::Open => d += 1,
                            Tok::Close => {
                                d -= 1;
                                if d == 0 {
                                    break;
                                }
                            }
                            _ => {}
                        }
                        j += 1;
                    }
                    i = j + 1;
                    continue;
                }
                if let (Some(Tok::Ident(name)), Some(Tok::Open)) =
                    (toks.get(i + 1), toks.get(i + 2))
                {
                    inline.push((name.clone(), depth + 1));
                    depth += 1;
                    i += 3;
                    continue;
                }
            }
            _ => {}
        }
        let after_path = i > 0 && toks[i - 1] == Tok::Path;
        let Tok::Ident(first) = &toks[i] else {
            i += 1;
            continue;
        };
        let starts = matches!(first.as_str(), "crate" | "super" | "self")
            || (inline.is_empty() && children.contains(first));
        if after_path || !starts || toks.get(i + 1) != Some(&Tok::Path) {
            i += 1;
            continue;
        }
        let (paths, j) = path_tree(&toks, i);
        let mut here = f.module.clone();
        here.extend(inline.iter().map(|(n, _)| n.clone()));
        for p in paths {
            let mut abs: Vec<String>;
            let mut rest = &p[..];
            match rest[0].as_str() {
                "crate" => {
                    abs = Vec::new();
                    rest = &rest[1..];
                }
                "self" => {
                    abs = here.clone();
                    rest = &rest[1..];
                }
                "super" => {
                    abs = here.clone();
                    while rest.first().is_some_and(|s| s == "super") {
                        abs.pop();
                        rest = &rest[1..];
                    }
                }
                _ => abs = f.module.clone(),
            }
            abs.extend(rest.iter().cloned());
            out.push(abs);
        }
        i = j.max(i + 1);
    }
    out
}

struct Graph {
    files: Vec<File>,
    edges: Vec<BTreeSet<usize>>,
}

fn graph() -> Graph {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    collect(&src, &src, &mut files);
    let by_module: BTreeMap<Vec<String>, usize> = files
        .iter()
        .enumerate()
        .map(|(i, f)| (f.module.clone(), i))
        .collect();
    // Files of test modules (and their children): no product edges.
    let mut tests: Vec<Vec<String>> = Vec::new();
    for f in &files {
        for c in test_children(f) {
            let mut m = f.module.clone();
            m.push(c);
            tests.push(m);
        }
    }
    let mut edges = vec![BTreeSet::new(); files.len()];
    for (i, f) in files.iter().enumerate() {
        if tests.iter().any(|t| f.module.starts_with(t)) {
            continue;
        }
        for p in named_paths(f) {
            // The longest prefix that is a file's module.
            let target = (1..=p.len())
                .rev()
                .find_map(|n| by_module.get(&p[..n]).copied());
            if let Some(t) = target {
                if t != i && !files[t].module.is_empty() {
                    edges[i].insert(t);
                }
            }
        }
    }
    Graph { files, edges }
}

/// Strongly connected components (Tarjan), each with more than one member.
fn circles(edges: &[BTreeSet<usize>]) -> Vec<Vec<usize>> {
    struct St<'a> {
        edges: &'a [BTreeSet<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(s: &mut St, v: usize) {
        s.index[v] = Some(s.next);
        s.low[v] = s.next;
        s.next += 1;
        s.stack.push(v);
        s.on[v] = true;
        for &w in s.edges[v].clone().iter() {
            match s.index[w] {
                None => {
                    visit(s, w);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(iw) if s.on[w] => s.low[v] = s.low[v].min(iw),
                _ => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on[w] = false;
                comp.push(w);
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                s.out.push(comp);
            }
        }
    }
    let n = edges.len();
    let mut s = St {
        edges,
        index: vec![None; n],
        low: vec![0; n],
        on: vec![false; n],
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if s.index[v].is_none() {
            visit(&mut s, v);
        }
    }
    s.out
}

#[test]
fn no_circle_between_files_but_the_allowed() {
    let g = graph();
    let mut wrong = Vec::new();
    for c in circles(&g.edges) {
        let names: Vec<&str> = c.iter().map(|&i| g.files[i].rel.as_str()).collect();
        let folders: BTreeSet<&str> = c.iter().map(|&i| g.files[i].folder.as_str()).collect();
        if folders.len() > 1 {
            wrong.push(format!("across folders {folders:?}: {names:?}"));
        } else if !folders.iter().all(|f| ALLOWED.iter().any(|(a, _)| a == f)) {
            wrong.push(format!("inside {folders:?}, not in ALLOWED: {names:?}"));
        }
    }
    for c in &wrong {
        eprintln!("circle {c}");
    }
    // Every edge of a circle, to see which `use` to move.
    if !wrong.is_empty() {
        for c in circles(&g.edges) {
            for &a in &c {
                for &b in &g.edges[a] {
                    if c.contains(&b) {
                        eprintln!("  {} -> {}", g.files[a].rel, g.files[b].rel);
                    }
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{} circle(s) of files", wrong.len());
}

#[test]
fn top_level_modules_form_layers() {
    let g = graph();
    let top = |i: usize| g.files[i].module.first().cloned().unwrap_or_default();
    let mut names: Vec<String> = g.files.iter().enumerate().map(|(i, _)| top(i)).collect();
    names.sort();
    names.dedup();
    names.retain(|n| !n.is_empty());
    let idx = |n: &str| names.iter().position(|m| m == n).expect("module");
    let mut edges = vec![BTreeSet::new(); names.len()];
    let mut why: BTreeMap<(usize, usize), String> = BTreeMap::new();
    for (a, outs) in g.edges.iter().enumerate() {
        for &b in outs {
            let (ta, tb) = (top(a), top(b));
            if ta.is_empty() || tb.is_empty() || ta == tb {
                continue;
            }
            let (x, y) = (idx(&ta), idx(&tb));
            edges[x].insert(y);
            why.entry((x, y))
                .or_insert_with(|| format!("{} -> {}", g.files[a].rel, g.files[b].rel));
        }
    }
    for (i, n) in names.iter().enumerate() {
        let outs: Vec<&str> = edges[i].iter().map(|&j| names[j].as_str()).collect();
        println!("{n} -> {}", outs.join(" "));
    }
    let cs = circles(&edges);
    for c in &cs {
        let members: Vec<&str> = c.iter().map(|&i| names[i].as_str()).collect();
        eprintln!("circle of modules {members:?}:");
        for &a in c {
            for &b in &edges[a] {
                if c.contains(&b) {
                    eprintln!("  {} -> {}: {}", names[a], names[b], why[&(a, b)]);
                }
            }
        }
    }
    assert!(cs.is_empty(), "{} circle(s) of top-level modules", cs.len());
}

/// Every `.rs` file under `dir`, recursively, with its line count.
fn rust_files(dir: &Path, out: &mut Vec<(PathBuf, usize)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            // Build output, not source.
            if p.file_name().is_some_and(|n| n == "target") {
                continue;
            }
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            let n = std::fs::read_to_string(&p)
                .map(|t| t.lines().count())
                .unwrap_or(0);
            out.push((p, n));
        }
    }
}

/// The proxy's source, its tests, benches and fuzz harness alike.
#[test]
fn no_source_file_over_a_thousand_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["src", "tests", "bench", "fuzz"] {
        rust_files(&root.join(dir), &mut files);
    }
    assert!(
        files.iter().any(|(p, _)| p.ends_with("src/lib.rs")),
        "no source found under {}",
        root.display()
    );
    let long: Vec<String> = files
        .iter()
        .filter(|(_, n)| *n > MAX_LINES)
        .map(|(p, n)| {
            let rel = p.strip_prefix(root).unwrap_or(p);
            format!("{}: {n} lines", rel.display())
        })
        .collect();
    assert!(long.is_empty(), "over {MAX_LINES} lines: {long:?}");
}
