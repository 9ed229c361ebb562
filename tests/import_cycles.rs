//! No two source files import each other, directly or around a circle: a circle is a concept
//! split across files by size (ARCHITECTURE.md). Reads every `use crate::…;` under `src/`
//! (the binary's excepted; `pub use` and `pub(crate) use` too) and every `crate::…` path used in
//! the code itself (`crate::blocks::gpu::plan(…)`: a call by full path is as much an import),
//! comments and string literals left out; resolves each path to the file defining it — through
//! the `pub use` re-exports of `mod.rs`/`lib.rs` — and looks for cycles. A module's `mod`
//! declarations and re-exports of its children are not imports.
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
    expand_aliased(tree).into_iter().map(|(path, _)| path).collect()
}

/// [`expand`], each path with the name it is imported as (`x as y`: `y`).
fn expand_aliased(tree: &str) -> Vec<(String, String)> {
    let tree: String = tree.replace(" as ", "@").chars().filter(|c| !c.is_whitespace()).collect();
    let Some(open) = tree.find('{') else {
        let (path, alias) = tree.split_once('@').unwrap_or((&tree, ""));
        let alias = if alias.is_empty() { path.rsplit("::").next().unwrap() } else { alias };
        return vec![(path.to_string(), alias.to_string())];
    };
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
    items.flat_map(|i| expand_aliased(&join(i))).collect()
}

/// The trees of every `<keyword>…;` statement of `source` outside its `#[cfg(test)] mod tests`.
fn statements(source: &str, keyword: &str) -> Vec<String> {
    let source = source.split("#[cfg(test)]\nmod tests").next().unwrap();
    let mut out = Vec::new();
    for (at, _) in source.match_indices(keyword) {
        let line_start = source[..at].rfind('\n').map_or(0, |i| i + 1);
        let before = source[line_start..at].trim();
        if !(before.is_empty() || before.starts_with("pub") && !keyword.starts_with("pub")) {
            continue; // not at the start of a line (a comment, a string)
        }
        let rest = &source[at + keyword.len()..];
        out.push(rest[..rest.find(';').unwrap()].to_string());
    }
    out
}

/// `source` with its comments and the contents of its string and char literals blanked out
/// (raw strings included), so that only code is left to look for paths in.
fn code_only(source: &str) -> String {
    let b = source.as_bytes();
    let mut out = String::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let rest = &source[i..];
        let skip_to = if rest.starts_with("//") {
            rest.find('\n').map_or(b.len(), |n| i + n)
        } else if rest.starts_with("/*") {
            rest.find("*/").map_or(b.len(), |n| i + n + 2)
        } else if let Some(hashes) = rest.strip_prefix('r').and_then(|r| {
            let h = r.len() - r.trim_start_matches('#').len();
            r[h..].starts_with('"').then_some(h)
        }) && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_'))
        {
            let close = format!("\"{}", "#".repeat(hashes));
            rest[hashes + 2..].find(&close).map_or(b.len(), |n| i + hashes + 2 + n + close.len())
        } else if b[i] == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            j + 1
        } else if let Some(n) = (b[i] == b'\'').then(|| char_literal(&rest[1..])).flatten() {
            i + 1 + n // a char literal, not a lifetime
        } else {
            let c = rest.chars().next().unwrap();
            out.push(c);
            i += c.len_utf8();
            continue;
        };
        out.push(' ');
        i = skip_to.min(b.len());
    }
    out
}

/// The bytes of a char literal after its opening quote, through its closing one (`x'`, `\n'`);
/// `None` where the quote opens a lifetime.
fn char_literal(after: &str) -> Option<usize> {
    let mut chars = after.char_indices();
    let (_, c) = chars.next()?;
    if c == '\\' {
        return after[1..].find('\'').map(|n| 1 + n + 1);
    }
    let (n, close) = chars.next()?;
    (close == '\'').then_some(n + 1)
}

/// The `crate::a::b::C` paths used in `code` (from [`code_only`]) outside its `use` statements,
/// and the paths that go on from a module it imports (`use crate::blocks;` then
/// `blocks::gpu::plan(…)` uses `crate::blocks::gpu::plan`).
fn paths_in_code(code: &str) -> Vec<String> {
    let imported: Vec<(String, String)> =
        statements(code, "use crate::").iter().flat_map(|t| expand_aliased(t)).collect();
    let mut rest = code.to_string();
    // Blank every `use …;` statement out: `statements` reads those.
    const USE: &str = "use ";
    let mut at = 0;
    while let Some(found) = rest[at..].find(USE) {
        let start = at + found;
        let word_start = start == 0
            || !(rest.as_bytes()[start - 1].is_ascii_alphanumeric() || rest.as_bytes()[start - 1] == b'_');
        let end = rest[start..].find(';').map_or(rest.len(), |e| start + e);
        if word_start && rest[start + USE.len()..end].trim_start().starts_with("crate::") {
            rest.replace_range(start..end, &" ".repeat(end - start));
        }
        at = start + USE.len();
    }
    let mut out = Vec::new();
    for (at, _) in rest.match_indices("crate::") {
        let before = rest[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // `pub(crate)` is followed by a space; this is `xcrate::`
        }
        let path: String =
            rest[at..].chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':').collect();
        out.push(path.trim_end_matches(':').to_string());
    }
    for (path, alias) in imported.iter().filter(|(_, a)| a != "self" && a != "*") {
        let word = format!("{alias}::");
        for (at, _) in rest.match_indices(&word) {
            let before = rest[..at].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue; // the middle of a longer name or path
            }
            let tail: String = rest[at + word.len()..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            out.push(format!("crate::{path}::{}", tail.trim_end_matches(':')));
        }
    }
    out
}

#[test]
fn code_paths_are_read_and_comments_and_strings_are_not() {
    let source = r##"
        use crate::a::b;
        pub(crate) use crate::c::{d, e::F};
        // crate::commented::out
        /* crate::block::comment */
        fn f<'a>(x: &'a str) -> char {
            let s = "crate::in_a_string";
            let r = r#"crate::in_a_raw "string""#;
            crate::g::h::call(x);
            b::inner::f();
            let c = '"';
            <crate::i::J as crate::k::L>::m();
            '\''
        }
    "##;
    let code = code_only(source);
    assert_eq!(
        paths_in_code(&code),
        ["crate::g::h::call", "crate::i::J", "crate::k::L", "crate::a::b::inner::f"]
    );
    let uses: Vec<String> = statements(&code, "use crate::").iter().flat_map(|t| expand(t)).collect();
    assert_eq!(uses, ["a::b", "c::d", "c::e::F"]);
}

/// `path` as written in `module` (`crate::a`, `super::a`, `self::a`, or `a` below `module`),
/// from the crate's root.
fn absolute(module: &str, path: &str) -> String {
    if let Some(rest) = path.strip_prefix("crate::") {
        return rest.to_string();
    }
    let mut at: Vec<&str> = module.split("::").filter(|s| !s.is_empty()).collect();
    let mut rest = path.strip_prefix("self::").unwrap_or(path);
    while let Some(up) = rest.strip_prefix("super::") {
        at.pop();
        rest = up;
    }
    at.push(rest);
    at.join("::")
}

/// The import graph of `files` ((module path, source) pairs): for each module, the modules
/// (files) it imports — by `use crate::…`, `use super::…`, and paths in the code.
fn import_graph(files: &BTreeMap<String, String>) -> BTreeMap<&str, BTreeSet<String>> {
    // `pub use child::Name` in a module: Name is defined in child.
    let mut reexports = BTreeMap::new();
    for (module, source) in files {
        for tree in statements(source, "pub use ") {
            for (path, alias) in expand_aliased(&tree) {
                let child = path.rsplit_once("::").map_or("", |(c, _)| c);
                reexports.insert(absolute(module, &alias), absolute(module, child));
            }
        }
    }
    // The file a path is defined in: its longest prefix that is a file, or a name a module
    // re-exports (`gpu_model::ConversionStats::default` is `gpu_model::format`'s).
    let resolve = |path: &str| -> Option<String> {
        let parts: Vec<&str> = path.split("::").collect();
        (1..=parts.len()).rev().map(|n| parts[..n].join("::")).find_map(|m| match reexports.get(&m) {
            Some(child) => {
                let child: Vec<&str> = child.split("::").collect();
                (1..=child.len()).rev().map(|n| child[..n].join("::")).find(|c| files.contains_key(c))
            }
            None => files.contains_key(&m).then_some(m),
        })
    };
    let mut edges: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for (module, source) in files {
        let code = code_only(source.split("#[cfg(test)]\nmod tests").next().unwrap());
        let mut targets = statements(&code, "use crate::").iter().flat_map(|t| expand(t)).collect::<Vec<_>>();
        for tree in statements(&code, "use super::") {
            targets.extend(expand(&format!("super::{tree}")).iter().map(|p| absolute(module, p)));
        }
        targets.extend(paths_in_code(&code).iter().map(|p| p["crate::".len()..].to_string()));
        let found = targets.iter().filter_map(|t| resolve(t)).filter(|t| t != module);
        edges.entry(module).or_default().extend(found);
    }
    edges
}

/// Every circle of `edges`, each written from its smallest module.
fn circles(edges: &BTreeMap<&str, BTreeSet<String>>) -> BTreeSet<String> {
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
    cycles
}

#[test]
fn no_source_file_imports_itself_around_a_circle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = BTreeMap::new();
    sources(&root, "", &mut files);
    let edges = import_graph(&files);
    assert!(
        edges.len() > 50 && edges.values().map(BTreeSet::len).sum::<usize>() > 150,
        "too few imports read"
    );
    let cycles = circles(&edges);
    assert!(cycles.is_empty(), "import circles:\n{}", cycles.into_iter().collect::<Vec<_>>().join("\n"));
}

/// The hand check: circles closed by a call by full path, or through a module imported by
/// name, are found — and with the paths inside comments and strings, nothing is.
#[test]
fn a_full_path_call_that_closes_a_circle_is_found() {
    let files = |a: &str, b: &str| -> BTreeMap<String, String> {
        [("blocks::gpu", a), ("gpu_model::plan", b), ("gpu_model", "pub use plan::Plan;")]
            .into_iter()
            .map(|(m, s)| (m.to_string(), s.to_string()))
            .collect()
    };
    let uses_plan = "use crate::gpu_model::Plan;\nfn f(p: &Plan) {}";
    for call in [
        "fn plan() { crate::blocks::gpu::plan(); }",
        "use crate::blocks;\nfn plan() { blocks::gpu::plan(); }",
        "use crate::blocks as b;\nfn plan() { let _ = <b::gpu::Kind as Default>::default(); }",
    ] {
        let found = circles(&import_graph(&files(uses_plan, call)));
        assert_eq!(found.into_iter().collect::<Vec<_>>(), ["blocks::gpu → gpu_model::plan"], "{call}");
    }
    for quiet in ["// crate::blocks::gpu::plan()", "fn plan() { let s = \"crate::blocks::gpu::plan()\"; }"] {
        assert!(circles(&import_graph(&files(uses_plan, quiet))).is_empty(), "{quiet}");
    }
}

/// Folders stacked as floors, top down: a file imports nothing from a folder above its own.
const FLOORS: [&str; 3] = ["gpu_model", "blocks", "gpu_kit"];

/// Every import that goes up a floor: `(importer, imported)`.
fn upward(edges: &BTreeMap<&str, BTreeSet<String>>) -> Vec<(String, String)> {
    let floor = |module: &str| FLOORS.iter().position(|f| module.split("::").next() == Some(*f));
    let mut out = Vec::new();
    // A test module (`…::tests`, compiled in tests only) sits above every floor.
    for (module, targets) in edges.iter().filter(|(m, _)| !m.ends_with("::tests")) {
        let Some(here) = floor(module) else { continue };
        for target in targets {
            if floor(target).is_some_and(|there| there < here) {
                out.push((module.to_string(), target.clone()));
            }
        }
    }
    out
}

/// The GPU toolkit (`gpu_kit/`: calls, split matrices, formats, pipelines, scratch, caches) is
/// a floor below the block kinds (`blocks/`), which are below the GPU orchestrator
/// (`gpu_model/`): the kinds build with the toolkit and never reach into the orchestrator, the
/// toolkit knows no kind.
#[test]
fn the_gpu_toolkit_is_a_floor_below_the_kinds_below_the_orchestrator() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = BTreeMap::new();
    sources(&root, "", &mut files);
    let edges = import_graph(&files);
    assert!(FLOORS.iter().all(|f| edges.keys().any(|m| m.starts_with(f))), "a floor has no files");
    let up = upward(&edges);
    assert!(up.is_empty(), "imports up a floor: {up:?}");
    // The hand check: a kind reaching into the orchestrator, and the toolkit naming a kind.
    let hand: BTreeMap<String, String> = [
        ("blocks::mamba1::gpu", "use crate::gpu_model::plan::Plan;"),
        ("gpu_kit::call", "fn f() { crate::blocks::Mamba1::default(); }"),
        ("gpu_model::plan", "use crate::gpu_kit::call::Builder;"),
        ("blocks", "pub use mamba1::Mamba1;"),
        ("blocks::mamba1", ""),
    ]
    .into_iter()
    .map(|(m, s)| (m.to_string(), s.to_string()))
    .collect();
    let found = upward(&import_graph(&hand));
    assert_eq!(
        found,
        [
            ("blocks::mamba1::gpu".to_string(), "gpu_model::plan".to_string()),
            ("gpu_kit::call".into(), "blocks::mamba1".into())
        ]
    );
}
