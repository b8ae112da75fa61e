//! A real control plane on loopback for trying things by hand: etcd and kube-apiserver as the
//! tests start them (TLS, RBAC, an admin token, an audit log of every write), until Ctrl-C.
//!
//! ```sh
//! cargo run --example control-plane
//! # then, in another shell, the printed `export KUBECONFIG=...`
//! kubectl apply -k deploy/crds
//! ```
//!
//! See docs/testing.md.

#[path = "../tests/common/apiserver.rs"]
mod apiserver;
#[path = "../tests/common/wait.rs"]
mod wait;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let plane = apiserver::ControlPlane::start();
    println!(
        "kube-apiserver {} at {}",
        apiserver::KUBE_VERSION,
        plane.url()
    );
    println!("export KUBECONFIG={}", plane.kubeconfig().display());
    println!(
        "audit log (every write, JSON lines): {}",
        plane.dir().join("audit.log").display()
    );
    println!("logs and certificates: {}", plane.dir().display());
    println!("Ctrl-C stops both and removes the directory.");
    tokio::signal::ctrl_c().await.expect("wait for Ctrl-C");
    drop(plane);
}
