//! No two source files import each other, directly or around a circle: a circle is a concept
//! split across files by size (ARCHITECTURE.md). Reads every `use crate::…;` under `src/`
//! (the binary's excepted), resolves each path to the file defining it — through the `pub use`
//! re-exports of `mod.rs`/`lib.rs` — and looks for cycles. A module's `mod` declarations and
//! re-exports of its children are not imports.
#![cfg(not(target_arch = "wasm32"))]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Every `.rs` file under `dir` as (module path, source).
fn sources(dir: &Path, prefix: &str, out: &mut BTreeMap<String, String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        let join = |n: &str| if prefix.is_empty() { n.to_string() } else { format!("{prefix}::{n}") };
        if path.is_dir() {
            if name != "bin" {
                sources(&path, &join(&name), out);
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            let module = if name == "mod" || name == "lib" { prefix.to_string() } else { join(&name) };
            out.insert(module, std::fs::read_to_string(&path).unwrap());
        }
    }
}

/// `a::{b, c::{d, e}}` → `a::b`, `a::c::d`, `a::c::e` (`self` is the prefix itself).
fn expand(tree: &str) -> Vec<String> {
    // `x as y` imports x: the alias goes before the spaces do.
    let tree: String = tree.replace(" as ", "@").chars().filter(|c| !c.is_whitespace()).collect();
    let Some(open) = tree.find('{') else { return vec![tree.split('@').next().unwrap().to_string()] };
    let prefix = tree[..open].trim_end_matches("::");
    let inner = &tree[open + 1..tree.len() - 1];
    let (mut items, mut depth, mut start) = (Vec::new(), 0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&inner[start..]);
    let items = items.into_iter().filter(|i| !i.is_empty());
    let join = |i: &str| if i == "self" { prefix.to_string() } else { format!("{prefix}::{i}") };
    items.flat_map(|i| expand(&join(i))).collect()
}

/// The trees of every `<keyword>…;` statement of `source` outside its `#[cfg(test)] mod tests`.
fn statements(source: &str, keyword: &str) -> Vec<String> {
    let source = source.split("#[cfg(test)]\nmod tests").next().unwrap();
    let mut out = Vec::new();
    for (at, _) in source.match_indices(keyword) {
        let line_start = source[..at].rfind('\n').map_or(0, |i| i + 1);
        if !source[line_start..at].trim().is_empty() {
            continue; // not at the start of a line (a comment, a string)
        }
        let rest = &source[at + keyword.len()..];
        out.push(rest[..rest.find(';').unwrap()].to_string());
    }
    out
}

#[test]
fn no_source_file_imports_itself_around_a_circle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = BTreeMap::new();
    sources(&root, "", &mut files);
    // `pub use child::Name` in a module: Name is defined in child.
    let mut reexports = BTreeMap::new();
    for (module, source) in &files {
        for tree in statements(source, "pub use ") {
            for path in expand(&tree) {
                let (child, name) = path.rsplit_once("::").unwrap_or(("", &path));
                let full = |p: &str| if module.is_empty() { p.to_string() } else { format!("{module}::{p}") };
                reexports.insert(full(name), full(child));
            }
        }
    }
    let resolve = |path: &str| -> Option<String> {
        let path = reexports.get(path).cloned().unwrap_or_else(|| path.to_string());
        let parts: Vec<&str> = path.split("::").collect();
        (1..=parts.len()).rev().map(|n| parts[..n].join("::")).find(|m| files.contains_key(m))
    };
    let mut edges: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for (module, source) in &files {
        let targets = statements(source, "use crate::").iter().flat_map(|t| expand(t)).collect::<Vec<_>>();
        let found = targets.iter().filter_map(|t| resolve(t)).filter(|t| t != module);
        edges.entry(module).or_default().extend(found);
    }
    // A cycle is a path back to where it started: depth-first from every module.
    let mut cycles = BTreeSet::new();
    for start in edges.keys() {
        let mut stack = vec![(start.to_string(), vec![start.to_string()])];
        let mut seen = BTreeSet::new();
        while let Some((at, path)) = stack.pop() {
            for next in edges.get(at.as_str()).into_iter().flatten() {
                if next == start {
                    let mut cycle = path.clone();
                    let first = (0..cycle.len()).min_by_key(|&i| &cycle[i]).unwrap();
                    cycle.rotate_left(first);
                    cycles.insert(cycle.join(" → "));
                } else if seen.insert(next.clone()) {
                    stack.push((next.clone(), [path.clone(), vec![next.clone()]].concat()));
                }
            }
        }
    }
    assert!(
        edges.len() > 50 && edges.values().map(BTreeSet::len).sum::<usize>() > 150,
        "too few imports read"
    );
    assert!(cycles.is_empty(), "import circles:\n{}", cycles.into_iter().collect::<Vec<_>>().join("\n"));
}
