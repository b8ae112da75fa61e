//! A cluster for the command's tests against `sim serve`: the simulator serving a kubeconfig,
//! HostedClusters whose control fails at its first step, and waiting for a reconcile's condition.
//! `cli.rs` and `election.rs` use them.

use std::path::Path;
use std::process::Command;

/// `sim serve` writing its kubeconfig to `kubeconfig`: the process, its stdout (kept open, so it
/// can print its summary) and its first line.
pub(crate) fn sim_serve(
    kubeconfig: &Path,
) -> (
    std::process::Child,
    std::io::BufReader<std::process::ChildStdout>,
    String,
) {
    use std::io::BufRead;
    let mut child = Command::new(env!("CARGO_BIN_EXE_shadow-reconciler"))
        .args([
            "sim",
            "serve",
            "--kubeconfig-out",
            kubeconfig.to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    assert!(
        first.starts_with("serving the Kubernetes API simulator at http://127.0.0.1:"),
        "{first}"
    );
    (child, stdout, first)
}

/// CRDs and one HostedCluster whose pull secret is missing (the control fails at its first step),
/// created through the kubeconfig the simulator wrote.
pub(crate) async fn cluster_with_a_failing_hosted_cluster(
    kubeconfig: &std::path::Path,
) -> kube::Client {
    use kube::CustomResourceExt;
    use shadow_reconciler::reconcilers::hostedcluster::{HostedCluster, HostedControlPlane};
    let config = kube::config::Kubeconfig::read_from(kubeconfig).unwrap();
    let config =
        kube::Config::from_custom_kubeconfig(config, &kube::config::KubeConfigOptions::default())
            .await
            .unwrap();
    let client = kube::Client::try_from(config).unwrap();
    let crds: kube::Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> = kube::Api::all(client.clone());
    for crd in [HostedCluster::crd(), HostedControlPlane::crd()] {
        crds.create(&kube::api::PostParams::default(), &crd)
            .await
            .unwrap();
    }
    failing_hosted_cluster(&client, "default", "beta").await;
    client
}

/// A HostedCluster whose pull secret is missing (the control fails at its first step), in
/// `namespace` (created if need be).
pub(crate) async fn failing_hosted_cluster(client: &kube::Client, namespace: &str, name: &str) {
    use k8s_openapi::api::core::v1::Namespace;
    use shadow_reconciler::reconcilers::hostedcluster::{
        HostedCluster, HostedClusterSpec, LocalRef, Release,
    };
    let namespaces = kube::Api::<Namespace>::all(client.clone());
    if namespaces.get_opt(namespace).await.unwrap().is_none() {
        let mut ns = Namespace::default();
        ns.metadata.name = Some(namespace.to_owned());
        namespaces
            .create(&kube::api::PostParams::default(), &ns)
            .await
            .unwrap();
    }
    let spec = HostedClusterSpec {
        release: Release {
            image: "quay.io/ocp-release:4.17.3-x86_64".into(),
        },
        platform: "AWS".into(),
        pull_secret: LocalRef {
            name: "absent".into(),
        },
        ..HostedClusterSpec::default()
    };
    kube::Api::<HostedCluster>::namespaced(client.clone(), namespace)
        .create(
            &kube::api::PostParams::default(),
            &HostedCluster::new(name, spec),
        )
        .await
        .unwrap();
}

/// Whether the controller wrote its condition on `namespace/name`, waiting up to 5 minutes (a
/// bound for a broken run only, however loaded the machine: the condition comes within one
/// reconcile).
pub(crate) async fn reconciled(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    wait: bool,
) -> bool {
    use shadow_reconciler::reconcilers::hostedcluster::HostedCluster;
    use std::time::Duration;
    let api = kube::Api::<HostedCluster>::namespaced(client.clone(), namespace);
    // Without waiting: one look.
    let timeout = if wait {
        Duration::from_mins(5)
    } else {
        Duration::ZERO
    };
    let what = format!("the condition on {namespace}/{name}");
    crate::common::wait::wait_until_async(&what, timeout, Duration::from_millis(100), async || {
        let hc = api.get(name).await.unwrap();
        if hc.status.is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c["type"] == "ReconciliationSucceeded")
        }) {
            Ok(())
        } else {
            Err("no ReconciliationSucceeded condition".to_owned())
        }
    })
    .await
    .is_ok()
}
