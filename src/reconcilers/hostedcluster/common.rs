//! What the operations of both code paths share: the run's context type, the HostedCluster as
//! last known, the namespaces, and the mid-loop condition update.

use std::collections::BTreeMap;

use kube::ResourceExt;
use kube::api::{Api, PostParams};
use serde_json::json;

use super::{HostedCluster, State, control_plane_namespace};
use crate::engine::{OpContext, OpError};

/// The context of one operation of this reconciler.
pub(super) type Ctx = OpContext<HostedCluster, State>;

pub(super) fn hc(ctx: &Ctx) -> HostedCluster {
    ctx.state
        .hosted_cluster
        .clone()
        .unwrap_or_else(|| ctx.object().as_ref().clone())
}

pub(super) fn hc_namespace(ctx: &Ctx) -> String {
    ctx.object().namespace().unwrap_or_default()
}

pub(super) fn cp_namespace(ctx: &Ctx) -> String {
    control_plane_namespace(ctx.object())
}

pub(super) fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// Sets a HostedCluster condition with a status update carrying the last known resourceVersion
/// (a stale one answers 409), as HyperShift does mid-loop. No write when nothing changes.
pub(super) async fn set_condition(
    ctx: &mut Ctx,
    type_: &str,
    status: bool,
    reason: &str,
    message: &str,
) -> Result<(), OpError> {
    let mut current = hc(ctx);
    let status_text = if status { "True" } else { "False" };
    let conditions = &mut current
        .status
        .get_or_insert_with(Default::default)
        .conditions;
    if conditions.iter().any(|c| {
        c["type"] == type_
            && c["status"] == status_text
            && c["reason"] == reason
            && c["message"] == message
    }) {
        return Ok(());
    }
    conditions.retain(|c| c["type"] != type_);
    conditions.push(json!({"type": type_, "status": status_text, "reason": reason, "message": message, "lastTransitionTime": crate::util::time::now_rfc3339()}));
    let api: Api<HostedCluster> = Api::namespaced(ctx.client(), &hc_namespace(ctx));
    let written = api
        .replace_status(&current.name_any(), &PostParams::default(), &current)
        .await
        .map_err(|e| {
            if crate::engine::classify::is_conflict(&e) {
                ctx.count_conflict();
            }
            OpError::from(e).context(&format!("update HostedCluster status ({type_})"))
        })?;
    ctx.state.hosted_cluster = Some(written);
    Ok(())
}
