//! The library's modules import each other without a loop, and the kernel stays narrow: the
//! layering the crate doc draws, checked on the source on every test run. (`cargo modules
//! dependencies -p mote-host --lib` draws the same graph; this test needs no tool.)

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every module of `host/src` by path (`kernel::delivery`), with its file.
fn modules() -> BTreeMap<String, PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = BTreeMap::new();
    let mut stack = vec![root.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("host/src is readable") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let relative = path.strip_prefix(&root).expect("under src");
            let mut parts: Vec<String> = relative
                .with_extension("")
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
                parts.pop();
            }
            out.insert(parts.join("::"), path);
        }
    }
    out
}

/// The source without its `#[cfg(test)]` parts (tests may import anything) and comments.
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).expect("a readable module");
    let mut out = String::new();
    let mut skipping = false;
    let mut depth = 0i32;
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        if skipping {
            depth += line.matches('{').count() as i32 - line.matches('}').count() as i32;
            if depth <= 0 && line.contains('}') {
                skipping = false;
            }
            continue;
        }
        if trimmed.starts_with("#[cfg(test)]") {
            // Skip the next item: up to its closing brace (or its semicolon).
            for next in lines.by_ref() {
                depth = next.matches('{').count() as i32 - next.matches('}').count() as i32;
                if next.trim_end().ends_with(';') && depth == 0 {
                    break;
                }
                if depth > 0 {
                    skipping = true;
                    break;
                }
            }
            continue;
        }
        if trimmed.starts_with("//") {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The paths a `use` tree names, braces expanded: `a::{b, c::d}` gives `a::b`, `a::c::d`.
fn expand(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        let path = tree.split(" as ").next().unwrap_or(tree).trim();
        return vec![path.trim_end_matches("::self").to_owned()];
    };
    let prefix = tree[..open].trim_end_matches("::").to_owned();
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
        .into_iter()
        .filter(|p| !p.trim().is_empty())
        .flat_map(|p| {
            expand(p).into_iter().map(|rest| {
                if rest == "self" {
                    prefix.clone()
                } else {
                    format!("{prefix}::{rest}")
                }
            })
        })
        .collect()
}

/// The module a path in module `from` lands in (the longest module prefix), if it is ours.
fn resolve(from: &str, path: &str, modules: &BTreeMap<String, PathBuf>) -> Option<String> {
    let mut segments: Vec<&str> = path.split("::").collect();
    let mut base: Vec<&str> = if from.is_empty() {
        Vec::new()
    } else {
        from.split("::").collect()
    };
    match segments.first() {
        Some(&"crate") => {
            base.clear();
            segments.remove(0);
        }
        Some(&"super") | Some(&"self") => {
            while let Some(&s) = segments.first() {
                match s {
                    "super" => {
                        base.pop();
                    }
                    "self" => {}
                    _ => break,
                }
                segments.remove(0);
            }
        }
        // A child module named directly (`use kernel::X` in lib.rs) or an external crate.
        _ => {}
    }
    let full: Vec<&str> = base.into_iter().chain(segments).collect();
    (0..=full.len())
        .rev()
        .map(|k| full[..k].join("::"))
        .find(|candidate| modules.contains_key(candidate))
}

/// Module -> the modules it imports (the crate root's re-exports are the public API, not a
/// layer, and are left out).
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let modules = modules();
    let mut graph = BTreeMap::new();
    for (name, file) in &modules {
        let source = code(file);
        let mut deps = BTreeSet::new();
        let mut lines = source.lines();
        while let Some(line) = lines.next() {
            // A `use` declaration starts a line, after its visibility if any.
            let trimmed = line.trim_start();
            let statement = ["use ", "pub use ", "pub(crate) use ", "pub(super) use "]
                .iter()
                .find_map(|start| trimmed.strip_prefix(start));
            let Some(first) = statement else { continue };
            let mut tree = first.to_owned();
            while !tree.contains(';') {
                let Some(next) = lines.next() else { break };
                tree.push_str(next);
            }
            let tree = tree.split(';').next().unwrap_or_default();
            for path in expand(tree) {
                if let Some(target) = resolve(name, &path, &modules)
                    && &target != name
                    && !target.is_empty()
                {
                    deps.insert(target);
                }
            }
        }
        if !name.is_empty() {
            graph.insert(name.clone(), deps);
        }
    }
    graph
}

/// The modules on a cycle, if any.
fn cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == node) {
            return Some(path[i..].to_vec());
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(found) = visit(next, graph, path, done) {
                return Some(found);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}

#[test]
fn no_two_modules_import_each_other_even_through_others() {
    let graph = imports();
    assert!(graph.len() > 40, "found only {} modules", graph.len());
    assert!(
        graph["kernel::delivery"].contains("kernel"),
        "the scan sees imports: {:?}",
        graph["kernel::delivery"]
    );
    if let Some(cycle) = cycle(&graph) {
        panic!(
            "these modules import each other in a loop: {}",
            cycle.join(" -> ")
        );
    }
}

#[test]
fn the_kernel_knows_no_capability_module_deployment_or_cell() {
    let graph = imports();
    for (module, deps) in graph.iter().filter(|(m, _)| m.starts_with("kernel")) {
        for dep in deps {
            let above = ["caps", "deploy", "system", "actor::cell", "actor::instance"]
                .iter()
                .any(|layer| dep == layer || dep.starts_with(&format!("{layer}::")));
            assert!(!above, "{module} imports {dep}, a layer above the kernel");
        }
    }
}

#[test]
fn a_capability_unit_imports_no_other_unit_but_the_timer_wheel() {
    let graph = imports();
    let units = [
        "host",
        "supervision",
        "timers",
        "messaging",
        "persistence",
        "clock",
        "forwarding",
        "lookup",
        "naming",
        "stashing",
        "callouts",
        "priority",
        "lifecycle",
        "delivery",
        "wasi",
    ];
    for unit in units {
        let prefix = format!("caps::{unit}");
        for (module, deps) in graph.iter().filter(|(m, _)| m.starts_with(&prefix)) {
            for dep in deps {
                let other = units.iter().any(|u| {
                    *u != unit
                        && (dep == &format!("caps::{u}")
                            || dep.starts_with(&format!("caps::{u}::")))
                });
                // Reminders fire from a wheel of their own, the same data structure as timers.
                let allowed = dep == "caps::timers::wheel";
                assert!(!other || allowed, "{module} imports {dep}");
                assert_ne!(dep, "caps", "{module} imports the registration list");
            }
        }
    }
}
