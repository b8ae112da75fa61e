//! The span convention (`docs/ingest.md`): which span is a reconcile, which an operation, how an
//! error and its class are carried, and the object's identity. Pure: an OTLP span in, a
//! [`SpanFacts`] out.

use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::{Span, status};

use crate::engine::WriteDifference;
use crate::engine::classify::class_of_status;
use crate::vocab::{ErrorClass, WriteVerb, span};

/// How spans are read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Convention {
    /// The name of reconcile spans (also recognised: [`span::RECONCILE`] = true).
    pub reconcile_span_name: String,
    /// The attribute carrying an operation span's operation name (default
    /// `shadow_reconciler.operation`); a span without it whose name is an operation of the plan
    /// counts too.
    pub operation_attribute: String,
}

impl Default for Convention {
    fn default() -> Self {
        Self {
            reconcile_span_name: "reconcile".into(),
            operation_attribute: span::OPERATION.into(),
        }
    }
}

/// What a span says, by the convention.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// A reconcile: the object and, when given, the plan.
    Reconcile {
        /// The plan's name, when the span or its resource names one.
        plan: Option<String>,
        /// The object.
        object: Object,
        /// What an in-process engine says about the run (all absent for a plain legacy loop).
        run: RunFacts,
    },
    /// An operation, named by the attribute (or the span's name: resolved against the plan).
    Operation {
        /// The operation's name (the attribute's value, else the span's name).
        name: String,
        /// Whether the name came from the attribute (else it may just be any child span).
        explicit: bool,
        /// The failure, if the span reports one.
        failure: Option<(ErrorClass, String)>,
        /// `shadow_reconciler.outcome` is `idle`: it ran and had nothing to do.
        idle: bool,
        /// `shadow_reconciler.policy`, when set (`control` or `candidate`).
        policy: Option<String>,
        /// `shadow_reconciler.execution`, when set.
        execution: Option<String>,
        /// `shadow_reconciler.conflicts`: the 409 Conflicts the operation met (0 when absent).
        conflicts: u32,
        /// `shadow_reconciler.retried`: whether it ran under retry-on-conflict.
        retried: bool,
        /// `shadow_reconciler.reevaluated`, on a candidate's dry run: whether it re-evaluates a
        /// step the control failed on a 409 (absent: inferred from the control's step).
        reevaluated: Option<bool>,
        /// Its `shadow_reconciler.write_difference` events (operation name and code path are
        /// the reconstruction's to fill in from the plan).
        writes: Vec<WriteDifference>,
    },
}

/// Write difference events read from one span, at most this many (the rest are dropped).
pub const MAX_WRITE_EVENTS: usize = 256;

/// The write difference events of a span; an event without a kind or name, or with a verb that
/// is not one, is left out.
fn write_events(span: &Span) -> Vec<WriteDifference> {
    use crate::vocab::span::event;
    span.events
        .iter()
        .filter(|e| e.name == event::NAME)
        .take(MAX_WRITE_EVENTS)
        .filter_map(|e| {
            let a = e.attributes.as_slice();
            let verb = |key: &str| -> Result<Option<WriteVerb>, ()> {
                text(a, key).map_or(Ok(None), |v| v.parse().map(Some).map_err(|_| ()))
            };
            Some(WriteDifference {
                operation: String::new(),
                only: None,
                group: string(attribute(a, event::GROUP))
                    .unwrap_or_default()
                    .to_owned(),
                kind: text(a, event::KIND)?.to_owned(),
                namespace: text(a, event::NAMESPACE).map(str::to_owned),
                name: text(a, event::NAME_ATTRIBUTE)?.to_owned(),
                subresource: text(a, event::SUBRESOURCE).map(str::to_owned),
                control: verb(event::CONTROL).ok()?,
                candidate: verb(event::CANDIDATE).ok()?,
                fields: names(a, event::FIELDS).unwrap_or_default(),
                fields_total: count(a, event::FIELDS_TOTAL).unwrap_or(0),
                intended: matches!(
                    attribute(a, event::INTENDED).and_then(|v| v.value.as_ref()),
                    Some(any_value::Value::BoolValue(true))
                ),
            })
        })
        .collect()
}

/// The attributes an in-process engine (the Go package) sets on the reconcile span beside the
/// object's: the mode it ran, the groups of its policies, the plan's hash and its dry-run
/// counters. A legacy loop traced by hand sets none of them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunFacts {
    /// `shadow_reconciler.mode` (`off`, `shadow`, `enforce`); absent: `shadow`.
    pub mode: Option<String>,
    /// `shadow_reconciler.enforced_groups`: the control's enforced groups in mode `enforce`.
    pub enforced_groups: Option<Vec<String>>,
    /// `shadow_reconciler.candidate_groups`: the candidate's groups (absent: the sidecar's;
    /// empty: every operation enforced, as the flag's empty `candidateGroups`).
    pub candidate_groups: Option<Vec<String>>,
    /// `shadow_reconciler.plan.hash`: checked against the loaded plan's.
    pub plan_hash: Option<String>,
    /// `shadow_reconciler.dry_run_requests`.
    pub dry_run_requests: Option<u32>,
    /// `shadow_reconciler.guard_refusals`.
    pub guard_refusals: Option<u32>,
    /// `feature_flag.result.reason`: why the flag gave this mode.
    pub flag_reason: Option<String>,
    /// `feature_flag.version`: the flag ConfigMap's resourceVersion.
    pub flag_version: Option<String>,
    /// The reconcile span's error status message, when it has one: the control's error where no
    /// operation span shows a failure (a legacy loop that failed outside its marked steps).
    pub error: Option<String>,
    /// `shadow_reconciler.cancelled`: the reconcile was cut short before it finished (its
    /// operation spans are not read).
    pub cancelled: bool,
    /// `shadow_reconciler.comparison_skipped`: the control ran alone (no candidate), for this
    /// reason; an unknown reason reads as none.
    pub comparison_skipped: Option<crate::vocab::ComparisonSkip>,
}

/// The object reconciled, from the reconcile span's attributes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Object {
    /// `k8s.object.kind` (or `k8s.resource.kind`).
    pub kind: String,
    /// `k8s.namespace.name`.
    pub namespace: Option<String>,
    /// `k8s.object.name`.
    pub name: String,
    /// `k8s.object.uid`.
    pub uid: Option<String>,
}

/// One span reduced to what reconstruction needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpanFacts {
    /// 16 bytes.
    pub trace_id: [u8; 16],
    /// 8 bytes.
    pub span_id: [u8; 8],
    /// 8 bytes, or `None` for a root span.
    pub parent: Option<[u8; 8]>,
    /// Start, Unix nanoseconds.
    pub start: u64,
    /// End, Unix nanoseconds.
    pub end: u64,
    /// What the span is.
    pub role: Role,
}

/// Why a span cannot be used at all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Malformed {
    /// The trace id is not 16 bytes or all zero.
    TraceId,
    /// The span id is not 8 bytes or all zero.
    SpanId,
    /// The parent span id is neither empty nor 8 bytes.
    ParentId,
    /// The end is before the start.
    Times,
}

impl Malformed {
    /// For logs and partial-success messages.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::TraceId => "trace_id is not 16 bytes or is all zero",
            Self::SpanId => "span_id is not 8 bytes or is all zero",
            Self::ParentId => "parent_span_id is neither empty nor 8 bytes",
            Self::Times => "end_time_unix_nano is before start_time_unix_nano",
        }
    }
}

fn string(value: Option<&AnyValue>) -> Option<&str> {
    match value?.value.as_ref()? {
        any_value::Value::StringValue(s) => Some(s.as_str()),
        _ => None,
    }
}

fn attribute<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a AnyValue> {
    attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
}

fn text<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a str> {
    string(attribute(attributes, key)).filter(|s| !s.is_empty())
}

/// A list of names: a string array, or one comma-separated string.
fn names(attributes: &[KeyValue], key: &str) -> Option<Vec<String>> {
    let names: Vec<String> = match attribute(attributes, key)?.value.as_ref()? {
        any_value::Value::StringValue(s) => s.split(',').map(str::to_owned).collect(),
        any_value::Value::ArrayValue(array) => array
            .values
            .iter()
            .filter_map(|v| string(Some(v)).map(str::to_owned))
            .collect(),
        _ => return None,
    };
    Some(
        names
            .into_iter()
            .map(|n| n.trim().to_owned())
            .filter(|n| !n.is_empty())
            .collect(),
    )
}

fn count(attributes: &[KeyValue], key: &str) -> Option<u32> {
    integer(attributes, key).map(|n| u32::try_from(n.max(0)).unwrap_or(u32::MAX))
}

fn integer(attributes: &[KeyValue], key: &str) -> Option<i64> {
    match attribute(attributes, key)?.value.as_ref()? {
        any_value::Value::IntValue(i) => Some(*i),
        any_value::Value::StringValue(s) => s.parse().ok(),
        _ => None,
    }
}

/// The class of a failed span: `error.type` when it is one of ours or a Kubernetes reason, else
/// an HTTP or Kubernetes status code attribute, else `internal`.
#[must_use]
pub fn class_of(attributes: &[KeyValue]) -> ErrorClass {
    let code = integer(attributes, "http.response.status_code")
        .or_else(|| integer(attributes, span::semconv::K8S_STATUS_CODE))
        .and_then(|c| u16::try_from(c).ok());
    let reason = text(attributes, span::semconv::K8S_STATUS_REASON).unwrap_or_default();
    if let Some(kind) = text(attributes, span::semconv::ERROR_TYPE) {
        if let Some(class) = ErrorClass::ALL.into_iter().find(|c| c.as_str() == kind) {
            return class;
        }
        if let Some(class) = class_of_reason(kind) {
            return class;
        }
        if let Ok(code) = kind.parse::<u16>() {
            return class_of_status(code, reason);
        }
    }
    match code {
        Some(code) => class_of_status(code, reason),
        None => class_of_reason(reason).unwrap_or(ErrorClass::Internal),
    }
}

/// The class of a Kubernetes `Status.reason`.
fn class_of_reason(reason: &str) -> Option<ErrorClass> {
    Some(match reason {
        "Conflict" => ErrorClass::Conflict,
        "AlreadyExists" => ErrorClass::AlreadyExists,
        "NotFound" | "Gone" => ErrorClass::NotFound,
        "Forbidden" | "Unauthorized" => ErrorClass::Forbidden,
        "Invalid" | "BadRequest" | "RequestEntityTooLarge" | "UnsupportedMediaType" => {
            ErrorClass::Invalid
        }
        "TooManyRequests" => ErrorClass::Throttled,
        "InternalError" | "ServiceUnavailable" => ErrorClass::Server,
        "Timeout" | "ServerTimeout" | "DeadlineExceeded" => ErrorClass::Timeout,
        _ => return None,
    })
}

fn id<const N: usize>(bytes: &[u8]) -> Option<[u8; N]> {
    let id: [u8; N] = bytes.try_into().ok()?;
    (id != [0; N]).then_some(id)
}

impl Convention {
    /// The span's facts, with the resource's attributes as a fallback for the plan.
    pub fn read(&self, span: &Span, resource: &[KeyValue]) -> Result<SpanFacts, Malformed> {
        let trace_id = id::<16>(&span.trace_id).ok_or(Malformed::TraceId)?;
        let span_id = id::<8>(&span.span_id).ok_or(Malformed::SpanId)?;
        let parent = if span.parent_span_id.is_empty() {
            None
        } else {
            Some(id::<8>(&span.parent_span_id).ok_or(Malformed::ParentId)?)
        };
        if span.end_time_unix_nano < span.start_time_unix_nano {
            return Err(Malformed::Times);
        }
        let a = span.attributes.as_slice();
        let reconcile = span.name == self.reconcile_span_name
            || matches!(
                attribute(a, span::RECONCILE).and_then(|v| v.value.as_ref()),
                Some(any_value::Value::BoolValue(true))
            );
        let role = if reconcile {
            Role::Reconcile {
                plan: text(a, span::PLAN)
                    .or_else(|| text(resource, span::PLAN))
                    .map(str::to_owned),
                object: Object {
                    kind: text(a, span::semconv::K8S_OBJECT_KIND)
                        .or_else(|| text(a, span::semconv::K8S_RESOURCE_KIND))
                        .unwrap_or_default()
                        .to_owned(),
                    namespace: text(a, span::semconv::K8S_NAMESPACE_NAME).map(str::to_owned),
                    name: text(a, span::semconv::K8S_OBJECT_NAME)
                        .unwrap_or_default()
                        .to_owned(),
                    uid: text(a, span::semconv::K8S_OBJECT_UID).map(str::to_owned),
                },
                run: RunFacts {
                    mode: text(a, span::MODE).map(str::to_owned),
                    enforced_groups: names(a, span::ENFORCED_GROUPS),
                    candidate_groups: names(a, span::CANDIDATE_GROUPS),
                    plan_hash: text(a, span::PLAN_HASH).map(str::to_owned),
                    dry_run_requests: count(a, span::DRY_RUN_REQUESTS),
                    guard_refusals: count(a, span::GUARD_REFUSALS),
                    flag_reason: text(a, span::feature_flag::RESULT_REASON).map(str::to_owned),
                    flag_version: text(a, span::feature_flag::VERSION).map(str::to_owned),
                    error: span
                        .status
                        .as_ref()
                        .filter(|s| s.code == status::StatusCode::Error as i32)
                        .map(|s| s.message.clone()),
                    cancelled: matches!(
                        attribute(a, span::CANCELLED).and_then(|v| v.value.as_ref()),
                        Some(any_value::Value::BoolValue(true))
                    ),
                    comparison_skipped: text(a, span::COMPARISON_SKIPPED)
                        .and_then(|s| s.parse().ok()),
                },
            }
        } else {
            let failed = span
                .status
                .as_ref()
                .is_some_and(|s| s.code == status::StatusCode::Error as i32);
            let named = text(a, &self.operation_attribute);
            Role::Operation {
                name: named.unwrap_or(&span.name).to_owned(),
                explicit: named.is_some(),
                failure: failed.then(|| {
                    let message = span
                        .status
                        .as_ref()
                        .map(|s| s.message.clone())
                        .unwrap_or_default();
                    (class_of(a), message)
                }),
                idle: !failed
                    && text(a, span::OUTCOME) == Some(crate::vocab::Outcome::Idle.as_str()),
                policy: text(a, span::POLICY).map(str::to_owned),
                execution: text(a, span::EXECUTION).map(str::to_owned),
                conflicts: count(a, span::CONFLICTS).unwrap_or(0),
                retried: matches!(
                    attribute(a, span::RETRIED).and_then(|v| v.value.as_ref()),
                    Some(any_value::Value::BoolValue(true))
                ),
                reevaluated: match attribute(a, span::REEVALUATED).and_then(|v| v.value.as_ref()) {
                    Some(any_value::Value::BoolValue(b)) => Some(*b),
                    _ => None,
                },
                writes: write_events(span),
            }
        };
        Ok(SpanFacts {
            trace_id,
            span_id,
            parent,
            start: span.start_time_unix_nano,
            end: span.end_time_unix_nano,
            role,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(key: &str, value: any_value::Value) -> KeyValue {
        KeyValue {
            key: key.into(),
            value: Some(AnyValue { value: Some(value) }),
            ..KeyValue::default()
        }
    }

    fn s(v: &str) -> any_value::Value {
        any_value::Value::StringValue(v.into())
    }

    #[test]
    fn error_classes_from_our_names_kubernetes_reasons_and_status_codes() {
        let cases = [
            (vec![kv("error.type", s("conflict"))], ErrorClass::Conflict),
            (vec![kv("error.type", s("NotFound"))], ErrorClass::NotFound),
            (
                vec![kv("error.type", s("AlreadyExists"))],
                ErrorClass::AlreadyExists,
            ),
            (
                vec![kv("error.type", s("TooManyRequests"))],
                ErrorClass::Throttled,
            ),
            (vec![kv("error.type", s("503"))], ErrorClass::Server),
            (
                vec![kv(
                    "http.response.status_code",
                    any_value::Value::IntValue(409),
                )],
                ErrorClass::Conflict,
            ),
            (
                vec![
                    kv("k8s.status.code", any_value::Value::IntValue(409)),
                    kv("k8s.status.reason", s("AlreadyExists")),
                ],
                ErrorClass::AlreadyExists,
            ),
            (
                vec![kv("http.response.status_code", s("403"))],
                ErrorClass::Forbidden,
            ),
            (
                vec![kv("error.type", s("*errors.errorString"))],
                ErrorClass::Internal,
            ),
            (Vec::new(), ErrorClass::Internal),
        ];
        for (attributes, class) in cases {
            assert_eq!(class_of(&attributes), class, "{attributes:?}");
        }
    }

    #[test]
    fn a_reconcile_span_by_name_or_attribute_and_its_plan_from_the_resource() {
        let convention = Convention::default();
        let mut span = Span {
            trace_id: vec![1; 16],
            span_id: vec![2; 8],
            name: "Reconcile".into(),
            attributes: vec![kv(span::RECONCILE, any_value::Value::BoolValue(true))],
            ..Span::default()
        };
        let resource = [kv(span::PLAN, s("hostedcluster"))];
        let facts = convention.read(&span, &resource).unwrap();
        assert!(matches!(
            facts.role,
            Role::Reconcile { plan: Some(ref p), .. } if p == "hostedcluster"
        ));
        span.attributes.clear();
        let facts = convention.read(&span, &[]).unwrap();
        assert!(matches!(
            facts.role,
            Role::Operation {
                explicit: false,
                ..
            }
        ));
        span.parent_span_id = vec![0; 8];
        assert_eq!(convention.read(&span, &[]), Err(Malformed::ParentId));
    }
}
