//! The per-grouper test data in `tests/data/groupers.json` (at the repository root, read by
//! the Python tests too): the parameters of busy runs and of the routing digests, and the
//! digests the tests pin. The file is written by hand for parameters and by bless mode for
//! digests: `KEYSPLIT_BLESS=1` makes the digest tests record what they compute, rewriting
//! the file in place (sorted keys, 2-space indent), instead of asserting it.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use keysplit_core::params::{ParamValue, Params};
use serde_json::{Map, Value};

/// The command that records every digest in the data file.
pub const BLESS_COMMAND: &str =
    "KEYSPLIT_BLESS=1 cargo test -p keysplit-core --test routing_digests --test snapshot";

/// `tests/data/groupers.json`, two levels above this crate's manifest.
fn path() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).ancestors().nth(2).unwrap();
    root.join("tests/data/groupers.json")
}

fn read() -> Value {
    let path = path();
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

/// The file as read at the first use in this test binary.
static DATA: LazyLock<Value> = LazyLock::new(read);

fn groupers(data: &Value) -> &Map<String, Value> {
    data.get("groupers")
        .and_then(Value::as_object)
        .unwrap_or_else(|| panic!("{} has no \"groupers\" object", path().display()))
}

/// Whether `KEYSPLIT_BLESS` asks the digest tests to record instead of assert.
fn blessing() -> bool {
    std::env::var_os("KEYSPLIT_BLESS").is_some_and(|v| !v.is_empty() && v != "0")
}

fn param_value(grouper: &str, key: &str, value: &Value) -> ParamValue {
    match value {
        Value::Bool(b) => ParamValue::Bool(*b),
        Value::Number(n) if n.is_i64() => ParamValue::Int(n.as_i64().unwrap()),
        Value::Number(n) if n.is_f64() => ParamValue::Float(n.as_f64().unwrap()),
        Value::String(s) => ParamValue::Str(Cow::Owned(s.clone())),
        _ => panic!("{grouper}: parameter {key} = {value} is not a bool, i64, float or string"),
    }
}

/// `grouper`'s parameters of one kind (`"busy_params"`, `"digest_params"`). A grouper with
/// no entry fails, naming the bless command that adds one; in bless mode it gets none.
pub fn params(grouper: &str, kind: &str) -> Params {
    let Some(entry) = groupers(&DATA).get(grouper) else {
        assert!(
            blessing(),
            "{grouper} has no entry in {}: run `{BLESS_COMMAND}` to add one (with empty \
             parameters: edit them, then bless again)",
            path().display()
        );
        return Params::new();
    };
    let Some(params) = entry.get(kind).and_then(Value::as_object) else {
        assert!(blessing(), "{grouper} has no {kind} object in {}", path().display());
        return Params::new();
    };
    params.iter().map(|(k, v)| (k.clone(), param_value(grouper, k, v))).collect()
}

fn hex(digest: u64) -> String {
    format!("{digest:#018x}")
}

fn parse_hex(text: &str) -> Option<u64> {
    u64::from_str_radix(text.strip_prefix("0x")?, 16).ok()
}

/// The digests one test computes: checked against the file, or in bless mode, written to it.
pub struct Digests {
    bless: bool,
    /// Grouper, path within its entry, digest: in the order computed.
    computed: Vec<(String, Vec<String>, u64)>,
}

impl Default for Digests {
    fn default() -> Self {
        Self::new()
    }
}

impl Digests {
    pub fn new() -> Self {
        Self { bless: blessing(), computed: Vec::new() }
    }

    /// Records `digest`, computed for `grouper`, at `path` in its entry (such as
    /// `["routing_digests", "7", "uint64"]` or `["state_digest"]`).
    pub fn check(&mut self, grouper: &str, path: &[&str], digest: u64) {
        let path = path.iter().map(|&p| p.to_owned()).collect();
        self.computed.push((grouper.to_owned(), path, digest));
    }

    /// Fails with every digest that differs from the file's, or is missing from it, and with
    /// every entry of the file that no digest was computed for (a grouper no longer
    /// registered). `changed` says what a differing digest means. In bless mode, writes the
    /// digests instead: each grouper's fields named by a path's first step are replaced whole.
    pub fn finish(self, changed: &str) {
        if self.bless {
            self.write();
            return;
        }
        let groupers = groupers(&DATA);
        let (mut differ, mut missing) = (Vec::new(), Vec::new());
        for (grouper, path, digest) in &self.computed {
            let recorded = path.iter().fold(groupers.get(grouper), |v, step| v?.get(step));
            let at = format!("{grouper} {}", path.join("."));
            match recorded.and_then(Value::as_str).map(|s| (s, parse_hex(s))) {
                None => missing.push(at),
                Some((text, None)) => panic!("{at}: {text:?} is not a hex digest \"0x…\""),
                Some((_, Some(recorded))) if recorded == *digest => {}
                Some((_, Some(recorded))) => differ.push(format!(
                    "{at}: recorded {}, computed {}",
                    hex(recorded),
                    hex(*digest)
                )),
            }
        }
        let computed: BTreeSet<&str> = self.computed.iter().map(|(g, _, _)| g.as_str()).collect();
        let strays: Vec<&str> =
            groupers.keys().map(String::as_str).filter(|g| !computed.contains(g)).collect();
        let mut report = Vec::new();
        if !differ.is_empty() {
            report.push(format!("{changed}:\n  {}", differ.join("\n  ")));
        }
        if !missing.is_empty() {
            report.push(format!(
                "not recorded (run `{BLESS_COMMAND}` to record):\n  {}",
                missing.join("\n  ")
            ));
        }
        if !strays.is_empty() {
            report.push(format!("entries for no registered grouper (remove them): {strays:?}"));
        }
        assert!(report.is_empty(), "{}:\n{}", path().display(), report.join("\n"));
    }

    /// Reads the file afresh (the other digest test may have just written it), replaces the
    /// computed fields, and writes it back if anything changed.
    fn write(self) {
        let file = path();
        let mut data = read();
        let Some(groupers) = data.get_mut("groupers").and_then(Value::as_object_mut) else {
            panic!("{} has no \"groupers\" object", file.display());
        };
        let mut fields: BTreeMap<(&str, &str), Value> = BTreeMap::new();
        for (grouper, path, digest) in &self.computed {
            let (first, rest) = path.split_first().expect("a digest's path is not empty");
            let key = (grouper.as_str(), first.as_str());
            let mut value = fields.entry(key).or_insert(Value::Null);
            for step in rest {
                if !value.is_object() {
                    *value = Value::Object(Map::new());
                }
                value = value.as_object_mut().unwrap().entry(step.clone()).or_insert(Value::Null);
            }
            *value = Value::String(hex(*digest));
        }
        let mut changes = Vec::new();
        for ((grouper, field), value) in fields {
            let entry = groupers.entry(grouper).or_insert_with(|| {
                changes.push(format!("{grouper}: new entry, with empty parameters"));
                serde_json::json!({"busy_params": {}, "digest_params": {}})
            });
            let Some(entry) = entry.as_object_mut() else {
                panic!("{grouper}: its entry in {} is not an object", file.display());
            };
            for kind in ["busy_params", "digest_params"] {
                if !entry.contains_key(kind) {
                    changes.push(format!("{grouper} {kind}: empty"));
                    entry.insert(kind.to_owned(), Value::Object(Map::new()));
                }
            }
            if entry.get(field) != Some(&value) {
                changes.push(format!("{grouper} {field}"));
                entry.insert(field.to_owned(), value);
            }
        }
        // Straight to stderr, past the test harness's capture of `eprintln!`.
        let mut stderr = std::io::stderr();
        if changes.is_empty() {
            let _ = writeln!(stderr, "blessed: {} unchanged", file.display());
            return;
        }
        let mut text = serde_json::to_string_pretty(&data).unwrap();
        text.push('\n');
        let temporary = file.with_extension(format!("json.{}", std::process::id()));
        std::fs::write(&temporary, text).unwrap();
        std::fs::rename(&temporary, &file).unwrap();
        let _ =
            writeln!(stderr, "blessed: {} changed:\n  {}", file.display(), changes.join("\n  "));
    }
}
