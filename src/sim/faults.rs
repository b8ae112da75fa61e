//! Seeded fault injection: rules that match requests and answer errors, add latency, time out,
//! drop watch streams, or let a second writer race the client.

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use super::status::ApiError;
use crate::util::Rng;

/// Errors loading a fault file.
#[derive(Debug, thiserror::Error)]
pub enum FaultError {
    /// The file could not be read.
    #[error("cannot read fault file {path}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a valid fault configuration.
    #[error("{path}:{line}:{column}: {message}")]
    Invalid {
        /// The file.
        path: String,
        /// 1-based line (0 when unknown).
        line: u64,
        /// 1-based column (0 when unknown).
        column: u64,
        /// What is wrong.
        message: String,
    },
}

/// Which requests a rule applies to. Every given field must match; patterns take `*` wildcards.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Match {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`; empty matches any.
    #[serde(default)]
    pub verbs: Vec<String>,
    /// `plural` or `plural.group` (`secrets`, `deployments.apps`).
    #[serde(default)]
    pub resource: Option<String>,
    /// `status` to match only the status subresource, `""` for the main resource.
    #[serde(default)]
    pub subresource: Option<String>,
    /// Namespace pattern.
    #[serde(default)]
    pub namespace: Option<String>,
    /// Object name pattern.
    #[serde(default)]
    pub name: Option<String>,
    /// User-Agent pattern.
    #[serde(default)]
    pub user_agent: Option<String>,
    /// Only dry-run (`true`) or only real (`false`) requests.
    #[serde(default)]
    pub dry_run: Option<bool>,
}

/// What a rule does to a matching request.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Action {
    /// Answer this status code instead (409, 429, 500, 503, 504).
    #[serde(default)]
    pub status: Option<u16>,
    /// With 429: the `Retry-After` seconds.
    #[serde(default)]
    pub retry_after_seconds: Option<u64>,
    /// Delay the answer by this many milliseconds.
    #[serde(default)]
    pub latency_ms: Option<u64>,
    /// Hold the request this many milliseconds, then answer 504 Timeout.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// For watches: end the stream after this many events (0: right after it starts).
    #[serde(default)]
    pub drop_watch_after_events: Option<usize>,
    /// A second writer races the request: after a `get` of one object is answered, or just
    /// before an `update` or `patch` of one object is served, it bumps the object's
    /// resourceVersion, so a write built on what the client read conflicts (a real 409 from the
    /// precondition, not an injected one).
    #[serde(default)]
    pub second_writer: bool,
}

/// One rule.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Rule {
    /// Name, shown in the audit.
    pub name: String,
    /// Which requests.
    #[serde(default, rename = "match")]
    pub matches: Match,
    /// What happens.
    pub action: Action,
    /// Fire on each matching request with this probability (default 1).
    #[serde(default)]
    pub probability: Option<f64>,
    /// Fire on at most this many matching requests, then never again.
    #[serde(default)]
    pub count: Option<u64>,
    /// Count and draw per object (verb, resource, namespace, name) instead of over every
    /// request: `count` becomes each object's first matching requests, and whether the n-th
    /// matching request of an object fires depends on the seed, the rule, the object and n only,
    /// not on how the requests of different objects interleave. Same seed, same faults on each
    /// object's n-th request, however busy the machine; how many requests an object gets (its
    /// reconciles and retries) still depends on scheduling.
    #[serde(default)]
    pub per_object: bool,
}

/// A fault configuration file.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FaultConfig {
    /// Seed of the probability draws (default 0).
    #[serde(default)]
    pub seed: u64,
    /// The rules, tried in order; every matching rule fires.
    #[serde(default)]
    pub rules: Vec<Rule>,
}

impl FaultConfig {
    /// Reads and checks a fault file.
    pub fn load(path: &Path) -> Result<Self, FaultError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| FaultError::Read {
            path: shown.clone(),
            source,
        })?;
        Self::from_yaml(&shown, &text)
    }

    /// Parses and checks a fault configuration; `source` names it in errors.
    pub fn from_yaml(source: &str, text: &str) -> Result<Self, FaultError> {
        let invalid = |line, column, message: String| FaultError::Invalid {
            path: source.to_owned(),
            line,
            column,
            message,
        };
        let config: Self = serde_saphyr::from_str(text).map_err(|e| {
            let (line, column, message) = crate::util::yaml::describe(&e);
            invalid(line, column, message)
        })?;
        let located: Located =
            serde_saphyr::from_str(text).unwrap_or(Located { rules: Vec::new() });
        for (i, rule) in config.rules.iter().enumerate() {
            let problem = if let Some(p) = rule.probability.filter(|p| !(0.0..=1.0).contains(p)) {
                Some(format!("probability {p} is not between 0 and 1"))
            } else if let Some(code) = rule
                .action
                .status
                .filter(|c| ![409, 429, 500, 503, 504].contains(c))
            {
                Some(format!(
                    "status {code} is not injectable; use 409, 429, 500, 503 or 504"
                ))
            } else if rule.action == Action::default() {
                Some("the action does nothing".to_owned())
            } else {
                None
            };
            if let Some(problem) = problem {
                let at = located.rules.get(i).map(|r| r.referenced);
                let (line, column) = at.map_or((0, 0), |l| (l.line(), l.column()));
                return Err(invalid(
                    line,
                    column,
                    format!("rule {:?}: {problem}", rule.name),
                ));
            }
        }
        Ok(config)
    }
}

/// Where each rule of a fault file starts, for messages about its values.
#[derive(Deserialize)]
struct Located {
    #[serde(default)]
    rules: Vec<serde_saphyr::Spanned<serde::de::IgnoredAny>>,
}

/// The request a fault rule is matched against.
#[derive(Clone, Copy, Debug)]
pub struct RequestInfo<'a> {
    /// The verb.
    pub verb: &'a str,
    /// `plural` and `plural.group` (either may be matched).
    pub resource: (&'a str, &'a str),
    /// The subresource, if any.
    pub subresource: Option<&'a str>,
    /// The namespace, if any.
    pub namespace: Option<&'a str>,
    /// The object name, if any.
    pub name: Option<&'a str>,
    /// The User-Agent.
    pub user_agent: &'a str,
    /// Whether it is a dry run.
    pub dry_run: bool,
}

/// What the fired rules decided for one request.
#[derive(Clone, Debug, Default)]
pub struct Decision {
    /// The names of the rules that fired.
    pub fired: Vec<String>,
    /// Answer this error instead of serving the request.
    pub error: Option<ApiError>,
    /// Wait this long first.
    pub delay: Duration,
    /// For a watch: stop after this many events.
    pub drop_watch_after: Option<usize>,
    /// After a read, bump the object.
    pub second_writer: bool,
}

/// `*` wildcard matching.
fn glob(pattern: &str, text: &str) -> bool {
    let Some((head, rest)) = pattern.split_once('*') else {
        return pattern == text;
    };
    let Some(mut remaining) = text.strip_prefix(head) else {
        return false;
    };
    let parts: Vec<&str> = rest.split('*').collect();
    for (i, part) in parts.iter().enumerate() {
        if i == parts.len() - 1 {
            return remaining.ends_with(part);
        }
        match remaining.find(part) {
            Some(at) => remaining = &remaining[at + part.len()..],
            None => return false,
        }
    }
    true
}

impl Match {
    fn matches(&self, req: &RequestInfo<'_>) -> bool {
        let opt = |pattern: &Option<String>, value: Option<&str>| {
            pattern
                .as_deref()
                .is_none_or(|p| value.is_some_and(|v| glob(p, v)))
        };
        (self.verbs.is_empty() || self.verbs.iter().any(|v| v == req.verb))
            && self
                .resource
                .as_deref()
                .is_none_or(|r| r == req.resource.0 || r == req.resource.1)
            && self
                .subresource
                .as_deref()
                .is_none_or(|s| s == req.subresource.unwrap_or(""))
            && opt(&self.namespace, req.namespace)
            && opt(&self.name, req.name)
            && opt(&self.user_agent, Some(req.user_agent))
            && self.dry_run.is_none_or(|d| d == req.dry_run)
    }
}

/// The active rules with their remaining counts and the seeded generator.
#[derive(Debug)]
pub struct Faults {
    rules: Vec<(Rule, Option<u64>)>,
    rng: Rng,
    seed: u64,
    /// For `perObject` rules: per (rule, object), its matching requests so far.
    seen: std::collections::HashMap<(usize, String), u64>,
}

impl Faults {
    /// Activates a configuration.
    #[must_use]
    pub fn new(config: FaultConfig) -> Self {
        let rules = config
            .rules
            .into_iter()
            .map(|r| {
                let count = r.count;
                (r, count)
            })
            .collect();
        Self {
            rules,
            rng: Rng::new(config.seed),
            seed: config.seed,
            seen: std::collections::HashMap::new(),
        }
    }

    /// Adds a rule at run time.
    pub fn add(&mut self, rule: Rule) {
        let count = rule.count;
        self.rules.push((rule, count));
    }

    /// Removes every rule.
    pub fn clear(&mut self) {
        self.rules.clear();
        self.seen.clear();
    }

    /// Decides what happens to a request.
    pub fn decide(&mut self, req: &RequestInfo<'_>) -> Decision {
        let mut decision = Decision::default();
        for (index, (rule, remaining)) in self.rules.iter_mut().enumerate() {
            if !rule.matches.matches(req) {
                continue;
            }
            if rule.per_object {
                let object = format!(
                    "{} {} {}/{}",
                    req.verb,
                    req.resource.1,
                    req.namespace.unwrap_or(""),
                    req.name.unwrap_or("")
                );
                let n = self.seen.entry((index, object.clone())).or_default();
                *n += 1;
                if rule.count.is_some_and(|count| *n > count) {
                    continue;
                }
                if let Some(p) = rule.probability
                    && keyed_draw(self.seed, index, &object, *n) >= p
                {
                    continue;
                }
            } else {
                if *remaining == Some(0) {
                    continue;
                }
                if let Some(p) = rule.probability
                    && self.rng.next_f64() >= p
                {
                    continue;
                }
                if let Some(n) = remaining {
                    *n -= 1;
                }
            }
            decision.fired.push(rule.name.clone());
            let action = &rule.action;
            if let Some(ms) = action.latency_ms {
                decision.delay += Duration::from_millis(ms);
            }
            if let Some(ms) = action.timeout_ms {
                decision.delay += Duration::from_millis(ms);
                decision.error.get_or_insert(ApiError::injected(504, None));
            }
            if let Some(code) = action.status {
                decision
                    .error
                    .get_or_insert(ApiError::injected(code, action.retry_after_seconds));
            }
            if let Some(n) = action.drop_watch_after_events {
                decision.drop_watch_after = Some(decision.drop_watch_after.map_or(n, |m| m.min(n)));
            }
            decision.second_writer |= action.second_writer;
        }
        decision
    }
}

/// A number in [0, 1) that depends only on its inputs (`SipHash` with fixed keys).
fn keyed_draw(seed: u64, rule: usize, object: &str, n: u64) -> f64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    (seed, rule, object, n).hash(&mut h);
    // The top 53 bits, as a double in [0, 1).
    #[allow(clippy::cast_precision_loss)] // exact: 53 bits fit a double's mantissa
    let draw = (h.finish() >> 11) as f64 / (1u64 << 53) as f64;
    draw
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req<'a>(verb: &'a str, name: &'a str) -> RequestInfo<'a> {
        RequestInfo {
            verb,
            resource: ("secrets", "secrets"),
            subresource: None,
            namespace: Some("clusters-a"),
            name: Some(name),
            user_agent: "kube-rs/5",
            dry_run: false,
        }
    }

    #[test]
    fn globs() {
        assert!(glob("clusters-*", "clusters-a"));
        assert!(glob("*", ""));
        assert!(glob("a*c*e", "abcde"));
        assert!(!glob("a*c*e", "abcd"));
        assert!(glob("exact", "exact") && !glob("exact", "exactly"));
    }

    #[test]
    fn counted_rules_fire_that_often() {
        let config = FaultConfig::from_yaml("f.yaml", "rules:\n  - name: two-conflicts\n    match: {verbs: [patch], namespace: 'clusters-*'}\n    action: {status: 409}\n    count: 2\n").unwrap();
        let mut faults = Faults::new(config);
        let fired: Vec<bool> = (0..4)
            .map(|_| faults.decide(&req("patch", "x")).error.is_some())
            .collect();
        assert_eq!(fired, [true, true, false, false]);
        assert!(faults.decide(&req("get", "x")).fired.is_empty());
    }

    #[test]
    fn probabilities_are_seeded() {
        let text = "seed: 7\nrules:\n  - {name: flaky, action: {status: 503}, probability: 0.3}\n";
        let run = || {
            let mut faults = Faults::new(FaultConfig::from_yaml("f.yaml", text).unwrap());
            (0..1000)
                .filter(|_| faults.decide(&req("get", "x")).error.is_some())
                .count()
        };
        let n = run();
        assert_eq!(n, run(), "same seed, same faults");
        assert!((250..350).contains(&n), "{n}");
    }

    #[test]
    fn per_object_rules_do_not_depend_on_the_interleaving() {
        let text = "seed: 3\nrules:\n  - {name: flaky, action: {status: 503}, probability: 0.3, perObject: true}\n  - {name: first-two, match: {verbs: [patch]}, action: {secondWriter: true}, count: 2, perObject: true}\n";
        // Which of each object's requests fail, when the objects' requests come in `order`.
        let run = |order: &[&'static str]| {
            let mut faults = Faults::new(FaultConfig::from_yaml("f.yaml", text).unwrap());
            let mut seen: std::collections::BTreeMap<&'static str, Vec<(bool, bool)>> =
                std::collections::BTreeMap::new();
            for &name in order {
                let get = faults.decide(&req("get", name)).error.is_some();
                let patch = faults.decide(&req("patch", name)).second_writer;
                seen.entry(name).or_default().push((get, patch));
            }
            seen
        };
        let one_by_one: Vec<&str> = ["a"; 50].into_iter().chain(["b"; 50]).collect();
        let interleaved: Vec<&str> = ["a", "b"].into_iter().cycle().take(100).collect();
        let (x, y) = (run(&one_by_one), run(&interleaved));
        assert_eq!(x, y, "the same faults per object in either order");
        for requests in x.values() {
            let patched: Vec<bool> = requests.iter().map(|r| r.1).collect();
            assert_eq!(
                patched.iter().filter(|p| **p).count(),
                2,
                "count is per object"
            );
            assert!(patched[0] && patched[1], "the object's first two patches");
            let failed = requests.iter().filter(|r| r.0).count();
            assert!((5..30).contains(&failed), "about 30% of 50: {failed}");
        }
        assert_ne!(x["a"], x["b"], "the draws differ between objects");
    }

    #[test]
    fn bad_files_say_where() {
        let err =
            FaultConfig::from_yaml("f.yaml", "rules:\n  - name: x\n    action: {stauts: 500}\n")
                .unwrap_err()
                .to_string();
        assert!(
            err.starts_with("f.yaml:3:14: unknown field `stauts`"),
            "{err}"
        );
        assert!(
            !err.contains("at line"),
            "the location is not repeated: {err}"
        );
        assert!(err.contains("unknown field `stauts`"), "{err}");
        let err =
            FaultConfig::from_yaml("f.yaml", "rules:\n  - {name: x, action: {status: 418}}\n")
                .unwrap_err()
                .to_string();
        assert!(
            err.starts_with("f.yaml:2:5: rule \"x\": status 418 is not injectable"),
            "{err}"
        );
    }
}
