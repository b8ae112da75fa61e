//! The Rust example controller (`examples/rust-controller.rs`, compiled here as a module) on a
//! real kube-apiserver: its Widget CRD applied, one widget whose credentials secret is missing and
//! one whose secret exists. In shadow, the legacy order stops the first at `CredentialsCheck` and
//! never renders its config map; the phased candidate renders it as a dry run, which succeeds and
//! persists nothing. The second renders its config map for real.

use crate::common;

#[allow(dead_code)] // the example's `main` is not called here
#[path = "../../examples/rust-controller.rs"]
mod example;

use std::sync::Arc;
use std::time::Duration;

use common::apiserver::ControlPlane;
use common::wait::wait_until_async;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use kube::api::{Api, PostParams};
use shadow_reconciler::engine::MemorySink;

fn widget(name: &str, secret: &str) -> example::Widget {
    example::Widget::new(
        name,
        example::WidgetSpec {
            credentials_secret: secret.to_owned(),
            greeting: format!("hello from {name}"),
        },
    )
}

/// The Widget CRD, served; the secret `creds`; the widgets `broken` (its secret is missing) and
/// `fine`, in `default`.
async fn create_widgets(client: &kube::Client) -> Api<example::Widget> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &example::Widget::crd())
        .await
        .expect("create the Widget CRD");
    let widgets: Api<example::Widget> = Api::namespaced(client.clone(), "default");
    // The CRD is served once it is established: a bound for a broken server only.
    let served = wait_until_async(
        "the Widget CRD served",
        Duration::from_mins(1),
        Duration::from_millis(100),
        async || {
            widgets
                .list(&kube::api::ListParams::default())
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        },
    )
    .await;
    assert!(
        served.is_ok(),
        "the Widget CRD was never served: {served:?}"
    );
    let mut secret = Secret::default();
    secret.metadata.name = Some("creds".into());
    Api::<Secret>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &secret)
        .await
        .expect("create the secret");
    for w in [widget("broken", "absent"), widget("fine", "creds")] {
        widgets
            .create(&PostParams::default(), &w)
            .await
            .expect("create a widget");
    }

    widgets
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rust_example_runs_in_shadow_on_a_real_cluster() {
    let plane = ControlPlane::start();
    let client = plane.client("rust-example-test").await;
    let widgets = create_widgets(&client).await;

    let sink = MemorySink::new();
    let engine = example::engine(client.clone())
        .expect("the example's engine")
        .with_sink(Arc::new(sink.clone()));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let controller = tokio::spawn(shadow_reconciler::engine::controller::run(
        Arc::new(engine),
        Api::<example::Widget>::all(client.clone()),
        async {
            let _ = stopped.await;
        },
        || {},
    ));
    // Both widgets reconciled once: a bound for a broken run only (the assertions below say
    // what is missing).
    let mut records = Vec::new();
    let _ = wait_until_async(
        "both widgets reconciled",
        Duration::from_mins(1),
        Duration::from_millis(100),
        async || {
            records = sink.records();
            let names: std::collections::BTreeSet<&str> =
                records.iter().map(|r| r.object.name.as_str()).collect();
            if names.contains("broken") && names.contains("fine") {
                Ok(())
            } else {
                Err(format!("reconciled: {names:?}"))
            }
        },
    )
    .await;
    let _ = stop.send(());
    controller.await.expect("the controller stops");

    let broken = records
        .iter()
        .find(|r| r.object.name == "broken")
        .unwrap_or_else(|| panic!("no reconcile of the broken widget: {records:?}"));
    assert_eq!(
        broken.control_first_failure.as_deref(),
        Some("CredentialsCheck"),
        "{broken:?}"
    );
    assert!(
        broken.unblocked.iter().any(|o| o == "RenderConfigMap"),
        "the phased order runs RenderConfigMap: {broken:?}"
    );
    let render = broken
        .candidate
        .iter()
        .find(|s| s.operation == "RenderConfigMap")
        .expect("the candidate's RenderConfigMap step");
    assert_eq!(render.outcome, "succeeded", "{render:?}");
    assert_eq!(
        render.execution,
        shadow_reconciler::vocab::Execution::DryRun,
        "{render:?}"
    );
    assert_eq!(broken.guard_refusals, 0, "{broken:?}");
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    assert!(
        maps.get_opt("broken-config").await.unwrap().is_none(),
        "the shadow's dry run persisted a config map"
    );

    let fine = records
        .iter()
        .find(|r| r.object.name == "fine")
        .expect("a reconcile of the fine widget");
    assert_eq!(fine.control_first_failure, None, "{fine:?}");
    let map = maps
        .get("fine-config")
        .await
        .expect("the control rendered the fine widget's config map");
    assert_eq!(
        map.data
            .unwrap_or_default()
            .get("greeting")
            .map(String::as_str),
        Some("hello from fine")
    );
    // The engine wrote HyperShift's condition on the broken widget.
    let status = widgets
        .get("broken")
        .await
        .unwrap()
        .status
        .unwrap_or_default();
    let condition = status
        .conditions
        .iter()
        .find(|c| c["type"] == "ReconciliationSucceeded")
        .unwrap_or_else(|| panic!("no condition on {}", "broken"));
    assert_eq!(condition["status"], "False", "{condition}");
}
