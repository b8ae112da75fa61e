//! Serving an axum router on a bound listener until told to stop.

use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// Serves `app` on `listener` in a task; sending on (or dropping) the returned sender stops it
/// gracefully, and the task ends with the server's result.
pub(crate) fn spawn(
    listener: TcpListener,
    app: axum::Router,
) -> (oneshot::Sender<()>, JoinHandle<std::io::Result<()>>) {
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = stopped.await;
            })
            .await
    });
    (stop, task)
}
