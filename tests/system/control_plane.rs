//! The real control plane the e2e tests run on starts, answers as the version it is held to,
//! enforces RBAC, audits writes, and leaves no process behind.

use crate::common;

use common::apiserver::{ADMIN_USER_AGENT, ControlPlane, KUBE_VERSION};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};

fn processes_under(dir: &std::path::Path) -> Vec<String> {
    let needle = dir.display().to_string();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if cmdline.contains(&needle) && !cmdline.contains("processes_under") {
                found.push(cmdline);
            }
        }
    }
    found
}

/// Waits until no process runs with `dir` in its command line. The servers have exited when
/// the control plane is dropped; their guards' watchers, signalled as the guards exit, are gone
/// a moment later. A bound for a leak only.
fn none_left_under(dir: &std::path::Path) {
    let mut left = Vec::new();
    let gone = common::wait::wait_until(
        "no process left under the control plane's directory",
        std::time::Duration::from_secs(30),
        std::time::Duration::from_millis(100),
        || {
            left = processes_under(dir);
            if left.is_empty() {
                Ok(())
            } else {
                Err(String::new())
            }
        },
    );
    assert!(gone.is_ok(), "processes left behind: {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn starts_audits_enforces_rbac_and_stops() {
    let plane = ControlPlane::start();
    let dir = plane.dir().to_path_buf();
    let version = plane.kubectl(&["version", "-o", "json"]);
    assert!(version.contains(KUBE_VERSION), "{version}");

    // The admin writes; the audit records it with the user agent and the dry run.
    let client = plane.client(ADMIN_USER_AGENT).await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("smoke".into());
    api.create(&PostParams::default(), &cm)
        .await
        .expect("create");
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    cm.metadata.name = Some("smoke-dry".into());
    api.create(&dry, &cm).await.expect("dry-run create");
    let audit = plane.audit();
    let ours: Vec<_> = audit
        .iter()
        .filter(|e| e.user_agent == ADMIN_USER_AGENT)
        .collect();
    assert_eq!(ours.len(), 2, "{ours:?}");
    assert!(ours[0].succeeded() && !ours[0].dry_run() && ours[0].user == "admin");
    assert!(ours[1].succeeded() && ours[1].dry_run(), "{:?}", ours[1]);

    // An identity without a binding is refused by RBAC.
    plane.kubectl(&["create", "serviceaccount", "nobody", "-n", "default"]);
    let token = plane.service_account_token("default", "nobody");
    let nobody = plane.client_with_token(&token, "nobody").await;
    let err = Api::<ConfigMap>::namespaced(nobody, "default")
        .get("smoke")
        .await
        .expect_err("RBAC refuses an unbound service account");
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 403),
        "{err}"
    );

    assert!(
        !processes_under(&dir).is_empty(),
        "etcd and kube-apiserver run"
    );
    drop(plane);
    none_left_under(&dir);
}

/// A test that panics while the control plane runs leaves no process behind either: the
/// harness stops both servers while the panic unwinds.
#[test]
fn a_panicking_test_leaves_no_process_behind() {
    let dir = std::sync::Mutex::new(None);
    let outcome = std::panic::catch_unwind(|| {
        let plane = ControlPlane::start();
        *dir.lock().unwrap() = Some(plane.dir().to_path_buf());
        assert!(!processes_under(plane.dir()).is_empty(), "the servers run");
        panic!("a failing test");
    });
    assert!(outcome.is_err(), "the closure panicked");
    let dir = dir
        .lock()
        .unwrap()
        .clone()
        .expect("the control plane started");
    none_left_under(&dir);
}
