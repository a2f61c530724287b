//! The architecture's rules about imports, checked on the sources: no module of a crate imports
//! another that imports it back, directly or around a circle (ARCHITECTURE.md, "no import
//! circles"). A module is a source file; an import is a `crate::` or `super::` path outside
//! comments and tests, resolved to the longest module it names. A child naming its own parent
//! (`super::Item`) is not counted: a parent module is the facade of its children.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file under `src`, by module path (`layout::exact`; the crate root is "").
fn modules(src: &Path) -> BTreeMap<String, PathBuf> {
    let mut found = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(src).unwrap().with_extension("");
                let mut parts: Vec<String> = rel
                    .iter()
                    .map(|p| p.to_string_lossy().into_owned())
                    .collect();
                if matches!(
                    parts.last().map(String::as_str),
                    Some("mod" | "lib" | "main")
                ) {
                    parts.pop();
                }
                found.insert(parts.join("::"), path);
            }
        }
    }
    found
}

/// The modules `module` imports: each `crate::`/`super::` path outside comments and tests.
fn imports(module: &str, text: &str, known: &BTreeMap<String, PathBuf>) -> BTreeSet<String> {
    let code = text.split("#[cfg(test)]").next().unwrap_or("");
    let parent = module.rsplit_once("::").map_or("", |(p, _)| p);
    let mut out = BTreeSet::new();
    for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
        for (base, rest) in [("crate::", ""), ("super::", parent)] {
            for (at, _) in line.match_indices(base) {
                let before = line[..at].chars().last();
                if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                    continue;
                }
                let segments: Vec<&str> = line[at + base.len()..]
                    .split("::")
                    .map(|s| {
                        s.split(|c: char| !(c.is_alphanumeric() || c == '_'))
                            .next()
                            .unwrap_or("")
                    })
                    .take_while(|s| !s.is_empty())
                    .collect();
                let target = (1..=segments.len()).rev().find_map(|k| {
                    let name = [rest]
                        .into_iter()
                        .chain(segments[..k].iter().copied())
                        .filter(|s| !s.is_empty())
                        .collect::<Vec<_>>()
                        .join("::");
                    known.contains_key(&name).then_some(name)
                });
                if let Some(target) = target
                    && target != module
                    && !module.starts_with(&format!("{target}::"))
                {
                    out.insert(target);
                }
            }
        }
    }
    out
}

/// The circles of a graph: its strongly connected components of more than one module.
fn circles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    // Reachability by search from each module: small graphs, so plain and obviously right.
    let reach = |from: &String| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(m) = todo.pop() {
            for next in edges.get(&m).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    todo.push(next.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&String, BTreeSet<String>> =
        edges.keys().map(|m| (m, reach(m))).collect();
    let mut found: Vec<Vec<String>> = Vec::new();
    for (m, r) in &reaches {
        let circle: Vec<String> = (r.iter())
            .filter(|other| reaches.get(other).is_some_and(|back| back.contains(*m)))
            .cloned()
            .collect();
        if circle.len() > 1 && !found.contains(&circle) {
            found.push(circle);
        }
    }
    found
}

#[test]
fn no_crate_has_an_import_circle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut sources = vec![root.join("web/src")];
    for entry in std::fs::read_dir(root.join("crates")).unwrap() {
        sources.push(entry.unwrap().path().join("src"));
    }
    let mut report = Vec::new();
    for src in sources {
        let known = modules(&src);
        assert!(!known.is_empty(), "{} has no sources", src.display());
        let edges: BTreeMap<String, BTreeSet<String>> = (known.iter())
            .map(|(m, path)| {
                (
                    m.clone(),
                    imports(m, &std::fs::read_to_string(path).unwrap(), &known),
                )
            })
            .collect();
        for circle in circles(&edges) {
            report.push(format!("{}: {}", src.display(), circle.join(" <-> ")));
        }
    }
    assert!(report.is_empty(), "import circles:\n{}", report.join("\n"));
}

#[test]
fn the_circle_finder_finds_a_circle() {
    let known: BTreeMap<String, PathBuf> = ["a", "b", "c", "layout", "layout::x"]
        .into_iter()
        .map(|m| (m.to_string(), PathBuf::new()))
        .collect();
    let a = imports(
        "a",
        "use crate::b::Thing;\n// crate::c in a comment\n",
        &known,
    );
    assert_eq!(a, BTreeSet::from(["b".to_string()]));
    let b = imports(
        "b",
        "fn f() { crate::a::g() }\n#[cfg(test)]\nuse crate::c;",
        &known,
    );
    assert_eq!(b, BTreeSet::from(["a".to_string()]));
    // A child naming its parent is not an import of the parent.
    assert!(imports("layout::x", "use super::Item;", &known).is_empty());
    let edges = BTreeMap::from([
        ("a".to_string(), a),
        ("b".to_string(), b),
        ("c".to_string(), BTreeSet::from(["a".to_string()])),
    ]);
    assert_eq!(
        circles(&edges),
        vec![vec!["a".to_string(), "b".to_string()]]
    );
}
