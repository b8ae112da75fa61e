//! The dry-run client: every write the candidate makes goes through it.
//!
//! It is a `tower` service under an ordinary `kube::Client`, so operations use the same typed
//! `Api<K>` calls in the control and in the candidate. It
//! - adds `dryRun=All` to every POST, PUT, PATCH and DELETE, and, for a DELETE that carries
//!   `DeleteOptions` in its body (kube-rs always sends one), to the body too: the API server reads
//!   a DELETE's options from its body when it has one and then ignores the query, so a query
//!   parameter alone would let the delete persist;
//! - keeps a per-reconcile overlay of the would-be objects dry-run writes return, so a later GET
//!   of the same object in the same candidate run sees it, and a dry-run DELETE makes later GETs
//!   answer 404 (lists and watches do not see the overlay);
//! - refuses, and counts, any mutating request that would reach the API server without
//!   `dryRun=All` where the server reads it (the guard, defence in depth below the rewriting);
//! - sends its own `User-Agent`, so audit logs can attribute its requests.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use futures_util::future::BoxFuture;
use http::{Method, Request, Response, StatusCode, header};
use kube::client::Body;

use super::budget::ShadowBudget;
use super::pressure::{Signal, retry_after};
use super::writes::WriteLog;

/// The `User-Agent` of every dry-run request.
pub const USER_AGENT: &str = concat!("shadow-reconciler-dry-run/", env!("CARGO_PKG_VERSION"));

/// Counters shared by every dry-run client of one engine.
#[derive(Debug, Default)]
pub struct GuardStats {
    refused: AtomicU64,
    dry_run_requests: AtomicU64,
    overlay_reads: AtomicU64,
    sent: AtomicU64,
    throttled: AtomicU64,
}

impl GuardStats {
    /// Mutating requests refused because they lacked `dryRun=All` (must stay 0).
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }
    /// Dry-run mutating requests sent.
    pub fn dry_run_requests(&self) -> u64 {
        self.dry_run_requests.load(Ordering::Relaxed)
    }
    /// GETs answered from the overlay instead of the API server.
    pub fn overlay_reads(&self) -> u64 {
        self.overlay_reads.load(Ordering::Relaxed)
    }
    /// Requests sent to the API server, reads and dry runs (each took a token of the shadow's
    /// budget).
    pub fn sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }
    /// Requests the API server answered 429 Too Many Requests (each paused the shadow, and
    /// drops the comparison it belonged to).
    pub fn throttled(&self) -> u64 {
        self.throttled.load(Ordering::Relaxed)
    }
}

/// Makes dry-run clients over a real one.
#[derive(Clone)]
pub struct DryRunClient {
    real: kube::Client,
    stats: Arc<GuardStats>,
    budget: Arc<ShadowBudget>,
}

impl std::fmt::Debug for DryRunClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DryRunClient")
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl DryRunClient {
    /// Dry-run clients over `real` (sharing its connections), whose requests are not bounded
    /// (counted in an unlimited budget of their own).
    #[must_use]
    pub fn new(real: kube::Client) -> Self {
        Self::with_budget(real, Arc::new(ShadowBudget::unlimited()))
    }

    /// Dry-run clients over `real` whose every request to the API server takes a token of
    /// `budget` (the shadow's, never the control's).
    #[must_use]
    pub fn with_budget(real: kube::Client, budget: Arc<ShadowBudget>) -> Self {
        Self {
            real,
            stats: Arc::new(GuardStats::default()),
            budget,
        }
    }

    /// The budget its requests spend.
    #[must_use]
    pub fn budget(&self) -> &Arc<ShadowBudget> {
        &self.budget
    }

    /// Its requests go through `real` from now on: the shadow's own client, which should not
    /// retry 429s itself (`kube::Config::default_retry` off), so the shadow steps aside at the
    /// first one instead of waiting for the server.
    pub fn set_client(&mut self, real: kube::Client) {
        self.real = real;
    }

    /// Its requests spend `budget` from now on (the counters stay).
    pub fn set_budget(&mut self, budget: Arc<ShadowBudget>) {
        self.budget = budget;
    }

    /// The shared counters.
    #[must_use]
    pub fn stats(&self) -> &Arc<GuardStats> {
        &self.stats
    }

    /// A client for one candidate run, with an empty overlay.
    #[must_use]
    pub fn for_reconcile(&self) -> kube::Client {
        self.build(true).client
    }

    /// A client for one candidate run, with the counters of that run alone (they add up into
    /// the shared ones as well).
    #[must_use]
    pub fn for_reconcile_counted(&self) -> (kube::Client, Arc<GuardStats>) {
        let run = self.for_run();
        (run.client, run.stats)
    }

    /// A client for one reconcile's dry runs, with the counters of that reconcile alone, its
    /// overlay (which [`DryRunRun::reset_overlay`] empties) and the log of the writes the
    /// server accepted.
    #[must_use]
    pub fn for_run(&self) -> DryRunRun {
        self.build(true)
    }

    /// A client with the guard but without the rewriting, to prove the guard holds.
    #[must_use]
    pub fn guard_only(&self) -> kube::Client {
        self.build(false).client
    }

    fn build(&self, add_dry_run: bool) -> DryRunRun {
        let local = Arc::new(GuardStats::default());
        let overlay = Arc::new(Mutex::new(HashMap::new()));
        let writes = WriteLog::new();
        let service = DryRunService {
            inner: self.real.clone(),
            overlay: overlay.clone(),
            stats: self.stats.clone(),
            local: local.clone(),
            writes: writes.clone(),
            budget: self.budget.clone(),
            add_dry_run,
        };
        DryRunRun {
            client: kube::Client::new(service, self.real.default_namespace().to_owned()),
            stats: local,
            overlay,
            writes,
        }
    }
}

/// One reconcile's dry-run client and what it keeps.
#[derive(Clone)]
pub struct DryRunRun {
    /// The client.
    pub client: kube::Client,
    /// Its counters (they add up into the engine's as well).
    pub stats: Arc<GuardStats>,
    overlay: Arc<Mutex<Overlay>>,
    /// The dry-run writes the server accepted.
    pub writes: WriteLog,
}

impl DryRunRun {
    /// Forgets the would-be objects of earlier dry runs: later reads see the server's objects.
    pub fn reset_overlay(&self) {
        self.overlay
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }
}

/// The overlay: object path to its would-be JSON, or `None` for a dry-run deletion.
type Overlay = HashMap<String, Option<Vec<u8>>>;

#[derive(Clone)]
struct DryRunService {
    inner: kube::Client,
    overlay: Arc<Mutex<Overlay>>,
    stats: Arc<GuardStats>,
    /// The counters of this client alone.
    local: Arc<GuardStats>,
    writes: WriteLog,
    budget: Arc<ShadowBudget>,
    add_dry_run: bool,
}

impl DryRunService {
    /// A 429 is counted and pauses the shadow.
    fn answered(&self, response: &Response<Body>) {
        if response.status() == StatusCode::TOO_MANY_REQUESTS {
            self.stats.throttled.fetch_add(1, Ordering::Relaxed);
            self.local.throttled.fetch_add(1, Ordering::Relaxed);
            self.budget.pressure().signal(
                std::time::Instant::now(),
                Signal::ShadowThrottled,
                retry_after(response.headers()),
            );
        }
    }
}

fn is_mutating(method: &Method) -> bool {
    matches!(
        *method,
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    )
}

fn has_dry_run(uri: &http::Uri) -> bool {
    uri.query()
        .is_some_and(|q| q.split('&').any(|kv| kv == "dryRun=All"))
}

/// Whether a DELETE body (`DeleteOptions`) asks for a dry run.
fn body_has_dry_run(body: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|o| o.get("dryRun").and_then(|d| d.as_array().cloned()))
        .is_some_and(|d| d.iter().any(|v| v == "All"))
}

/// The `DeleteOptions` body with `dryRun: ["All"]`; `None` if it is not a JSON object.
fn body_with_dry_run(body: &[u8]) -> Option<Vec<u8>> {
    let mut options: serde_json::Value = serde_json::from_slice(body).ok()?;
    options
        .as_object_mut()?
        .insert("dryRun".into(), serde_json::json!(["All"]));
    serde_json::to_vec(&options).ok()
}

fn with_dry_run(uri: &http::Uri) -> Result<http::Uri, http::Error> {
    let path = uri.path();
    let query = match uri.query().filter(|q| !q.is_empty()) {
        Some(q) => format!("{q}&dryRun=All"),
        None => "dryRun=All".to_owned(),
    };
    let mut parts = uri.clone().into_parts();
    parts.path_and_query = Some(format!("{path}?{query}").parse()?);
    Ok(http::Uri::from_parts(parts)?)
}

/// The object a path addresses (without a `/status` suffix).
fn object_path(path: &str) -> &str {
    path.strip_suffix("/status").unwrap_or(path)
}

fn not_found(path: &str) -> Response<Body> {
    let mut segments = path.rsplit('/');
    let name = segments.next().unwrap_or_default();
    let plural = segments.next().unwrap_or_default();
    let status = serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": format!("{plural} {name:?} not found (deleted earlier in this dry run)"),
        "reason": "NotFound", "code": 404,
        "details": {"name": name, "kind": plural},
    });
    let mut response = Response::new(Body::from(status.to_string().into_bytes()));
    *response.status_mut() = StatusCode::NOT_FOUND;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

fn found(json: Vec<u8>) -> Response<Body> {
    let mut response = Response::new(Body::from(json));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

impl tower::Service<Request<Body>> for DryRunService {
    type Response = Response<Body>;
    type Error = tower::BoxError;
    type Future = BoxFuture<'static, Result<Response<Body>, tower::BoxError>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut request: Request<Body>) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            let method = request.method().clone();
            let mutating = is_mutating(&method);
            if mutating && this.add_dry_run && !has_dry_run(request.uri()) {
                *request.uri_mut() = with_dry_run(request.uri())?;
            }
            // A DELETE with a body: the server takes its options from the body alone.
            if method == Method::DELETE {
                let (mut parts, body) = request.into_parts();
                let mut bytes = body.collect_bytes().await?.to_vec();
                if !bytes.is_empty()
                    && this.add_dry_run
                    && !body_has_dry_run(&bytes)
                    && let Some(rewritten) = body_with_dry_run(&bytes)
                {
                    bytes = rewritten;
                    parts.headers.remove(header::CONTENT_LENGTH);
                }
                if !bytes.is_empty() && !body_has_dry_run(&bytes) {
                    this.stats.refused.fetch_add(1, Ordering::Relaxed);
                    this.local.refused.fetch_add(1, Ordering::Relaxed);
                    return Err(format!(
                        "shadow guard refused DELETE {}: its DeleteOptions body, which the API server reads instead of the query, lacks dryRun: [All]",
                        parts.uri.path()
                    )
                    .into());
                }
                request = Request::from_parts(parts, Body::from(bytes));
            }
            if mutating && !has_dry_run(request.uri()) {
                this.stats.refused.fetch_add(1, Ordering::Relaxed);
                this.local.refused.fetch_add(1, Ordering::Relaxed);
                return Err(format!(
                    "shadow guard refused {method} {}: a mutating request without dryRun=All never leaves the dry-run client",
                    request.uri().path()
                )
                .into());
            }
            request.headers_mut().insert(
                header::USER_AGENT,
                http::HeaderValue::from_static(USER_AGENT),
            );
            let path = request.uri().path().to_owned();
            let watch = request
                .uri()
                .query()
                .is_some_and(|q| q.contains("watch=true") || q.contains("watch=1"));
            if method == Method::GET && !watch {
                let hit = this
                    .overlay
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .get(object_path(&path))
                    .cloned();
                if let Some(entry) = hit {
                    this.stats.overlay_reads.fetch_add(1, Ordering::Relaxed);
                    this.local.overlay_reads.fetch_add(1, Ordering::Relaxed);
                    return Ok(entry.map_or_else(|| not_found(object_path(&path)), found));
                }
            }
            let mut sent = None;
            if mutating {
                this.stats.dry_run_requests.fetch_add(1, Ordering::Relaxed);
                this.local.dry_run_requests.fetch_add(1, Ordering::Relaxed);
                let (kept, body) = super::allocated::keep_body(request).await?;
                request = kept;
                sent = Some(body);
            }
            this.budget.spend();
            this.stats.sent.fetch_add(1, Ordering::Relaxed);
            this.local.sent.fetch_add(1, Ordering::Relaxed);
            let response = this.inner.send(request).await?;
            this.answered(&response);
            if !mutating || !response.status().is_success() {
                return Ok(response);
            }
            // Remember the would-be object (or its deletion) for later reads in this run.
            let (parts, body) = response.into_parts();
            let bytes = body.collect_bytes().await?.to_vec();
            let key = if method == Method::POST {
                let name = serde_json::from_slice::<serde_json::Value>(&bytes)
                    .ok()
                    .and_then(|o| {
                        o.pointer("/metadata/name")
                            .and_then(|n| n.as_str().map(str::to_owned))
                    });
                name.map(|n| format!("{path}/{n}"))
            } else {
                Some(object_path(&path).to_owned())
            };
            this.writes.accepted(&method, &path, sent, &bytes);
            if let Some(key) = key {
                let value = (method != Method::DELETE).then(|| bytes.clone());
                this.overlay
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(key, value);
            }
            Ok(Response::from_parts(parts, Body::from(bytes)))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dry_run_is_added_once() {
        let uri: http::Uri = "/api/v1/namespaces/a/secrets?fieldManager=x"
            .parse()
            .unwrap();
        let with = with_dry_run(&uri).unwrap();
        assert_eq!(
            with.to_string(),
            "/api/v1/namespaces/a/secrets?fieldManager=x&dryRun=All"
        );
        assert!(has_dry_run(&with));
        assert!(!has_dry_run(&uri));
        let bare: http::Uri = "/api/v1/namespaces/a/secrets/s".parse().unwrap();
        assert_eq!(
            with_dry_run(&bare).unwrap().to_string(),
            "/api/v1/namespaces/a/secrets/s?dryRun=All"
        );
        assert!(!has_dry_run(&"/x?dryRun=AllOfIt".parse().unwrap()));
    }

    #[test]
    fn object_paths() {
        assert_eq!(
            object_path("/apis/apps/v1/namespaces/a/deployments/d/status"),
            "/apis/apps/v1/namespaces/a/deployments/d"
        );
        assert_eq!(object_path("/api/v1/namespaces/a"), "/api/v1/namespaces/a");
    }
}
