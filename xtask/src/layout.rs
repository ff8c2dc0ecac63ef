//! `cargo xtask layout`: the two rules that keep the workspace readable,
//! checked before the tests run (docs/ARCHITECTURE.md, "Structure, and
//! why"):
//! - no file of a crate imports another that imports it back, directly or
//!   through others (an import is a `crate::` or `super::` path naming the
//!   other file's module; test modules and files may import anything);
//! - no source file passes [`MAX_LINES`] lines;
//! - a database is reached through the access rules: in the HTTP API the
//!   compiler keeps the store out of every module but its one door
//!   (`base::door`), and across the workspace this rule keeps the ways
//!   past the rules (opening a database from the store, a reader's scoped
//!   handle made whole) in the files named for them ([`DOOR_EXCEPTIONS`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Longer files are split by concern (long test modules go to files of
/// their own).
pub const MAX_LINES: usize = 1_000;

/// A module's path inside its crate (`["database", "bulk_docs"]`).
type ModPath = Vec<String>;

/// Checks every crate under `crates/`, and the lengths of every source file
/// under `crates/`, `tests/` and `xtask/`. Returns what breaks the rules.
pub fn check(root: &Path) -> Result<(), String> {
    let mut problems = Vec::new();
    let mut crates: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
        .map_err(|e| format!("reading crates/: {e}"))?
        .filter_map(|entry| entry.ok().map(|e| e.path().join("src")))
        .filter(|src| src.is_dir())
        .collect();
    crates.sort();
    for src in &crates {
        let files = module_files(src);
        let name = src
            .parent()
            .and_then(Path::file_name)
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        for circle in circles(&imports(&files)) {
            let names: Vec<String> = circle.iter().map(display).collect();
            problems.push(format!(
                "import circle in {name}: {} files: {}",
                names.len(),
                names.join(", ")
            ));
        }
    }
    for dir in ["crates", "tests", "xtask"] {
        for file in rust_files(&root.join(dir)) {
            let lines = std::fs::read_to_string(&file)
                .map(|text| text.lines().count())
                .unwrap_or(0);
            if lines > MAX_LINES {
                let shown = file.strip_prefix(root).unwrap_or(&file);
                problems.push(format!(
                    "{} has {lines} lines (at most {MAX_LINES})",
                    shown.display()
                ));
            }
        }
    }
    problems.extend(door_exceptions_out_of_place(root));
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "the layout breaks its rules:\n  {}",
            problems.join("\n  ")
        ))
    }
}

/// The ways past the access rules to a database, and the only files
/// (under `crates/`, the store's own crates aside) that may take them:
/// - `store.db(`: a database opened from the store, whole. The HTTP API's
///   door and authenticator, the replication rules and the replicator's
///   local peer (each then asks the gate), the documents manager (it reads
///   `_replicator` as the server), and the command line's offline tools.
/// - `.unscoped()`: a reader's scoped handle made whole again, for what
///   serves every reader: design documents, Mango's indexes, the search
///   index builder, the validation functions, the access rule's own
///   look-ups.
/// - `for_logins()`: the store lent to the authenticator.
pub const DOOR_EXCEPTIONS: &[(&str, &[&str])] = &[
    (
        "store.db(",
        &[
            "http-api/src/base/door.rs",
            "http-api/src/base/auth.rs",
            "access/src/replication.rs",
            "replicator/src/peer/local.rs",
            "server/src/manager.rs",
            "server/src/main.rs",
            "server/src/backup/peer.rs",
        ],
    ),
    (
        ".unscoped()",
        &[
            "http-api/src/design/mod.rs",
            "http-api/src/design/search.rs",
            "http-api/src/find.rs",
            "search/src/update.rs",
            "design-functions/src/validation.rs",
            "access/src/per_doc.rs",
        ],
    ),
    (
        "for_logins()",
        &[
            "http-api/src/base/door.rs",
            "http-api/src/base/auth.rs",
            "http-api/src/server/session.rs",
            "http-api/src/lib.rs",
        ],
    ),
];

/// The store's own crates: they are what the rules guard.
const STORE_CRATES: &[&str] = &[
    "store",
    "store-sqlite",
    "store-postgres",
    "store-conformance",
];

/// Where [`DOOR_EXCEPTIONS`] are taken outside their files.
fn door_exceptions_out_of_place(root: &Path) -> Vec<String> {
    let crates = root.join("crates");
    let mut problems = Vec::new();
    let Ok(entries) = std::fs::read_dir(&crates) else {
        return problems;
    };
    let mut dirs: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    dirs.sort();
    for dir in dirs {
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if STORE_CRATES.contains(&name.as_str()) {
            continue;
        }
        for file in rust_files(&dir.join("src")) {
            let Ok(text) = std::fs::read_to_string(&file) else {
                continue;
            };
            let rel = file
                .strip_prefix(&crates)
                .map(|p| p.to_string_lossy().replace('\\', "/"))
                .unwrap_or_default();
            let code = without_comments(&text);
            for (pattern, allowed) in DOOR_EXCEPTIONS {
                if code.contains(pattern) && !allowed.contains(&rel.as_str()) {
                    problems.push(format!(
                        "crates/{rel} uses {pattern}: a database is reached through the access \
                         rules (allowed in {})",
                        allowed.join(", ")
                    ));
                }
            }
        }
    }
    problems
}

fn display(module: &ModPath) -> String {
    if module.is_empty() {
        "lib".into()
    } else {
        module.join("/")
    }
}

/// Every `.rs` file below `dir`, skipping build output and npm packages.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            if path.is_dir() {
                if name != "target" && name != "node_modules" {
                    pending.push(path);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// The crate's modules and their files; test files (`tests.rs`, anything
/// under a `tests` folder) are left out: tests may import anything.
fn module_files(src: &Path) -> BTreeMap<ModPath, PathBuf> {
    let mut files = BTreeMap::new();
    for file in rust_files(src) {
        let Ok(rel) = file
            .with_extension("")
            .strip_prefix(src)
            .map(Path::to_path_buf)
        else {
            continue;
        };
        let mut module: ModPath = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if module.iter().any(|part| part == "tests") {
            continue;
        }
        if matches!(
            module.last().map(String::as_str),
            Some("lib" | "main" | "mod")
        ) {
            module.pop();
        }
        files.insert(module, file);
    }
    files
}

/// Which module files each module file imports.
fn imports(files: &BTreeMap<ModPath, PathBuf>) -> BTreeMap<ModPath, BTreeSet<ModPath>> {
    let mut edges = BTreeMap::new();
    for (module, file) in files {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        let code = without_test_modules(&without_comments(&text));
        let mut targets = BTreeSet::new();
        for (head, path) in paths(&code) {
            let mut full: ModPath = if head == "crate" {
                Vec::new()
            } else {
                module[..module.len().saturating_sub(1)].to_vec()
            };
            full.extend(path);
            while !full.is_empty() && !files.contains_key(&full) {
                full.pop();
            }
            // A module's own children are part of it, not imports.
            if !full.is_empty() && !full.starts_with(module) {
                targets.insert(full);
            }
        }
        edges.insert(module.clone(), targets);
    }
    edges
}

/// The code without `//` comments (doc comments name paths freely).
fn without_comments(text: &str) -> String {
    text.lines()
        .map(|line| line.find("//").map_or(line, |at| &line[..at]))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The code without the bodies of `#[cfg(test)] mod name { ... }`.
fn without_test_modules(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at + "#[cfg(test)]".len()..];
        let trimmed = after.trim_start();
        let is_inline_module = trimmed.split_once('{').is_some_and(|(head, _)| {
            head.split_whitespace().any(|w| w == "mod") && !head.contains(';')
        });
        if !is_inline_module {
            rest = after;
            continue;
        }
        let open = after.find('{').unwrap_or(0);
        let mut depth = 0usize;
        let mut end = after.len();
        for (i, c) in after[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        end = open + i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// Every `crate::a::b` and `super::a::b` path in the code, as its head
/// and its segments; a `use crate::{a::b, c}` group gives one per item.
fn paths(code: &str) -> Vec<(&'static str, Vec<String>)> {
    let mut out = Vec::new();
    for head in ["crate", "super"] {
        let needle = format!("{head}::");
        let mut from = 0;
        while let Some(found) = code[from..].find(&needle) {
            let start = from + found;
            from = start + needle.len();
            let before = code[..start].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let rest = &code[from..];
            if let Some(group) = rest.strip_prefix('{') {
                let inner = group.split('}').next().unwrap_or("");
                for item in inner.split(',') {
                    let item = item.split(" as ").next().unwrap_or("").trim();
                    let segments = segments_of(item);
                    if !segments.is_empty() && segments[0] != "self" {
                        out.push((if head == "crate" { "crate" } else { "super" }, segments));
                    }
                }
            } else {
                let segments = segments_of(rest);
                if !segments.is_empty() {
                    out.push((if head == "crate" { "crate" } else { "super" }, segments));
                }
            }
        }
    }
    out
}

/// The leading `a::b::c` of `text`, as its segments.
fn segments_of(text: &str) -> Vec<String> {
    let mut segments = Vec::new();
    let mut rest = text;
    loop {
        let len = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        if len == 0 {
            break;
        }
        segments.push(rest[..len].to_string());
        match rest[len..].strip_prefix("::") {
            Some(next) => rest = next,
            None => break,
        }
    }
    segments
}

/// The strongly connected groups of more than one module (Tarjan's).
fn circles(edges: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> Vec<Vec<ModPath>> {
    struct Walk<'a> {
        edges: &'a BTreeMap<ModPath, BTreeSet<ModPath>>,
        index: BTreeMap<&'a ModPath, usize>,
        low: BTreeMap<&'a ModPath, usize>,
        stack: Vec<&'a ModPath>,
        on_stack: BTreeSet<&'a ModPath>,
        found: Vec<Vec<ModPath>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, node: &'a ModPath) {
            let n = self.index.len();
            self.index.insert(node, n);
            self.low.insert(node, n);
            self.stack.push(node);
            self.on_stack.insert(node);
            let edges = self.edges;
            for next in edges.get(node).into_iter().flatten() {
                if !edges.contains_key(next) {
                    continue;
                }
                if !self.index.contains_key(next) {
                    self.visit(next);
                    let low = self.low[node].min(self.low[next]);
                    self.low.insert(node, low);
                } else if self.on_stack.contains(next) {
                    let low = self.low[node].min(self.index[next]);
                    self.low.insert(node, low);
                }
            }
            if self.low[node] == self.index[node] {
                let mut group = Vec::new();
                while let Some(top) = self.stack.pop() {
                    self.on_stack.remove(top);
                    group.push(top.clone());
                    if top == node {
                        break;
                    }
                }
                if group.len() > 1 {
                    group.sort();
                    self.found.push(group);
                }
            }
        }
    }
    let mut walk = Walk {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for node in edges.keys() {
        if !walk.index.contains_key(node) {
            walk.visit(node);
        }
    }
    walk.found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crate_with(name: &str, files: &[(&str, &str)]) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("xtask-layout-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for (path, text) in files {
            let path = dir.join("src").join(path);
            std::fs::create_dir_all(path.parent().expect("a parent")).expect("a folder");
            std::fs::write(path, text).expect("a file");
        }
        dir.join("src")
    }

    fn circles_in(name: &str, files: &[(&str, &str)]) -> Vec<Vec<String>> {
        let src = crate_with(name, files);
        let found = circles(&imports(&module_files(&src)))
            .into_iter()
            .map(|c| c.iter().map(display).collect())
            .collect();
        let _ = std::fs::remove_dir_all(src.parent().expect("a crate folder"));
        found
    }

    #[test]
    fn files_importing_each_other_through_a_third_are_a_circle() {
        let found = circles_in(
            "three",
            &[
                ("lib.rs", "mod a; mod b; mod c;"),
                ("a.rs", "use crate::b::thing;"),
                ("b.rs", "fn f() { crate::c::other(); }"),
                ("c.rs", "use crate::{a::X, b};"),
            ],
        );
        assert_eq!(found, vec![vec!["a", "b", "c"]]);
    }

    #[test]
    fn a_parent_using_its_children_and_tests_importing_anything_are_no_circle() {
        let found = circles_in(
            "floors",
            &[
                ("lib.rs", "mod base; mod handlers;"),
                (
                    "base/mod.rs",
                    "pub mod error; use self::error::E; use crate::base::error::F;",
                ),
                ("base/error.rs", "use super::mod_level;"),
                (
                    "handlers.rs",
                    "use crate::base::error::E;\n#[cfg(test)]\nmod tests { use crate::handlers::x; }",
                ),
                ("base/tests.rs", "use crate::handlers::x;"),
                (
                    "base/other.rs",
                    "// crate::handlers::y in a comment\nfn f() {}",
                ),
            ],
        );
        assert!(found.is_empty(), "{found:?}");
    }

    #[test]
    fn super_paths_resolve_from_the_files_module() {
        let found = circles_in(
            "super",
            &[
                ("lib.rs", "mod peer;"),
                (
                    "peer/mod.rs",
                    "mod http; mod local; use crate::peer::http::Request;",
                ),
                ("peer/http.rs", "use super::local::Gate;"),
                ("peer/local.rs", "use super::http::Request;"),
            ],
        );
        assert_eq!(found, vec![vec!["peer/http", "peer/local"]]);
    }

    #[test]
    fn a_way_past_the_door_is_refused_outside_its_files() {
        let root = std::env::temp_dir().join(format!("xtask-door-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let src = root.join("crates").join("http-api").join("src");
        std::fs::create_dir_all(src.join("design")).expect("a folder");
        std::fs::write(src.join("design/mod.rs"), "fn f(d: D) { d.unscoped(); }").expect("a file");
        std::fs::write(
            src.join("handler.rs"),
            "// d.unscoped() in a comment\nfn f() {}",
        )
        .expect("a file");
        assert!(door_exceptions_out_of_place(&root).is_empty());
        std::fs::write(src.join("handler.rs"), "fn f(d: D) { d.unscoped().get(); }")
            .expect("a file");
        let problems = door_exceptions_out_of_place(&root);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].contains("handler.rs uses .unscoped()"),
            "{problems:?}"
        );
        // Any crate but the store's own.
        let other = root.join("crates").join("views").join("src");
        std::fs::create_dir_all(&other).expect("a folder");
        std::fs::write(
            other.join("lib.rs"),
            "async fn f(s: S) { s.store.db(\"x\").await; }",
        )
        .expect("a file");
        let store = root.join("crates").join("store").join("src");
        std::fs::create_dir_all(&store).expect("a folder");
        std::fs::write(
            store.join("lib.rs"),
            "async fn f(s: S) { s.store.db(\"x\").await; }",
        )
        .expect("a file");
        let problems = door_exceptions_out_of_place(&root);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            problems
                .iter()
                .any(|p| p.contains("views/src/lib.rs uses store.db(")),
            "{problems:?}"
        );
        let _ = std::fs::remove_dir_all(&root);
    }
}
