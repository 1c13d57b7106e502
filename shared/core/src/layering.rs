//! The layering of `floe-core`'s modules, checked from their source: the bottom ones import
//! nothing above them (ARCHITECTURE.md, "Code map"). Each rule names a module (a file, or
//! a folder and all its files) and the modules of the crate it may import, or those it
//! must not; a `use` or path naming another breaks the build's tests here.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// What a module may import of the crate besides itself.
enum Rule {
    /// Only these.
    Only(&'static [&'static str]),
    /// Anything but these.
    Not(&'static [&'static str]),
}

/// From the bottom up.
const RULES: &[(&str, Rule)] = &[
    ("vocabulary", Rule::Only(&[])),
    // Every layer's errors implement its `Retryable`.
    ("retry", Rule::Only(&[])),
    ("partition", Rule::Only(&["retry"])),
    ("schema", Rule::Only(&["vocabulary"])),
    ("config", Rule::Only(&["vocabulary", "segment", "partition", "schema"])),
    // A catalog is opened from its `[catalog]` settings (the REST catalog's).
    ("catalog", Rule::Only(&["vocabulary", "retry", "config"])),
    ("lock", Rule::Only(&["vocabulary", "retry"])),
    // Tables do not know the tasks they are planned into, nor who plans them.
    ("table", Rule::Not(&["task", "materializer", "committer", "maintenance", "queue"])),
    ("task", Rule::Not(&["materializer", "committer", "maintenance", "queue"])),
    // The materializer and the committer meet only in the task contract.
    ("materializer", Rule::Not(&["committer", "maintenance"])),
    ("committer", Rule::Not(&["materializer", "maintenance"])),
];

/// The source files of module `name`: `src/<name>.rs` and everything under `src/<name>/`.
fn files(name: &str) -> Vec<PathBuf> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    let single = src.join(format!("{name}.rs"));
    if single.exists() {
        files.push(single);
    }
    let mut dirs = vec![src.join(name)];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    assert!(!files.is_empty(), "no source for module {name}");
    files
}

/// The crate's top-level modules `source` names (through `crate::`, or `super::` when
/// `super_is_crate`: a file whose parent is the crate root), leaving out comments and
/// the file's unit tests (everything from its first `#[cfg(test)]`).
fn imports(source: &str, super_is_crate: bool) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for line in source.lines().take_while(|l| l.trim() != "#[cfg(test)]") {
        let code = line.split("//").next().unwrap_or_default();
        let mut prefixes = vec!["crate::"];
        if super_is_crate {
            prefixes.push("super::");
        }
        for prefix in prefixes {
            for (at, _) in code.match_indices(prefix) {
                let after = &code[at + prefix.len()..];
                let module: String = after.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                let preceded = code[..at].chars().next_back().is_some_and(|c| c.is_alphanumeric() || c == '_');
                if !module.is_empty() && !preceded {
                    found.insert(module);
                }
            }
        }
    }
    found
}

/// `name`'s imports of the crate beyond itself.
fn imports_of(name: &str) -> BTreeSet<String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut found = BTreeSet::new();
    for file in files(name) {
        let source = std::fs::read_to_string(&file).unwrap();
        // `super::` is the crate's root in `src/<name>.rs` and `src/<name>/mod.rs`.
        let at_root = file.parent() == Some(src.as_path());
        let module_root = file.parent() == Some(src.join(name).as_path()) && file.ends_with("mod.rs");
        found.extend(imports(&source, at_root || module_root));
    }
    found.remove(name);
    found
}

#[test]
fn the_scanner_sees_imports_and_skips_comments_and_tests() {
    let source = "use crate::task::{A, B};\n// crate::committer\nfn f() -> crate::table::X { super::lock::y() } // crate::queue\n\
                  #[cfg(test)]\nmod tests { use crate::maintenance; }";
    assert_eq!(imports(source, false), BTreeSet::from(["task".to_string(), "table".to_string()]));
    assert_eq!(imports(source, true), BTreeSet::from(["task".to_string(), "table".to_string(), "lock".to_string()]));
}

#[test]
fn lower_modules_never_import_upper_ones() {
    let mut broken = Vec::new();
    for (name, rule) in RULES {
        let imported = imports_of(name);
        let wrong: Vec<&String> = match rule {
            Rule::Only(allowed) => imported.iter().filter(|m| !allowed.contains(&m.as_str())).collect(),
            Rule::Not(denied) => imported.iter().filter(|m| denied.contains(&m.as_str())).collect(),
        };
        if !wrong.is_empty() {
            broken.push(format!("{name} imports {wrong:?}"));
        }
    }
    assert!(broken.is_empty(), "the layering is broken (ARCHITECTURE.md, \"Code map\"): {broken:#?}");
}
