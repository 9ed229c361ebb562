//! The README is the front door: what its Layout table names exists, every relative link in it
//! (and in docs/) leads somewhere, and it stays short (≤ 250 lines; the rest lives in docs/).
#![cfg(not(target_arch = "wasm32"))]

use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The `` `…` `` spans of `text`.
fn code_spans(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

#[test]
fn every_path_the_layout_table_names_exists() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let layout = readme.split("\n## Layout\n").nth(1).expect("README has a Layout section");
    let rows: Vec<&str> = layout.lines().filter(|l| l.starts_with("| `")).collect();
    assert!(rows.len() >= 20, "the Layout table has {} rows", rows.len());
    let mut named = 0;
    for row in rows {
        let cells: Vec<&str> = row.split(" | ").collect();
        let path_cell = cells[0].trim_start_matches("| ");
        for path in code_spans(path_cell) {
            assert!(root().join(path).exists(), "README's Layout names {path}, which does not exist");
            named += 1;
        }
        // Paths from the root in the description (`tests/fixtures/`, `www/models/…`) too.
        let rest = cells[1..].join(" | ");
        let top =
            ["src/", "tests/", "tools/", "www/", "js/", "vendor/", "scripts/", "docs/", "fuzz/", "shaders/"];
        for path in code_spans(&rest).into_iter().filter(|p| top.iter().any(|t| p.starts_with(t))) {
            assert!(root().join(path).exists(), "README's Layout mentions {path}, which does not exist");
            named += 1;
        }
    }
    assert!(named >= 30, "only {named} paths read");
}

#[test]
fn relative_links_lead_somewhere_and_the_readme_is_short() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(lines <= 250, "README.md has {lines} lines (at most 250: the rest goes to docs/)");
    let mut files = vec![root().join("README.md"), root().join("ARCHITECTURE.md")];
    for entry in std::fs::read_dir(root().join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            files.push(path);
        }
    }
    let mut checked = 0;
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for link in text.split("](").skip(1).filter_map(|rest| rest.split(')').next()) {
            let target = link.split('#').next().unwrap();
            if target.is_empty() || target.contains("://") || target.contains(' ') {
                continue;
            }
            let at = file.parent().unwrap().join(target);
            assert!(at.exists(), "{}: the link to {link} leads nowhere", file.display());
            checked += 1;
        }
    }
    assert!(checked >= 10, "only {checked} links read");
}
