//! The dry-run client against the simulator: nothing persists, reads see the run's own
//! would-be writes, and the guard refuses what would escape.

use crate::common;

use common::{api_error, start_sim};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use shadow_reconciler::engine::dryrun::{DryRunClient, USER_AGENT};
use shadow_reconciler::sim::SimConfig;

fn cm(name: &str, value: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        data: Some([("k".to_owned(), value.to_owned())].into()),
        ..ConfigMap::default()
    }
}

#[tokio::test]
async fn dry_run_writes_persist_nothing_and_are_read_back_in_the_same_run() {
    let (sim, client) = start_sim(SimConfig::default()).await;
    let real: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    real.create(&PostParams::default(), &cm("existing", "1"))
        .await
        .unwrap();
    let dry = DryRunClient::new(client);
    let shadow: Api<ConfigMap> = Api::namespaced(dry.for_reconcile(), "default");

    // Create, then read back within the run.
    shadow
        .create(&PostParams::default(), &cm("new", "v"))
        .await
        .unwrap();
    assert_eq!(shadow.get("new").await.unwrap().data.unwrap()["k"], "v");
    assert_eq!(
        api_error(&real.get("new").await.unwrap_err()).0,
        404,
        "nothing persisted"
    );

    // Patch an existing object: the run sees its own patch, the cluster does not.
    shadow
        .patch(
            "existing",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"data": {"k": "2"}})),
        )
        .await
        .unwrap();
    assert_eq!(
        shadow.get("existing").await.unwrap().data.unwrap()["k"],
        "2"
    );
    assert_eq!(real.get("existing").await.unwrap().data.unwrap()["k"], "1");

    // Delete: later reads in the run answer 404.
    shadow
        .delete("existing", &DeleteParams::default())
        .await
        .unwrap();
    let err = shadow.get("existing").await.unwrap_err();
    assert_eq!(api_error(&err).0, 404);
    real.get("existing").await.expect("still in the cluster");

    // A fresh run starts with an empty overlay.
    let next: Api<ConfigMap> = Api::namespaced(dry.for_reconcile(), "default");
    assert_eq!(api_error(&next.get("new").await.unwrap_err()).0, 404);

    let (persisted, dry_runs) = sim.audit(|a| {
        let t = a.totals().get(USER_AGENT).cloned().unwrap_or_default();
        (t.persisted_mutations, t.dry_run_mutations)
    });
    assert_eq!(persisted, 0, "the shadow never persists");
    assert_eq!(dry_runs, 3);
    assert_eq!(dry.stats().dry_run_requests(), 3);
    assert_eq!(dry.stats().overlay_reads(), 3);
    assert_eq!(dry.stats().refused(), 0);
}

#[tokio::test]
async fn the_guard_refuses_a_mutating_request_without_dry_run() {
    let (sim, client) = start_sim(SimConfig::default()).await;
    let dry = DryRunClient::new(client);
    let unguarded: Api<ConfigMap> = Api::namespaced(dry.guard_only(), "default");
    let err = unguarded
        .create(&PostParams::default(), &cm("escape", "x"))
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("shadow guard refused POST /api/v1/namespaces/default/configmaps"),
        "{err}"
    );
    // A request that asks for dry-run itself passes the guard.
    unguarded
        .create(
            &PostParams {
                dry_run: true,
                ..PostParams::default()
            },
            &cm("fine", "x"),
        )
        .await
        .unwrap();
    assert_eq!(dry.stats().refused(), 1);
    let creates = sim.audit(|a| {
        a.records()
            .filter(|r| r.verb == "create")
            .map(|r| r.dry_run)
            .collect::<Vec<_>>()
    });
    assert_eq!(
        creates,
        [true],
        "the refused request never reached the API server"
    );
}

/// The API server reads a DELETE's options from its body when it has one and ignores the query:
/// the guard refuses a DELETE whose `DeleteOptions` body lacks `dryRun: [All]`, even when the
/// query carries `dryRun=All`, and the rewriting client puts it in the body.
#[tokio::test]
async fn a_delete_is_a_dry_run_only_when_its_body_says_so() {
    let (sim, client) = start_sim(SimConfig::default()).await;
    let real: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    real.create(&PostParams::default(), &cm("kept", "x"))
        .await
        .unwrap();
    let dry = DryRunClient::new(client);
    // kube-rs sends `DeleteParams` as the body; without dry_run it has no `dryRun`.
    let unguarded: Api<ConfigMap> = Api::namespaced(dry.guard_only(), "default");
    let err = unguarded
        .delete("kept", &DeleteParams::default())
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("its DeleteOptions body")
            && err.to_string().contains("lacks dryRun: [All]"),
        "{err}"
    );
    assert_eq!(dry.stats().refused(), 1);
    // The rewriting client: the same call is a dry run, and the object stays.
    let rewriting: Api<ConfigMap> = Api::namespaced(dry.for_reconcile(), "default");
    rewriting
        .delete("kept", &DeleteParams::default())
        .await
        .unwrap();
    real.get("kept")
        .await
        .expect("the dry-run delete left the object");
    let deletes: Vec<bool> = sim.audit(|a| {
        a.records()
            .filter(|r| r.verb == "delete")
            .map(|r| r.dry_run)
            .collect()
    });
    assert_eq!(
        deletes,
        [true],
        "only the rewritten delete reached the server"
    );
}
