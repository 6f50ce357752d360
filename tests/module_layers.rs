//! The product crates' modules form stacks: no import cycle between sibling modules at any level of a
//! crate's module tree, and no module reaching up into its crate root (the façade that re-exports
//! the modules, which sits on top of all of them).
//!
//! Each crate's sources are parsed with `syn` (the Rust parser, already in the build) and every path
//! in `use` items and in code (`crate::…`, `super::…`, `self::…`) is resolved to the module it
//! names. Module `A` depends on its sibling `B` when anything inside `A`'s subtree names anything
//! inside `B`'s. Each test prints the crate's top-level modules bottom to top (every module only
//! uses modules printed before it):
//!
//! ```text
//! cargo test -p jeprof-conformance --test module_layers -- --nocapture
//! ```
//!
//! With `MODULE_LAYERS_USES=1` it also prints, for each top-level module, the siblings it uses.
//!
//! Paths inside macro invocations (`format!(…)`) and doc comments are not seen: they do not make a
//! module depend on another.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// A module path below the crate root (`["report", "aggregate"]`); the root is `[]`.
type ModPath = Vec<String>;

/// What one crate's module tree says: the file-backed and inline modules, and every reference
/// from a module to a module path (the longest module prefix of what it names) or to an item of
/// the crate root.
#[derive(Default)]
struct Crate {
    /// Every module, with the file that holds its body.
    modules: BTreeMap<ModPath, PathBuf>,
    /// (from, to) pairs with an example of the path that made them.
    references: BTreeMap<(ModPath, ModPath), String>,
    /// Uses of an item defined or re-exported in the crate root, by a module below it.
    root_items: Vec<(ModPath, String)>,
    /// Items defined or re-exported at the root (names), filled before resolution.
    raw: Vec<(ModPath, Vec<String>)>,
    /// Each module's summary: the first sentence of its `//!` documentation.
    docs: BTreeMap<ModPath, String>,
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Parses the module tree from `root` (a `lib.rs` or `main.rs`).
fn load(root: &Path) -> Crate {
    let mut krate = Crate::default();
    walk_file(
        root,
        Vec::new(),
        root.parent().unwrap().to_path_buf(),
        &mut krate,
    );
    krate
}

/// Reads `file` as the body of module `path`; `dir` is where its `mod x;` children live.
fn walk_file(file: &Path, path: ModPath, dir: PathBuf, krate: &mut Crate) {
    let text = std::fs::read_to_string(file)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()));
    let parsed =
        syn::parse_file(&text).unwrap_or_else(|e| panic!("cannot parse {}: {e}", file.display()));
    krate.modules.insert(path.clone(), file.to_path_buf());
    krate.docs.insert(path.clone(), summary(&parsed.attrs));
    walk_items(&parsed.items, &path, &dir, file, krate);
}

fn path_attribute(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find_map(|a| {
        if !a.path().is_ident("path") {
            return None;
        }
        match &a.meta {
            syn::Meta::NameValue(nv) => match &nv.value {
                syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(s),
                    ..
                }) => Some(s.value()),
                _ => None,
            },
            _ => None,
        }
    })
}

/// The first sentence of the inner documentation (`//!`) among `attrs`, on one line: up to the
/// first `. ` (or the end of the first paragraph), rustdoc's link brackets removed.
fn summary(attrs: &[syn::Attribute]) -> String {
    let mut paragraph = Vec::new();
    for a in attrs {
        if !a.path().is_ident("doc") || matches!(a.style, syn::AttrStyle::Outer) {
            continue;
        }
        let syn::Meta::NameValue(nv) = &a.meta else {
            continue;
        };
        let syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(text),
            ..
        }) = &nv.value
        else {
            continue;
        };
        let line = text.value().trim().to_string();
        // A list or a blank line ends the first paragraph.
        if line.is_empty() || (line.starts_with("- ") && !paragraph.is_empty()) {
            if paragraph.is_empty() {
                continue;
            }
            break;
        }
        paragraph.push(line.trim_start_matches('#').trim().to_string());
    }
    let text = paragraph.join(" ").replace(['[', ']'], "");
    let end = text.find(". ").map_or(text.len(), |i| i + 1);
    text[..end].to_string()
}

/// `#[cfg(test)]`.
fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && matches!(&a.meta, syn::Meta::List(l) if l.tokens.to_string() == "test")
    })
}

fn walk_items(items: &[syn::Item], path: &ModPath, dir: &Path, file: &Path, krate: &mut Crate) {
    let mut collector = Paths { found: Vec::new() };
    for item in items {
        if let syn::Item::Mod(m) = item {
            if is_test_only(&m.attrs) {
                // Unit tests sit above everything they test.
                continue;
            }
            let mut child = path.clone();
            child.push(m.ident.to_string());
            match &m.content {
                Some((_, inner)) => {
                    krate.modules.insert(child.clone(), file.to_path_buf());
                    krate.docs.insert(child.clone(), summary(&m.attrs));
                    walk_items(inner, &child, &dir.join(m.ident.to_string()), file, krate);
                }
                None => {
                    let (child_file, child_dir) = if let Some(p) = path_attribute(&m.attrs) {
                        // Relative to the directory of the file that declares the module.
                        let f = file.parent().unwrap().join(p);
                        let d = f.parent().unwrap().to_path_buf();
                        (f, d)
                    } else {
                        let name = m.ident.to_string();
                        let flat = dir.join(format!("{name}.rs"));
                        if flat.is_file() {
                            (flat, dir.join(&name))
                        } else {
                            (dir.join(&name).join("mod.rs"), dir.join(&name))
                        }
                    };
                    walk_file(&child_file, child, child_dir, krate);
                }
            }
            continue;
        }
        if let syn::Item::Use(u) = item {
            let mut prefix = Vec::new();
            use_paths(&u.tree, &mut prefix, &mut collector.found);
            continue;
        }
        collector.visit_item(item);
    }
    krate.raw.push((path.clone(), Vec::new()));
    for segments in collector.found {
        krate.raw.last_mut().unwrap().1.push(segments.join("::"));
    }
}

/// Expands a `use` tree into the paths it imports (a glob keeps its prefix).
fn use_paths(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            use_paths(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let mut full = prefix.clone();
            full.push(n.ident.to_string());
            out.push(full);
        }
        syn::UseTree::Rename(r) => {
            let mut full = prefix.clone();
            full.push(r.ident.to_string());
            out.push(full);
        }
        syn::UseTree::Glob(_) => out.push(prefix.clone()),
        syn::UseTree::Group(g) => {
            for t in &g.items {
                use_paths(t, prefix, out);
            }
        }
    }
}

/// Every path written in code (types, expressions, patterns, bounds, macro names).
struct Paths {
    found: Vec<Vec<String>>,
}

impl<'ast> Visit<'ast> for Paths {
    fn visit_item_mod(&mut self, _: &'ast syn::ItemMod) {
        // Handled by `walk_items`, with the module's own path.
    }
    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        // `use` inside a function body.
        let mut prefix = Vec::new();
        use_paths(&u.tree, &mut prefix, &mut self.found);
    }
    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segments: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        if matches!(
            segments.first().map(String::as_str),
            Some("crate" | "super" | "self")
        ) {
            self.found.push(segments);
        }
        syn::visit::visit_path(self, p);
    }
}

impl Crate {
    /// Resolves every collected path to the module it names.
    fn resolve(&mut self) {
        let raw = std::mem::take(&mut self.raw);
        for (from, paths) in raw {
            for text in paths {
                let segments: Vec<&str> = text.split("::").collect();
                let mut target: ModPath = match segments[0] {
                    "crate" => Vec::new(),
                    "super" => {
                        let mut t = from.clone();
                        t.pop();
                        t
                    }
                    "self" => from.clone(),
                    _ => continue,
                };
                let mut rest = &segments[1..];
                while rest.first() == Some(&"super") {
                    target.pop();
                    rest = &rest[1..];
                }
                // The longest module prefix of what the path names.
                let mut consumed = 0;
                for s in rest {
                    let mut next = target.clone();
                    next.push((*s).to_string());
                    if self.modules.contains_key(&next) {
                        target = next;
                        consumed += 1;
                    } else {
                        break;
                    }
                }
                if target.is_empty() && consumed == 0 && !from.is_empty() && !rest.is_empty() {
                    self.root_items.push((from.clone(), text.clone()));
                    continue;
                }
                self.references
                    .entry((from.clone(), target))
                    .or_insert(text);
            }
        }
    }

    /// The children of `parent` and, for each, the siblings its subtree names.
    fn sibling_graph(&self, parent: &ModPath) -> BTreeMap<String, BTreeMap<String, String>> {
        let child_of = |m: &ModPath| -> Option<String> {
            (m.len() > parent.len() && m.starts_with(parent)).then(|| m[parent.len()].clone())
        };
        let mut graph: BTreeMap<String, BTreeMap<String, String>> = self
            .modules
            .keys()
            .filter(|m| m.len() == parent.len() + 1 && m.starts_with(parent))
            .map(|m| (m[parent.len()].clone(), BTreeMap::new()))
            .collect();
        for ((from, to), example) in &self.references {
            if let (Some(a), Some(b)) = (child_of(from), child_of(to)) {
                if a != b {
                    graph.get_mut(&a).unwrap().entry(b).or_insert_with(|| {
                        format!("{} names {example}", self.modules[from].display())
                    });
                }
            }
        }
        graph
    }
}

/// Orders `graph` so that every node comes after what it uses; on a cycle, returns its members.
fn layers(graph: &BTreeMap<String, BTreeMap<String, String>>) -> Result<Vec<String>, Vec<String>> {
    let mut order = Vec::new();
    let mut placed = BTreeSet::new();
    while placed.len() < graph.len() {
        let ready: Vec<&String> = graph
            .iter()
            .filter(|(n, uses)| !placed.contains(*n) && uses.keys().all(|u| placed.contains(u)))
            .map(|(n, _)| n)
            .collect();
        if ready.is_empty() {
            return Err(graph
                .keys()
                .filter(|n| !placed.contains(*n))
                .cloned()
                .collect());
        }
        for n in ready {
            placed.insert(n.clone());
            order.push(n.clone());
        }
    }
    Ok(order)
}

/// Writes the module map of `parent`'s children into `out`: bottom to top (each uses only those
/// before it), each with the siblings it uses and its summary, a folder's children indented below
/// it. Nothing for a level with a cycle (`check` reports those).
fn write_map(krate: &Crate, parent: &ModPath, out: &mut String) {
    let graph = krate.sibling_graph(parent);
    let Ok(order) = layers(&graph) else {
        return;
    };
    for name in order {
        let mut child = parent.clone();
        child.push(name.clone());
        let folder = krate
            .modules
            .keys()
            .any(|m| m.len() == child.len() + 1 && m.starts_with(&child));
        let uses: Vec<String> = graph[&name].keys().map(|u| format!("`{u}`")).collect();
        let uses = if uses.is_empty() {
            String::new()
        } else {
            format!(" (uses {})", uses.join(", "))
        };
        let doc = &krate.docs[&child];
        out.push_str(&format!(
            "{}- `{name}{}`{uses}{}{doc}\n",
            "  ".repeat(parent.len()),
            if folder { "/" } else { "" },
            if doc.is_empty() { "" } else { ": " },
        ));
        if folder {
            write_map(krate, &child, out);
        }
    }
}

/// The lines that open and close a crate's module map in its README.
fn map_markers(name: &str) -> (String, String) {
    (
        format!(
            "<!-- module map of {name}: written from the code by tests/module_layers.rs \
             (MODULE_MAP_BLESS=1 rewrites it), which fails when it differs -->"
        ),
        format!("<!-- end of the module map of {name} -->"),
    )
}

/// Holds the module map in `readme` (between [`map_markers`]) equal to the one the code gives;
/// with `MODULE_MAP_BLESS` set, rewrites it instead.
fn check_map(krate: &Crate, name: &str, readme: &str) {
    let path = workspace().join(readme);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let (open, close) = map_markers(name);
    let mut map = String::new();
    write_map(krate, &Vec::new(), &mut map);
    let block = format!("{open}\n\n{map}\n{close}");
    let (Some(start), Some(end)) = (text.find(&open), text.find(&close)) else {
        panic!("{readme} has no module map of {name}: put these lines where it belongs\n{block}");
    };
    let current = &text[start..end + close.len()];
    if current == block {
        return;
    }
    if std::env::var_os("MODULE_MAP_BLESS").is_some() {
        let rewritten = format!("{}{block}{}", &text[..start], &text[end + close.len()..]);
        std::fs::write(&path, rewritten).unwrap();
        return;
    }
    panic!(
        "{readme}'s module map of {name} differs from the code; MODULE_MAP_BLESS=1 rewrites it \
         as:\n{block}"
    );
}

/// Checks one crate: no cycle among siblings anywhere, nothing below the root naming a root item,
/// and its README's module map equal to the code's. Prints the top level bottom to top.
fn check(name: &str, root: &str, readme: Option<&str>) {
    let mut krate = load(&workspace().join(root));
    krate.resolve();
    let mut problems = Vec::new();
    for (from, text) in &krate.root_items {
        problems.push(format!(
            "{} (module {}) names `{text}`, an item of the crate root: import it from the module \
             that defines it",
            krate.modules[from].display(),
            from.join("::")
        ));
    }
    let parents: Vec<ModPath> = krate.modules.keys().cloned().collect();
    let mut top = Vec::new();
    for parent in &parents {
        let graph = krate.sibling_graph(parent);
        match layers(&graph) {
            Ok(order) => {
                if parent.is_empty() {
                    top = order;
                    if std::env::var_os("MODULE_LAYERS_USES").is_some() {
                        for (module, uses) in &graph {
                            let uses: Vec<&String> = uses.keys().collect();
                            println!("  {module} uses {uses:?}");
                        }
                    }
                }
            }
            Err(cycle) => {
                let mut edges = Vec::new();
                for a in &cycle {
                    for (b, example) in &graph[a] {
                        if cycle.contains(b) {
                            edges.push(format!("    {a} -> {b}: {example}"));
                        }
                    }
                }
                problems.push(format!(
                    "import cycle among the modules of `{}`: {}\n{}",
                    if parent.is_empty() {
                        name.to_string()
                    } else {
                        parent.join("::")
                    },
                    cycle.join(", "),
                    edges.join("\n")
                ));
            }
        }
    }
    println!("{name}, bottom to top: {}", top.join(" → "));
    assert!(
        problems.is_empty(),
        "{name}: the modules do not form a stack:\n{}",
        problems.join("\n")
    );
    if let Some(readme) = readme {
        check_map(&krate, name, readme);
    }
}

#[test]
fn dumpfmt_modules_form_a_stack() {
    check(
        "jeprof-dumpfmt",
        "dumpfmt/src/lib.rs",
        Some("dumpfmt/README.md"),
    );
}

#[test]
fn page_modules_form_a_stack() {
    check("jeprof-page", "page/src/lib.rs", Some("page/README.md"));
}

/// The shim's stated rule (`parts/mod.rs`): its parts import no sibling part, but for the one
/// exception it names.
#[test]
fn shim_parts_import_no_other_part_but_the_named_exception() {
    let mut krate = load(&workspace().join("shim/src/lib.rs"));
    krate.resolve();
    let graph = krate.sibling_graph(&vec!["parts".to_string()]);
    let uses: Vec<(String, String)> = graph
        .iter()
        .flat_map(|(a, uses)| uses.keys().map(move |b| (a.clone(), b.clone())))
        .collect();
    assert_eq!(
        uses,
        vec![("thread_totals".to_string(), "live_samples".to_string())],
        "parts/mod.rs names one exception to \"parts do not import each other\"; update it \
         and this test together"
    );
}

#[test]
fn shim_modules_form_a_stack() {
    check("jeprof-shim", "shim/src/lib.rs", Some("shim/README.md"));
}

#[test]
fn compat_library_modules_form_a_stack() {
    check(
        "jeprof-compat (library)",
        "jeprof-compat/src/lib.rs",
        Some("jeprof-compat/README.md"),
    );
}

#[test]
fn compat_binary_modules_form_a_stack() {
    check(
        "jeprof-compat (binary)",
        "jeprof-compat/src/main.rs",
        Some("jeprof-compat/README.md"),
    );
}

#[test]
fn preload_modules_form_a_stack() {
    check("jeprof-preload", "preload/src/lib.rs", None);
}

/// The checker itself finds a cycle and an arrow up to the root (a checker that can fail).
#[test]
fn the_checker_finds_a_cycle_and_a_use_of_the_root() {
    let dir = std::env::temp_dir().join(format!("module-layers-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("b")).unwrap();
    std::fs::write(
        dir.join("lib.rs"),
        "mod a; mod b; pub use a::A; pub fn façade() {}",
    )
    .unwrap();
    std::fs::write(dir.join("a.rs"), "use crate::b::c::C; pub struct A;").unwrap();
    std::fs::write(dir.join("b/mod.rs"), "pub mod c; pub mod d;").unwrap();
    std::fs::write(
        dir.join("b/c.rs"),
        "pub struct C; fn f() -> crate::a::A { crate::façade(); crate::a::A }",
    )
    .unwrap();
    std::fs::write(dir.join("b/d.rs"), "use super::c::C;").unwrap();
    let mut krate = load(&dir.join("lib.rs"));
    krate.resolve();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(
        krate.root_items,
        vec![(
            vec!["b".to_string(), "c".to_string()],
            "crate::façade".to_string()
        )]
    );
    assert_eq!(
        layers(&krate.sibling_graph(&Vec::new())),
        Err(vec!["a".to_string(), "b".to_string()])
    );
    assert_eq!(
        layers(&krate.sibling_graph(&vec!["b".to_string()])),
        Ok(vec!["c".to_string(), "d".to_string()])
    );
}
