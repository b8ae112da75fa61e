//! A kube-rs controller on the shadow engine, start to end: a `Widget` kind, its three
//! operations, the plan that classifies them, and the controller that runs the legacy order for
//! real and the phased one in shadow. The tests build this file (`cargo test --all-targets`);
//! run it against a cluster with the Widget CRD applied:
//!
//! ```sh
//! cargo run --example rust-controller -- --print-crd | kubectl apply -f -
//! cargo run --example rust-controller    # KUBECONFIG or ~/.kube/config; Ctrl-C stops it
//! ```
//!
//! Each reconcile logs HyperShift's "successfully reconciled" or "reconciliation completed with
//! errors" line with what the phased order would have unblocked; add the Parquet, metrics or
//! trace sinks of `shadow-reconciler run` (see `src/cli/run.rs`) to record it for `analyze`.
//! `tests/system/rust_example.rs` runs this controller on a real kube-apiserver.

use std::sync::Arc;

use kube::api::{Api, Patch, PatchParams};
use kube::{CustomResource, CustomResourceExt, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use shadow_reconciler::engine::{Engine, OpContext, OpError, OpOutput, OpResult, Reconciler};
use shadow_reconciler::flag::{FlagSpec, LiveFlag};
use shadow_reconciler::plan::ReconcilePlan;
use shadow_reconciler::vocab::{ErrorClass, Mode};
use shadow_reconciler::wiring::Wiring;

/// A widget: a config map it renders, and a secret it needs.
#[derive(CustomResource, Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "example.com",
    version = "v1",
    kind = "Widget",
    namespaced,
    status = "WidgetStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct WidgetSpec {
    /// The secret the widget's credentials come from.
    pub credentials_secret: String,
    /// What the rendered config map says.
    pub greeting: String,
}

/// The widget's status: the engine writes its `ReconciliationSucceeded` condition here.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
pub struct WidgetStatus {
    /// The conditions, as Kubernetes writes them.
    #[serde(default)]
    #[schemars(schema_with = "free_form_list")]
    pub conditions: Vec<serde_json::Value>,
}

fn free_form_list(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}})
}

/// The hypothesis under test (`examples/widget-plan.yaml`, checked by the tests): `CredentialsCheck`
/// fails when the secret is missing, and the legacy loop then never renders the config map,
/// although rendering does not need the credentials.
const PLAN: &str = include_str!("widget-plan.yaml");

/// The operations, by the plan's names.
pub struct WidgetReconciler;

/// What the operations of one reconcile share (nothing, here).
#[derive(Clone, Default)]
pub struct State;

const OPERATIONS: &[&str] = &["CredentialsCheck", "RenderConfigMap", "PublishStatus"];

impl Reconciler for WidgetReconciler {
    type Object = Widget;
    type State = State;

    fn operations(&self) -> &'static [&'static str] {
        OPERATIONS
    }

    async fn run(&self, op: &str, ctx: &mut OpContext<Widget, State>) -> OpResult {
        // The client is real in the control and dry-run in the candidate: the operations
        // do not need to know which.
        let widget = ctx.object().clone();
        let namespace = widget.namespace().unwrap_or_default();
        match op {
            "CredentialsCheck" => {
                let secrets: Api<k8s_openapi::api::core::v1::Secret> =
                    Api::namespaced(ctx.client(), &namespace);
                match secrets.get_opt(&widget.spec.credentials_secret).await {
                    Ok(Some(_)) => Ok(OpOutput::done()),
                    Ok(None) => Err(OpError::new(
                        ErrorClass::NotFound,
                        format!("secret {} not found", widget.spec.credentials_secret),
                    )),
                    Err(e) => Err(OpError::new(ErrorClass::Server, e.to_string())),
                }
            }
            "RenderConfigMap" => {
                let maps: Api<k8s_openapi::api::core::v1::ConfigMap> =
                    Api::namespaced(ctx.client(), &namespace);
                let name = format!("{}-config", widget.name_any());
                let map = json!({
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": name},
                    "data": {"greeting": widget.spec.greeting},
                });
                maps.patch(
                    &name,
                    &PatchParams::apply("widget-controller"),
                    &Patch::Apply(&map),
                )
                .await
                .map(|_| OpOutput::done())
                .map_err(|e| OpError::new(ErrorClass::Server, e.to_string()))
            }
            "PublishStatus" => Ok(OpOutput::done()),
            other => Err(OpError::internal(format!("no operation {other}"))),
        }
    }
}

/// The engine for widgets, in shadow: the legacy order runs for real, the phased one is evaluated
/// beside it. (`tests/system/rust_example.rs` runs it on a real kube-apiserver.)
pub fn engine(client: kube::Client) -> anyhow::Result<Engine<WidgetReconciler>> {
    let plan = plan()?;
    Ok(wiring(client, &plan)?.engine(WidgetReconciler, plan)?)
}

/// The widgets' plan.
pub fn plan() -> anyhow::Result<Arc<ReconcilePlan>> {
    Ok(Arc::new(ReconcilePlan::from_yaml("widget plan", PLAN)?))
}

/// What the widget engine shares with any other engine of the process: the client, and the flag
/// (shadow for every object here; a `flag::watch::run` task would let a ConfigMap change it).
pub fn wiring(client: kube::Client, plan: &Arc<ReconcilePlan>) -> anyhow::Result<Wiring> {
    let flag = FlagSpec {
        mode: Mode::Shadow,
        ..FlagSpec::default()
    };
    let flag = LiveFlag::new(flag, vec![plan.clone()])?;
    Ok(Wiring::new(client, Arc::new(flag)))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    if std::env::args().any(|a| a == "--print-crd") {
        print!("{}", serde_json::to_string_pretty(&Widget::crd())?);
        return Ok(());
    }
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .init();
    let client = kube::Client::try_default().await?;
    let plan = plan()?;
    let engine = wiring(client.clone(), &plan)?
        .with_log_records(true)
        .engine(WidgetReconciler, plan)?;
    shadow_reconciler::engine::controller::run(
        Arc::new(engine),
        Api::<Widget>::all(client),
        async {
            let _ = tokio::signal::ctrl_c().await;
        },
        || tracing::info!("widgets can be listed; reconciling"),
    )
    .await;
    Ok(())
}
