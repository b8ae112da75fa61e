//! Writing the `ReconciliationSucceeded` condition from the control report, only when it changed.

use kube::Resource;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use serde::Serialize;
use serde_json::{Value, json};

use crate::model::Condition;

/// Whether the condition in `conditions` already says the same (type, status, reason, message;
/// `lastTransitionTime` is ignored).
fn unchanged(conditions: &[Value], condition: &Condition) -> bool {
    conditions.iter().any(|c| {
        c["type"] == condition.type_
            && c["status"] == condition.status.as_str()
            && c["reason"] == condition.reason
            && c["message"] == condition.message.as_str()
    })
}

/// The object's conditions with `condition` put in (replacing one of the same type).
fn merged(conditions: &[Value], condition: &Condition, generation: Option<i64>) -> Vec<Value> {
    let existing = conditions.iter().find(|c| c["type"] == condition.type_);
    // The transition time moves only when the status flips.
    let transition = match existing {
        Some(c) if c["status"] == condition.status.as_str() => c["lastTransitionTime"].clone(),
        _ => json!(crate::util::time::now_rfc3339()),
    };
    let mut entry = json!({
        "type": condition.type_, "status": condition.status.as_str(), "reason": condition.reason,
        "message": condition.message, "lastTransitionTime": transition,
    });
    if let Some(generation) = generation {
        entry["observedGeneration"] = json!(generation);
    }
    let mut result: Vec<Value> = conditions
        .iter()
        .filter(|c| c["type"] != condition.type_)
        .cloned()
        .collect();
    result.push(entry);
    result
}

/// Attempts at writing the condition when other writers keep changing the object.
const ATTEMPTS: u32 = 5;

/// Writes `condition` into the object's `status.conditions`, unless the object already carries
/// the same one. Returns whether it wrote.
///
/// The cached object decides whether a write is needed (no request otherwise). A write reads the
/// object first and patches the conditions computed from that fresh copy with its
/// resourceVersion as a precondition, so conditions other writers set in the meantime (including
/// this reconcile's own operations) are never erased; a 409 re-reads and tries again.
pub async fn write_if_changed<K>(
    client: &kube::Client,
    object: &K,
    condition: &Condition,
) -> Result<bool, kube::Error>
where
    K: Resource<DynamicType = ()> + Serialize,
{
    let value = serde_json::to_value(object).map_err(kube::Error::SerdeError)?;
    let cached = value
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if unchanged(&cached, condition) {
        return Ok(false);
    }
    let meta = object.meta();
    let name = meta.name.clone().unwrap_or_default();
    let resource = ApiResource::erase::<K>(&());
    let api: Api<DynamicObject> = match &meta.namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    let mut attempt = 1;
    loop {
        let fresh = api.get(&name).await?;
        let conditions = fresh
            .data
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if unchanged(&conditions, condition) {
            return Ok(false);
        }
        let patch = json!({
            "metadata": {"resourceVersion": fresh.metadata.resource_version},
            "status": {"conditions": merged(&conditions, condition, fresh.metadata.generation)},
        });
        match api
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => return Ok(true),
            Err(e) if super::classify::is_conflict(&e) && attempt < ATTEMPTS => attempt += 1,
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ConditionStatus;

    fn condition(status: ConditionStatus, message: &str) -> Condition {
        Condition {
            type_: "ReconciliationSucceeded",
            status,
            reason: "R",
            message: message.into(),
        }
    }

    #[test]
    fn same_condition_is_unchanged_whatever_its_time() {
        let existing = vec![
            json!({"type": "ReconciliationSucceeded", "status": "True", "reason": "R", "message": "m", "lastTransitionTime": "t0"}),
        ];
        assert!(unchanged(&existing, &condition(ConditionStatus::True, "m")));
        assert!(!unchanged(
            &existing,
            &condition(ConditionStatus::True, "other")
        ));
        assert!(!unchanged(&[], &condition(ConditionStatus::True, "m")));
    }

    #[test]
    fn merge_keeps_other_conditions_and_moves_time_only_on_a_flip() {
        let existing = vec![
            json!({"type": "Available", "status": "True"}),
            json!({"type": "ReconciliationSucceeded", "status": "False", "reason": "R", "message": "a", "lastTransitionTime": "t0"}),
        ];
        let same_status = merged(&existing, &condition(ConditionStatus::False, "b"), Some(3));
        assert_eq!(same_status.len(), 2);
        assert_eq!(same_status[0]["type"], "Available");
        assert_eq!(same_status[1]["lastTransitionTime"], "t0");
        assert_eq!(same_status[1]["observedGeneration"], 3);
        let flipped = merged(&existing, &condition(ConditionStatus::True, "ok"), None);
        assert_ne!(flipped[1]["lastTransitionTime"], "t0");
    }
}
