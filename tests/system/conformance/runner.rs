//! The runner of the differential conformance test: plays one scenario's steps against a server
//! through a kube-rs client, normalises the answers, and compares two runs field by field.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use serde_json::Value;

use crate::common::wait::wait_for_async;

/// One step of a scenario.
#[derive(Clone)]
pub struct Step {
    /// Names the step in reports.
    pub label: String,
    pub kind: StepKind,
    /// Values taken from the answer (name, JSON pointer) for later steps' `{name}` placeholders.
    pub captures: Vec<(String, String)>,
    /// Whether the answer is compared (a set-up step may only need to succeed on both).
    pub compared: bool,
}

#[derive(Clone)]
pub enum StepKind {
    /// An HTTP request; `{ns}` and captured names in the path and body are substituted.
    Request {
        method: &'static str,
        path: String,
        body: Option<Value>,
        content_type: &'static str,
    },
    /// A watch held for `seconds` (`timeoutSeconds`); the answer is the list of its events,
    /// periodic bookmarks left out (their timing is the server's), the initial-events-end one kept.
    Watch { path: String, seconds: u32 },
    /// GET `path` until the JSON pointer has `value` (at most a minute).
    WaitFor {
        path: String,
        pointer: String,
        value: Value,
    },
    /// Forget the watch history: `Store::compact` on the simulator, an etcd compaction at the
    /// current revision on the real server.
    Compact,
}

impl Step {
    fn new(label: &str, kind: StepKind) -> Self {
        Self {
            label: label.to_owned(),
            kind,
            captures: Vec::new(),
            compared: true,
        }
    }

    /// Captures the value at `pointer` of the answer as `{name}`.
    #[must_use]
    pub fn capture(mut self, name: &str, pointer: &str) -> Self {
        self.captures.push((name.to_owned(), pointer.to_owned()));
        self
    }

    /// The step must answer 2xx on both servers, but its answer is not compared.
    #[must_use]
    pub fn setup(mut self) -> Self {
        self.compared = false;
        self
    }
}

fn request(
    label: &str,
    method: &'static str,
    path: &str,
    body: Option<Value>,
    ct: &'static str,
) -> Step {
    Step::new(
        label,
        StepKind::Request {
            method,
            path: path.to_owned(),
            body,
            content_type: ct,
        },
    )
}

pub fn get(label: &str, path: &str) -> Step {
    request(label, "GET", path, None, "application/json")
}
pub fn post(label: &str, path: &str, body: Value) -> Step {
    request(label, "POST", path, Some(body), "application/json")
}
pub fn put(label: &str, path: &str, body: Value) -> Step {
    request(label, "PUT", path, Some(body), "application/json")
}
pub fn merge_patch(label: &str, path: &str, body: Value) -> Step {
    request(
        label,
        "PATCH",
        path,
        Some(body),
        "application/merge-patch+json",
    )
}
pub fn json_patch(label: &str, path: &str, body: Value) -> Step {
    request(
        label,
        "PATCH",
        path,
        Some(body),
        "application/json-patch+json",
    )
}
pub fn strategic_patch(label: &str, path: &str, body: Value) -> Step {
    request(
        label,
        "PATCH",
        path,
        Some(body),
        "application/strategic-merge-patch+json",
    )
}
pub fn apply(label: &str, path: &str, body: Value) -> Step {
    request(
        label,
        "PATCH",
        path,
        Some(body),
        "application/apply-patch+yaml",
    )
}
pub fn delete(label: &str, path: &str, body: Option<Value>) -> Step {
    request(label, "DELETE", path, body, "application/json")
}
pub fn watch(label: &str, path: &str, seconds: u32) -> Step {
    Step::new(
        label,
        StepKind::Watch {
            path: path.to_owned(),
            seconds,
        },
    )
}
/// Polls `path` until the JSON `pointer` of its answer is `value`; a `*` segment of the pointer
/// stands for any item of an array (`/resources/*/name`: some resource has that name).
pub fn wait_for(label: &str, path: &str, pointer: &str, value: Value) -> Step {
    Step::new(
        label,
        StepKind::WaitFor {
            path: path.to_owned(),
            pointer: pointer.to_owned(),
            value,
        },
    )
}
pub fn compact() -> Step {
    Step::new("compact", StepKind::Compact).setup()
}

/// A named list of steps, run in a namespace of its own (`{ns}`).
pub struct Scenario {
    pub name: String,
    pub steps: Vec<Step>,
    /// A capture that finds nothing leaves its placeholder empty instead of failing (the dry-run
    /// variant: what a dry-run write returns was never stored).
    pub tolerant: bool,
    /// Whether the table also plays it with `dryRun=All` on its writes.
    pub with_dry_run: bool,
}

impl Scenario {
    pub fn new(name: &str, steps: Vec<Step>) -> Self {
        Self {
            name: name.to_owned(),
            steps,
            tolerant: false,
            with_dry_run: true,
        }
    }

    /// A scenario that is about dry run already.
    #[must_use]
    pub fn without_dry_run_variant(mut self) -> Self {
        self.with_dry_run = false;
        self
    }

    /// The same scenario with `dryRun=All` on every compared write (set-up steps stay real), or
    /// `None` if it has no compared write.
    pub fn dry_run_variant(&self) -> Option<Self> {
        if !self.with_dry_run {
            return None;
        }
        let mut any = false;
        let steps = self
            .steps
            .iter()
            .map(|step| {
                let mut step = step.clone();
                // What a compared write only dry-ran never comes: wait for nothing, read once.
                if let StepKind::WaitFor { path, .. } = &step.kind
                    && step.compared
                {
                    step.kind = StepKind::Request {
                        method: "GET",
                        path: path.clone(),
                        body: None,
                        content_type: "application/json",
                    };
                }
                if let StepKind::Request {
                    method, path, body, ..
                } = &mut step.kind
                    && step.compared
                    && *method != "GET"
                {
                    let joint = if path.contains('?') { '&' } else { '?' };
                    *path = format!("{path}{joint}dryRun=All");
                    // A DELETE's body, when it has one, is where the server reads dryRun.
                    if *method == "DELETE"
                        && let Some(Value::Object(options)) = body
                    {
                        options.insert("dryRun".into(), serde_json::json!(["All"]));
                    }
                    any = true;
                }
                step
            })
            .collect();
        any.then(|| Self {
            name: format!("{}-dry-run", self.name),
            steps,
            tolerant: true,
            with_dry_run: false,
        })
    }
}

/// What one step answered.
#[derive(Debug, Clone)]
pub struct Answer {
    pub label: String,
    pub code: u16,
    pub body: Value,
    pub compared: bool,
}

fn substitute(text: &str, vars: &HashMap<String, String>) -> String {
    let mut out = text.to_owned();
    for (name, value) in vars {
        out = out.replace(&format!("{{{name}}}"), value);
    }
    out
}

fn substitute_json(value: &Value, vars: &HashMap<String, String>) -> Value {
    match value {
        Value::String(s) => Value::String(substitute(s, vars)),
        Value::Array(a) => Value::Array(a.iter().map(|v| substitute_json(v, vars)).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, v)| (substitute(k, vars), substitute_json(v, vars)))
                .collect(),
        ),
        other => other.clone(),
    }
}

async fn send(
    client: &kube::Client,
    method: &str,
    path: &str,
    body: Option<Vec<u8>>,
    content_type: &str,
) -> (u16, Vec<u8>) {
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::CONTENT_TYPE, content_type)
        .header(http::header::ACCEPT, "application/json")
        .body(kube::client::Body::from(body.unwrap_or_default()))
        .expect("request");
    let response = client
        .send(request)
        .await
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
    let code = response.status().as_u16();
    let bytes = response
        .into_body()
        .collect_bytes()
        .await
        .unwrap_or_else(|e| panic!("{method} {path}: reading the answer: {e}"));
    (code, bytes.to_vec())
}

fn parse(bytes: &[u8]) -> Value {
    if bytes.is_empty() {
        return Value::Null;
    }
    serde_json::from_slice(bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(bytes).into_owned()))
}

/// Plays `scenario` with `client`; `compact` is the server's lever for [`StepKind::Compact`].
pub async fn play(
    client: &kube::Client,
    scenario: &Scenario,
    namespace: &str,
    compact: &(dyn Fn() + Sync),
) -> Vec<Answer> {
    let mut vars = HashMap::from([("ns".to_owned(), namespace.to_owned())]);
    let mut answers = Vec::new();
    for step in &scenario.steps {
        let (code, body) = match &step.kind {
            StepKind::Request {
                method,
                path,
                body,
                content_type,
            } => {
                let path = substitute(path, &vars);
                let body = body.as_ref().map(|b| {
                    // JSON is YAML too, so apply configurations are sent as JSON.
                    serde_json::to_vec(&substitute_json(b, &vars)).expect("json")
                });
                let (code, bytes) = send(client, method, &path, body, content_type).await;
                (code, parse(&bytes))
            }
            StepKind::Watch { path, seconds } => {
                let path = substitute(path, &vars);
                let sep = if path.contains('?') { '&' } else { '?' };
                let path = format!("{path}{sep}watch=true&timeoutSeconds={seconds}");
                let (code, bytes) = send(client, "GET", &path, None, "application/json").await;
                if (200..300).contains(&code) {
                    let events: Vec<Value> = String::from_utf8_lossy(&bytes)
                        .lines()
                        .filter(|l| !l.trim().is_empty())
                        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("watch event is not JSON ({e}): {l}")))
                        .filter(|e: &Value| {
                            e["type"] != "BOOKMARK"
                                || e["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"] == "true"
                        })
                        .collect();
                    (code, Value::Array(events))
                } else {
                    (code, parse(&bytes))
                }
            }
            StepKind::WaitFor {
                path,
                pointer,
                value,
            } => {
                let path = substitute(path, &vars);
                wait_for_async(
                    &format!("{}: {path} with {pointer} = {value}", scenario.name),
                    Duration::from_mins(1),
                    Duration::from_millis(100),
                    async || {
                        let (code, bytes) =
                            send(client, "GET", &path, None, "application/json").await;
                        let body = parse(&bytes);
                        if pointer_is(&body, pointer, value) {
                            Ok((code, body))
                        } else {
                            Err(format!("answer {code}: {body}"))
                        }
                    },
                )
                .await
            }
            StepKind::Compact => {
                compact();
                (200, Value::Null)
            }
        };
        if !step.compared {
            // A set-up step shared by a scenario and its dry-run variant (a CRD) may exist already.
            assert!(
                (200..300).contains(&code) || body["reason"] == "AlreadyExists",
                "{} / {}: set-up step answered {code}: {body}",
                scenario.name,
                step.label
            );
        }
        for (name, pointer) in &step.captures {
            let text = match body.pointer(pointer) {
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
                None if scenario.tolerant => String::new(),
                None => panic!(
                    "{} / {}: the answer has no {pointer} to capture: {body}",
                    scenario.name, step.label
                ),
            };
            vars.insert(name.clone(), text);
        }
        answers.push(Answer {
            label: step.label.clone(),
            code,
            body,
            compared: step.compared,
        });
    }
    answers
}

/// Normalises a scenario's answers so that two servers' runs compare:
/// - uids become `uid-N` by first appearance, also inside messages;
/// - an object's resourceVersion becomes `vN`, its rank among the versions of the same object (by
///   uid) in the compared answers: the order of one object's versions is kept, values and the
///   interleaving with other objects (which a real server's own writes shift) are dropped;
/// - the resourceVersion of a list or a bookmark (the store's current revision, which on a real
///   server also counts writes of its own) becomes `<current>`, and a resourceVersion quoted in a
///   message `(<rv>)`;
/// - timestamps become `<time>`, continue tokens `<continue>`, names generated from `generateName`
///   their prefix and `<random>`; a Service's allocated cluster IPs `<ip>` and node ports
///   `<port>`; discovery's resources are sorted by name.
pub fn normalise(answers: &mut [Answer]) {
    let mut seen = Seen::default();
    for answer in answers.iter().filter(|a| a.compared) {
        seen.collect(&answer.body, false);
    }
    // A set-up step's versions are not compared, but messages may quote them.
    let mut setup = Seen::default();
    for answer in answers.iter().filter(|a| !a.compared) {
        setup.collect(&answer.body, false);
    }
    seen.all_versions.extend(setup.all_versions);
    for answer in answers.iter_mut() {
        if answer.body["kind"] == "APIResourceList"
            && let Some(resources) = answer.body["resources"].as_array_mut()
        {
            resources.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
        }
        seen.rewrite(&mut answer.body, None, false);
    }
}

/// What the answers of a scenario hold: uids by first appearance, each object's versions.
#[derive(Default)]
struct Seen {
    uids: Vec<String>,
    versions: HashMap<String, BTreeSet<u64>>,
    all_versions: BTreeSet<u64>,
}

/// The `kind` of a list, or the `type` of a bookmark event: their metadata's resourceVersion is
/// the store's current revision rather than an object's.
fn revision_holder(map: &serde_json::Map<String, Value>) -> (bool, bool) {
    let list = map
        .get("kind")
        .and_then(Value::as_str)
        .is_some_and(|k| k.ends_with("List"));
    let bookmark = map.get("type").and_then(Value::as_str) == Some("BOOKMARK");
    (list, bookmark)
}

impl Seen {
    fn collect(&mut self, value: &Value, revision: bool) {
        match value {
            Value::Object(map) => {
                let (list, bookmark) = revision_holder(map);
                if let Some(meta) = map.get("metadata").and_then(Value::as_object) {
                    if let Some(Value::String(uid)) = meta.get("uid")
                        && !self.uids.contains(uid)
                    {
                        self.uids.push(uid.clone());
                    }
                    if !(list || revision)
                        && let Some(rv) = meta
                            .get("resourceVersion")
                            .and_then(Value::as_str)
                            .and_then(|r| r.parse::<u64>().ok())
                    {
                        let uid = meta.get("uid").and_then(Value::as_str).unwrap_or_default();
                        self.versions.entry(uid.to_owned()).or_default().insert(rv);
                        self.all_versions.insert(rv);
                    }
                }
                for (key, v) in map {
                    match key.as_str() {
                        "metadata" => {}
                        "uid" => {
                            if let Value::String(uid) = v
                                && !self.uids.contains(uid)
                            {
                                self.uids.push(uid.clone());
                            }
                        }
                        "object" => self.collect(v, bookmark),
                        _ => self.collect(v, false),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|v| self.collect(v, false)),
            _ => {}
        }
    }

    fn uid(&self, uid: &str) -> Option<String> {
        self.uids
            .iter()
            .position(|u| u == uid)
            .map(|i| format!("uid-{}", i + 1))
    }

    fn rewrite(&self, value: &mut Value, key: Option<&str>, revision: bool) {
        match value {
            Value::Object(map) => {
                let (list, bookmark) = revision_holder(map);
                let generate = map
                    .get("generateName")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                if let (Some(prefix), Some(Value::String(name))) = (generate, map.get_mut("name"))
                    && name.starts_with(&prefix)
                {
                    *name = format!("{prefix}<random>");
                }
                if let Some(meta) = map.get_mut("metadata").and_then(Value::as_object_mut) {
                    let uid = meta
                        .get("uid")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned();
                    if let Some(Value::String(rv)) = meta.get_mut("resourceVersion") {
                        if list || revision {
                            "<current>".clone_into(rv);
                        } else if let Some(rank) = rv.parse::<u64>().ok().and_then(|n| {
                            self.versions
                                .get(&uid)
                                .and_then(|vs| vs.iter().position(|v| *v == n))
                        }) {
                            *rv = format!("v{}", rank + 1);
                        }
                    }
                }
                for (k, v) in map.iter_mut() {
                    let inner = k == "object" && bookmark;
                    self.rewrite(v, Some(k), inner);
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.rewrite(v, key, false)),
            // Allocated by each server from its own ranges.
            Value::Number(_) if key == Some("nodePort") => {
                *value = Value::String("<port>".to_owned());
            }
            Value::String(s)
                if matches!(key, Some("clusterIP" | "clusterIPs"))
                    && s.parse::<std::net::Ipv4Addr>().is_ok() =>
            {
                "<ip>".clone_into(s);
            }
            Value::String(s) => match key {
                Some("uid") => {
                    if let Some(u) = self.uid(s) {
                        *s = u;
                    }
                }
                Some("message") => {
                    for (i, uid) in self.uids.iter().enumerate() {
                        *s = s.replace(uid.as_str(), &format!("uid-{}", i + 1));
                    }
                    for rv in &self.all_versions {
                        *s = s.replace(&format!("({rv})"), "(<rv>)");
                    }
                }
                Some("continue") if !s.is_empty() => "<continue>".clone_into(s),
                Some(k) if k.ends_with("Timestamp") || k == "time" || k == "lastTransitionTime" => {
                    "<time>".clone_into(s);
                }
                _ => {}
            },
            _ => {}
        }
    }
}

/// The leaves of a JSON value by path (`a.b[0].c`). Empty objects and arrays are leaves too, and
/// so is `metadata.managedFields`.
pub fn flatten(value: &Value) -> BTreeMap<String, Value> {
    fn walk(value: &Value, path: &str, out: &mut BTreeMap<String, Value>) {
        match value {
            // Field ownership is compared as one value per object: the simulator keeps none.
            _ if path.ends_with("metadata.managedFields") => {
                out.insert(path.to_owned(), value.clone());
            }
            Value::Object(map) if !map.is_empty() => {
                for (k, v) in map {
                    let p = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    walk(v, &p, out);
                }
            }
            Value::Array(items) if !items.is_empty() => {
                for (i, v) in items.iter().enumerate() {
                    walk(v, &format!("{path}[{i}]"), out);
                }
            }
            leaf => {
                out.insert(path.to_owned(), leaf.clone());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(value, "", &mut out);
    out
}

/// One field on which the two servers differ.
#[derive(Debug, Clone)]
pub struct Difference {
    pub scenario: String,
    pub step: String,
    /// `code` for the HTTP status, else the field's path in the answer.
    pub path: String,
    pub simulator: Option<Value>,
    pub real: Option<Value>,
}

/// Compares two normalised runs of `scenario`; returns the differences and the number of fields
/// compared.
pub fn compare(scenario: &str, simulator: &[Answer], real: &[Answer]) -> (Vec<Difference>, usize) {
    let mut differences = Vec::new();
    let mut fields = 0;
    for (s, r) in simulator.iter().zip(real) {
        if !s.compared {
            continue;
        }
        fields += 1;
        if s.code != r.code {
            differences.push(Difference {
                scenario: scenario.to_owned(),
                step: s.label.clone(),
                path: "code".to_owned(),
                simulator: Some(s.code.into()),
                real: Some(r.code.into()),
            });
        }
        let (fs, fr) = (flatten(&s.body), flatten(&r.body));
        let paths: BTreeSet<&String> = fs.keys().chain(fr.keys()).collect();
        for path in paths {
            fields += 1;
            let (a, b) = (fs.get(path), fr.get(path));
            if a != b {
                differences.push(Difference {
                    scenario: scenario.to_owned(),
                    step: s.label.clone(),
                    path: path.clone(),
                    simulator: a.cloned(),
                    real: b.cloned(),
                });
            }
        }
    }
    (differences, fields)
}

/// Whether the JSON `pointer` of `body` is `value`, a `*` segment standing for any item of an
/// array.
fn pointer_is(body: &Value, pointer: &str, value: &Value) -> bool {
    match pointer.split_once("/*") {
        Some((array, rest)) => body
            .pointer(array)
            .and_then(Value::as_array)
            .is_some_and(|items| items.iter().any(|item| pointer_is(item, rest, value))),
        None => body.pointer(pointer) == Some(value),
    }
}
