//! Watch streams: newline-delimited JSON events over a chunked response, resumable from a
//! resourceVersion, with bookmarks, timeouts, 410 Gone and injected drops.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;
use tokio::time::Instant;

use super::Shared;
use super::object::Selector;
use super::route::Target;
use super::status::ApiError;
use super::store::Change;

/// Longest watch the simulator serves when the client asks for none (the real default is 30-60
/// minutes; the simulator ends earlier so clients exercise their re-watch path).
const DEFAULT_TIMEOUT: Duration = Duration::from_mins(5);

/// A parsed watch request.
#[derive(Debug)]
pub(super) struct WatchRequest {
    target: Target,
    labels: Selector,
    fields: Selector,
    /// `None`: start with synthetic ADDED events for the current state.
    resource_version: Option<u64>,
    bookmarks: bool,
    send_initial_events: bool,
    timeout: Duration,
    pub drop_after: Option<usize>,
}

impl WatchRequest {
    pub(super) fn from_params(
        target: &Target,
        params: &HashMap<String, String>,
    ) -> Result<Self, ApiError> {
        let resource_version = match params.get("resourceVersion").map(String::as_str) {
            None | Some("" | "0") => None,
            Some(rv) => Some(rv.parse::<u64>().map_err(|_| {
                ApiError::bad_request(format!("resourceVersion: Invalid value: {rv:?}"))
            })?),
        };
        let timeout = match params.get("timeoutSeconds") {
            Some(s) => Duration::from_secs(s.parse().map_err(|_| {
                ApiError::bad_request(format!("timeoutSeconds: Invalid value: {s:?}"))
            })?),
            None => DEFAULT_TIMEOUT,
        };
        let flag = |name: &str| params.get(name).is_some_and(|v| v == "true" || v == "1");
        Ok(Self {
            target: target.clone(),
            labels: Selector::labels(params.get("labelSelector").map_or("", String::as_str))?,
            fields: Selector::fields(params.get("fieldSelector").map_or("", String::as_str))?,
            resource_version,
            bookmarks: flag("allowWatchBookmarks"),
            send_initial_events: flag("sendInitialEvents"),
            timeout,
            drop_after: None,
        })
    }

    fn wants(&self, object: &Value) -> bool {
        let ns_ok = self
            .target
            .namespace
            .as_deref()
            .is_none_or(|ns| super::object::meta_str(object, "namespace") == Some(ns));
        let name_ok = self
            .target
            .name
            .as_deref()
            .is_none_or(|n| super::object::meta_str(object, "name") == Some(n));
        ns_ok && name_ok && self.labels.matches_labels(object) && self.fields.matches_fields(object)
    }

    fn wants_change(&self, change: &Change) -> bool {
        change.group == self.target.rt.group
            && change.plural == self.target.rt.plural
            && self.wants(&change.object)
    }

    fn with_version(&self, mut object: Value) -> Value {
        object["apiVersion"] = json!(self.target.rt.api_version());
        object["kind"] = json!(self.target.rt.kind);
        object
    }

    fn bookmark(&self, rv: u64, initial_events_end: bool) -> Bytes {
        let mut metadata = json!({"resourceVersion": rv.to_string()});
        if initial_events_end {
            metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        line(
            &json!({"type": "BOOKMARK", "object": {"kind": self.target.rt.kind, "apiVersion": self.target.rt.api_version(), "metadata": metadata}}),
        )
    }
}

fn line(event: &Value) -> Bytes {
    let mut text = event.to_string();
    text.push('\n');
    Bytes::from(text)
}

fn error_event(error: &ApiError) -> Bytes {
    line(&json!({"type": "ERROR", "object": error.body()}))
}

/// The open watch streams, for [`Simulator::drop_watches`](super::Simulator::drop_watches): a
/// drop starts a new generation, which ends every stream of an older one.
#[derive(Debug, Default)]
pub(super) struct Generation {
    number: u64,
    /// The streams of this generation still open.
    live: usize,
}

/// Ends every open stream; how many it ended.
pub(super) fn drop_all(drops: &tokio::sync::watch::Sender<Generation>) -> usize {
    let mut ended = 0;
    drops.send_modify(|g| {
        g.number += 1;
        ended = std::mem::take(&mut g.live);
    });
    ended
}

/// The state of one open stream.
struct Stream {
    shared: Arc<Shared>,
    request: WatchRequest,
    pending: VecDeque<Bytes>,
    receiver: Option<tokio::sync::broadcast::Receiver<Arc<Change>>>,
    /// The resourceVersion of the last change seen (of any resource): safe for bookmarks.
    last_rv: u64,
    sent: usize,
    deadline: Instant,
    next_bookmark: Instant,
    drops: tokio::sync::watch::Receiver<Generation>,
    /// The drop generation it was opened in: a newer one ends it.
    generation: u64,
    finished: bool,
}

impl Drop for Stream {
    fn drop(&mut self) {
        let generation = self.generation;
        self.shared.watch_drops.send_if_modified(|g| {
            if g.number == generation {
                g.live = g.live.saturating_sub(1);
            }
            false
        });
    }
}

/// Starts the stream, or answers the error a real server answers before streaming.
pub(super) fn respond(shared: Arc<Shared>, request: WatchRequest) -> Response {
    let mut pending = VecDeque::new();
    let (receiver, last_rv) = {
        let store = super::lock(&shared.store);
        let start = request
            .resource_version
            .unwrap_or_else(|| store.resource_version());
        // A version the store has not reached yet is accepted, and nothing comes until the
        // store reaches it: kube-apiserver v1.37.2 answers 200 and sends no event either
        // (measured: a watch from resourceVersion 99999999 with a 5 s timeout).
        match store.watch_from(start) {
            Ok((backlog, receiver)) => {
                if request.resource_version.is_none() {
                    for object in
                        store.list(&request.target.rt, request.target.namespace.as_deref())
                    {
                        if request.wants(&object) {
                            pending.push_back(line(&json!({"type": "ADDED", "object": object})));
                        }
                    }
                    if request.send_initial_events && request.bookmarks {
                        pending.push_back(request.bookmark(start, true));
                    }
                }
                for change in backlog.iter().filter(|c| request.wants_change(c)) {
                    let object = request.with_version(change.object.clone());
                    pending.push_back(line(
                        &json!({"type": change.kind.as_str(), "object": object}),
                    ));
                }
                (Some(receiver), backlog.last().map_or(start, |c| c.rv))
            }
            Err(gone) => {
                // The real server accepts the watch and sends the 410 as an ERROR event.
                pending.push_back(error_event(&gone));
                (None, start)
            }
        }
    };
    let now = Instant::now();
    let interval = shared.config.bookmark_interval;
    let drops = shared.watch_drops.subscribe();
    let generation = drops.borrow().number;
    // Counted as open only if no drop came in between: that drop's change ends it at once.
    shared.watch_drops.send_if_modified(|g| {
        if g.number == generation {
            g.live += 1;
        }
        false
    });
    let stream = Stream {
        drops,
        generation,
        shared,
        finished: receiver.is_none(),
        receiver,
        last_rv,
        sent: 0,
        deadline: now + request.timeout,
        next_bookmark: now + interval,
        request,
        pending,
    };
    let body = Body::from_stream(futures_util::stream::unfold(stream, next_chunk));
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response()
}

async fn next_chunk(mut s: Stream) -> Option<(Result<Bytes, std::io::Error>, Stream)> {
    loop {
        if s.request.drop_after.is_some_and(|n| s.sent >= n) {
            return None;
        }
        if let Some(chunk) = s.pending.pop_front() {
            s.sent += 1;
            return Some((Ok(chunk), s));
        }
        if s.finished {
            return None;
        }
        let receiver = s.receiver.as_mut()?;
        tokio::select! {
            change = receiver.recv() => match change {
                // A watch from a version the store had not reached when it started skips the
                // changes up to that version: the stream is of changes after it.
                Ok(change) if change.rv <= s.last_rv => {}
                Ok(change) => {
                    s.last_rv = change.rv;
                    if s.request.wants_change(&change) {
                        let object = s.request.with_version(change.object.clone());
                        s.pending.push_back(line(&json!({"type": change.kind.as_str(), "object": object})));
                    }
                }
                Err(RecvError::Lagged(_)) => {
                    // This watcher fell too far behind: as a real server, end it with 410.
                    let oldest = super::lock(&s.shared.store).oldest_resumable();
                    s.pending.push_back(error_event(&ApiError::gone(s.last_rv, oldest)));
                    s.finished = true;
                }
                Err(RecvError::Closed) => return None,
            },
            () = tokio::time::sleep_until(s.next_bookmark) => {
                s.next_bookmark = Instant::now() + s.shared.config.bookmark_interval;
                if s.request.bookmarks {
                    s.pending.push_back(s.request.bookmark(s.last_rv, false));
                }
            }
            () = tokio::time::sleep_until(s.deadline) => return None,
            _ = s.drops.changed() => return None,
        }
    }
}
