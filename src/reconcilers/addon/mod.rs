//! The add-on install-progression reference reconciler, modelled on Open Cluster Management's
//! `cmainstallprogression` controller: a cluster-scoped ClusterManagementAddOn whose status
//! (`defaultConfigReferences`, `installProgressions`) is computed from its spec and written with
//! one of three status patches, each a JSON merge patch carrying the object's resourceVersion.

use std::future::Future;
use std::sync::Arc;

use kube::api::Api;
use kube::{CustomResource, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::engine::conflict::patch_status;
use crate::engine::{OpContext, OpError, OpOutput, OpResult, Reconciler};
use crate::plan::ReconcilePlan;
use crate::vocab::ErrorClass;

/// The annotation that makes an add-on self-managed.
pub const SELF_MANAGED_ANNOTATION: &str = "addon.open-cluster-management.io/lifecycle";

/// Config names that are never default configs.
const RESERVED_NAMES: &[&str] = &["__reserved"];

/// A default configuration of the add-on.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ConfigRef {
    /// API group of the config.
    #[serde(default)]
    pub group: String,
    /// Resource of the config.
    pub resource: String,
    /// Name of the config.
    #[serde(default)]
    pub name: String,
    /// Namespace of the config.
    #[serde(default)]
    pub namespace: String,
}

/// A placement the add-on is installed by.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PlacementRef {
    /// Placement name.
    pub name: String,
    /// Placement namespace.
    pub namespace: String,
}

/// How the add-on is installed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct InstallStrategy {
    /// `Manual` or `Placements`.
    #[serde(rename = "type")]
    pub type_: String,
    /// The placements, for `Placements`.
    #[serde(default)]
    pub placements: Vec<PlacementRef>,
}

/// The add-on's desired installation.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "example.shadow-reconciler.io",
    version = "v1",
    kind = "ClusterManagementAddOn",
    status = "AddOnStatus",
    shortname = "cma"
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterManagementAddOnSpec {
    /// The install strategy.
    #[serde(default)]
    pub install_strategy: InstallStrategy,
    /// Default configurations.
    #[serde(default)]
    pub default_configs: Vec<ConfigRef>,
}

/// The computed status (kept as JSON: other writers add fields this model does not know).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AddOnStatus {
    /// Conditions, including `ReconciliationSucceeded`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::reconcilers::any_list")]
    pub conditions: Vec<Value>,
    /// Default config references, with their spec hashes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::reconcilers::any_list")]
    pub default_config_references: Vec<Value>,
    /// Per-placement progress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::reconcilers::any_list")]
    pub install_progressions: Option<Vec<Value>>,
}

/// Every operation of the add-on plan.
pub const OPERATIONS: &[&str] = &[
    "DefaultConfigReferences",
    "ManualStrategyStatus",
    "SelfManagedStatus",
    "PlacementStatus",
];

/// State the operations of one run share.
#[derive(Clone, Debug, Default)]
pub struct State {
    /// The default config references `DefaultConfigReferences` computed.
    pub default_references: Option<Vec<Value>>,
}

/// The reconciler.
#[derive(Clone, Copy, Debug, Default)]
pub struct AddOnReconciler;

impl AddOnReconciler {
    /// The shipped plan this reconciler implements.
    ///
    /// # Panics
    /// Never: the shipped plan is valid (the test suite loads it).
    #[must_use]
    pub fn plan() -> Arc<ReconcilePlan> {
        crate::reconcilers::shipped_plan("addon-install-progression")
    }
}

/// `status.defaultConfigReferences` from `spec.defaultConfigs`: empty and reserved names are
/// skipped, existing spec hashes are kept.
pub fn default_references(addon: &ClusterManagementAddOn) -> Result<Vec<Value>, OpError> {
    let existing = addon
        .status
        .as_ref()
        .map(|s| s.default_config_references.clone())
        .unwrap_or_default();
    let mut references = Vec::new();
    for config in &addon.spec.default_configs {
        if config.resource.is_empty() {
            return Err(OpError::new(
                ErrorClass::Invalid,
                format!("default config {:?} has no resource", config.name),
            ));
        }
        if config.name.is_empty() || RESERVED_NAMES.contains(&config.name.as_str()) {
            continue;
        }
        let desired = json!({"name": config.name, "namespace": config.namespace});
        let hash = existing
            .iter()
            .find(|r| {
                r["group"] == config.group.as_str()
                    && r["resource"] == config.resource.as_str()
                    && r["desiredConfig"]["name"] == config.name.as_str()
            })
            .and_then(|r| r["desiredConfig"].get("specHash").cloned());
        let mut desired = desired;
        if let Some(hash) = hash {
            desired["specHash"] = hash;
        }
        references.push(
            json!({"group": config.group, "resource": config.resource, "desiredConfig": desired}),
        );
    }
    Ok(references)
}

fn self_managed(addon: &ClusterManagementAddOn) -> bool {
    addon
        .annotations()
        .get(SELF_MANAGED_ANNOTATION)
        .is_some_and(|v| v == "self")
}

fn current_status(addon: &ClusterManagementAddOn) -> Value {
    serde_json::to_value(addon.status.clone().unwrap_or_default()).unwrap_or_else(|_| json!({}))
}

/// The status each path writes, computed from an object (cached or freshly read).
fn manual_status(addon: &ClusterManagementAddOn) -> Value {
    let mut status = current_status(addon);
    status["defaultConfigReferences"] = json!(default_references(addon).unwrap_or_default());
    status["installProgressions"] = json!([]);
    status
}

fn self_managed_status(addon: &ClusterManagementAddOn) -> Value {
    let mut status = current_status(addon);
    status["defaultConfigReferences"] = json!(default_references(addon).unwrap_or_default());
    status
}

fn placement_status(addon: &ClusterManagementAddOn) -> Value {
    let mut status = current_status(addon);
    let references = default_references(addon).unwrap_or_default();
    let existing = status["installProgressions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let progressions: Vec<Value> = addon
        .spec
        .install_strategy
        .placements
        .iter()
        .map(|p| {
            let placement = json!({"name": p.name, "namespace": p.namespace});
            // Keep what other writers recorded (lastApplied, lastKnownGood, conditions).
            let mut progression = existing
                .iter()
                .find(|e| e["placementRef"] == placement)
                .cloned()
                .unwrap_or_else(|| json!({"placementRef": placement}));
            progression["configReferences"] = json!(references);
            progression
        })
        .collect();
    status["defaultConfigReferences"] = json!(references);
    status["installProgressions"] = json!(progressions);
    status
}

type Ctx = OpContext<ClusterManagementAddOn, State>;

async fn patch(ctx: &mut Ctx, compute: fn(&ClusterManagementAddOn) -> Value) -> OpResult {
    let api: Api<ClusterManagementAddOn> = Api::all(ctx.client());
    let cached = ctx.object().as_ref().clone();
    Ok(match patch_status(ctx, &api, &cached, compute).await? {
        // The status was as computed already: no request.
        crate::engine::conflict::StatusPatch::Unchanged => OpOutput::nothing_to_do(),
        crate::engine::conflict::StatusPatch::Patched => OpOutput::done(),
    })
}

async fn run(op: &str, ctx: &mut Ctx) -> OpResult {
    let addon = ctx.object().clone();
    let strategy = addon.spec.install_strategy.type_.as_str();
    match op {
        "DefaultConfigReferences" => {
            ctx.state.default_references = Some(default_references(&addon)?);
            Ok(OpOutput::done())
        }
        "ManualStrategyStatus" if strategy == "Manual" => patch(ctx, manual_status).await,
        "SelfManagedStatus" if strategy != "Manual" && self_managed(&addon) => {
            patch(ctx, self_managed_status).await
        }
        "PlacementStatus" if strategy == "Placements" && !self_managed(&addon) => {
            patch(ctx, placement_status).await
        }
        // The branches this add-on does not take.
        "ManualStrategyStatus" | "SelfManagedStatus" | "PlacementStatus" => {
            Ok(OpOutput::nothing_to_do())
        }
        other => Err(OpError::internal(format!(
            "operation {other} is not implemented"
        ))),
    }
}

impl Reconciler for AddOnReconciler {
    type Object = ClusterManagementAddOn;
    type State = State;

    fn operations(&self) -> &'static [&'static str] {
        OPERATIONS
    }

    fn run<'a>(
        &'a self,
        op: &'a str,
        ctx: &'a mut Ctx,
    ) -> impl Future<Output = OpResult> + Send + 'a {
        run(op, ctx)
    }
}
