//! The core's modules depend on each other one way: the trait and config (`grouper`), the
//! snapshot framing (`snapshot`, bytes only), the groupers, and the registry above them.
//! A `crate::<module>` path anywhere in a module's files, tests included, is a dependency.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Every top-level module of `src` and the top-level modules its files name.
fn dependencies() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut pending = vec![src.clone()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
                continue;
            }
            let relative = path.strip_prefix(&src).unwrap();
            let top = relative.components().next().unwrap().as_os_str().to_string_lossy();
            let module = top.trim_end_matches(".rs").to_owned();
            if module == "lib" {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let code = text.lines().map(|line| line.split("//").next().unwrap_or(""));
            let named = graph.entry(module.clone()).or_default();
            for line in code {
                for (at, _) in line.match_indices("crate::") {
                    let rest = &line[at + "crate::".len()..];
                    let name: String =
                        rest.chars().take_while(|c| c.is_ascii_lowercase() || *c == '_').collect();
                    if !name.is_empty() && name != module {
                        named.insert(name);
                    }
                }
            }
        }
    }
    graph
}

#[test]
fn the_modules_depend_on_each_other_one_way() {
    let graph = dependencies();
    // Depth-first search for a back edge; the path is the circle.
    fn visit<'a>(
        module: &'a str,
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|&m| m == module) {
            let mut circle: Vec<String> = path[at..].iter().map(|m| m.to_string()).collect();
            circle.push(module.to_owned());
            return Some(circle);
        }
        if !done.insert(module) {
            return None;
        }
        path.push(module);
        for next in graph.get(module).into_iter().flatten() {
            if graph.contains_key(next.as_str())
                && let Some(circle) = visit(next, graph, path, done)
            {
                return Some(circle);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    for module in graph.keys() {
        let circle = visit(module, &graph, &mut Vec::new(), &mut done);
        assert!(
            circle.is_none(),
            "a circle among the core's modules: {}",
            circle.unwrap().join(" -> ")
        );
    }
    assert!(
        graph["snapshot"].iter().all(|m| m == "error" || m == "params"),
        "{:?}",
        graph["snapshot"]
    );
    assert!(!graph["grouper"].contains("registry") && !graph["grouper"].contains("groupers"));
}
