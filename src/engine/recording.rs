//! The control's recording client: the real client, plus a log of the writes the API server
//! accepted, for the operations whose legacy and phased code differ (their writes are compared
//! with the candidate's). Requests pass unchanged; nothing else is kept.

use std::task::{Context, Poll};

use futures_util::future::BoxFuture;
use http::{Method, Request, Response};
use kube::client::Body;

use super::writes::WriteLog;

/// A client over `real` whose accepted writes go to the returned log.
#[must_use]
pub fn recording(real: &kube::Client) -> (kube::Client, WriteLog) {
    let writes = WriteLog::new();
    let service = Recording {
        inner: real.clone(),
        writes: writes.clone(),
    };
    (
        kube::Client::new(service, real.default_namespace().to_owned()),
        writes,
    )
}

#[derive(Clone)]
struct Recording {
    inner: kube::Client,
    writes: WriteLog,
}

impl tower::Service<Request<Body>> for Recording {
    type Response = Response<Body>;
    type Error = tower::BoxError;
    type Future = BoxFuture<'static, Result<Response<Body>, tower::BoxError>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            let method = request.method().clone();
            let mutating = matches!(
                method,
                Method::POST | Method::PUT | Method::PATCH | Method::DELETE
            );
            let path = request.uri().path().to_owned();
            let (request, sent) = if mutating {
                let (request, sent) = super::allocated::keep_body(request).await?;
                (request, Some(sent))
            } else {
                (request, None)
            };
            let response = this.inner.send(request).await?;
            if !mutating || !response.status().is_success() {
                return Ok(response);
            }
            let (parts, body) = response.into_parts();
            let bytes = body.collect_bytes().await?.to_vec();
            this.writes.accepted(&method, &path, sent, &bytes);
            Ok(Response::from_parts(parts, Body::from(bytes)))
        })
    }
}
