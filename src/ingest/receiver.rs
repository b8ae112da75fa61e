//! The OTLP trace receivers: gRPC (`TraceService/Export`) and HTTP/protobuf (`POST /v1/traces`),
//! both feeding one [`Ingest`]. Malformed or oversized requests get HTTP 400 with a `Status`
//! body, or gRPC `InvalidArgument`; spans that cannot be used are reported as a partial success.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTracePartialSuccess, ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use prost::Message;

use super::metrics::{IngestMetrics, RequestResult};
use super::reconstruct::Assembler;
use crate::engine::Sink;

/// The default limit of a request, compressed or not.
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 8 * 1024 * 1024;

/// Errors of starting a receiver.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The address could not be bound.
    #[error("cannot listen on {addr}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// The ingest: an assembler shared by the receivers, and the sinks its records go to.
pub struct Ingest {
    assembler: Mutex<Assembler>,
    sinks: Vec<Arc<dyn Sink>>,
    metrics: Option<IngestMetrics>,
    max_request_bytes: usize,
}

impl std::fmt::Debug for Ingest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ingest")
            .field("max_request_bytes", &self.max_request_bytes)
            .finish_non_exhaustive()
    }
}

/// google.rpc.Status, the body of an OTLP/HTTP error response.
#[derive(Clone, PartialEq, Message)]
struct RpcStatus {
    #[prost(int32, tag = "1")]
    code: i32,
    #[prost(string, tag = "2")]
    message: String,
}

/// gRPC's `INVALID_ARGUMENT`, also the code of an OTLP/HTTP 400's `Status`.
const INVALID_ARGUMENT: i32 = 3;

impl Ingest {
    /// An ingest over `assembler`, recording into `sinks`.
    #[must_use]
    pub fn new(
        assembler: Assembler,
        sinks: Vec<Arc<dyn Sink>>,
        metrics: Option<IngestMetrics>,
        max_request_bytes: usize,
    ) -> Self {
        Self {
            assembler: Mutex::new(assembler),
            sinks,
            metrics,
            max_request_bytes,
        }
    }

    /// Processes one decoded request: reconstructs what it completes, records it, and answers
    /// with the partial success when spans were rejected.
    pub fn export(&self, request: &ExportTraceServiceRequest) -> ExportTraceServiceResponse {
        let (batch, buffered) = {
            let mut assembler = self
                .assembler
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let batch = assembler.ingest(request, Instant::now());
            (batch, assembler.buffered())
        };
        for record in &batch.records {
            for sink in &self.sinks {
                sink.record(record);
            }
        }
        if let Some(m) = &self.metrics {
            m.spans(&batch.counts, buffered);
        }
        let rejected = batch.counts.rejected;
        ExportTraceServiceResponse {
            partial_success: (rejected > 0).then(|| ExportTracePartialSuccess {
                rejected_spans: i64::try_from(rejected).unwrap_or(i64::MAX),
                error_message: batch.reasons.join("; "),
            }),
        }
    }

    fn count(&self, transport: &str, result: RequestResult) {
        if let Some(m) = &self.metrics {
            m.request(transport, result);
        }
    }

    /// Decodes an OTLP/HTTP body (protobuf, optionally gzip) and processes it.
    fn export_http(&self, headers: &HeaderMap, body: &[u8]) -> Response {
        let content_type = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        if !content_type.starts_with("application/x-protobuf") {
            self.count("http", RequestResult::Unsupported);
            return (
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                format!(
                    "content type {content_type:?} is not supported; send application/x-protobuf\n"
                ),
            )
                .into_response();
        }
        let encoding = headers
            .get(header::CONTENT_ENCODING)
            .and_then(|v| v.to_str().ok());
        if !matches!(encoding, None | Some("identity" | "gzip")) {
            self.count("http", RequestResult::Unsupported);
            return (
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                format!(
                    "content encoding {:?} is not supported; use gzip or none\n",
                    encoding.unwrap_or_default()
                ),
            )
                .into_response();
        }
        match decode(encoding, body, self.max_request_bytes) {
            Ok(request) => {
                self.count("http", RequestResult::Ok);
                let response = self.export(&request);
                (
                    [(header::CONTENT_TYPE, "application/x-protobuf")],
                    response.encode_to_vec(),
                )
                    .into_response()
            }
            Err(message) => self.invalid_http(&message),
        }
    }

    fn invalid_http(&self, message: &str) -> Response {
        self.count("http", RequestResult::Invalid);
        let status = RpcStatus {
            code: INVALID_ARGUMENT,
            message: message.to_owned(),
        };
        (
            StatusCode::BAD_REQUEST,
            [(header::CONTENT_TYPE, "application/x-protobuf")],
            status.encode_to_vec(),
        )
            .into_response()
    }
}

/// An OTLP/HTTP protobuf body, `gzip`-encoded or not, decoded; the error says why not.
pub fn decode(
    content_encoding: Option<&str>,
    body: &[u8],
    limit: usize,
) -> Result<ExportTraceServiceRequest, String> {
    let inflated;
    let body = if content_encoding == Some("gzip") {
        inflated = gunzip(body, limit)?;
        inflated.as_slice()
    } else {
        body
    };
    ExportTraceServiceRequest::decode(body)
        .map_err(|error| format!("the body is not an ExportTraceServiceRequest: {error}"))
}

/// Inflates a gzip body, refusing more than `limit` bytes out.
fn gunzip(body: &[u8], limit: usize) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let mut out = Vec::new();
    let read = flate2::read::GzDecoder::new(body)
        .take(limit as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| format!("the gzip body cannot be inflated: {e}"))?;
    if read > limit {
        return Err(format!(
            "the inflated body is over the limit of {limit} bytes"
        ));
    }
    Ok(out)
}

async fn http_traces(
    State(ingest): State<Arc<Ingest>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let limit = ingest.max_request_bytes;
    let Ok(bytes): Result<Bytes, _> = axum::body::to_bytes(body, limit).await else {
        return ingest.invalid_http(&format!(
            "the body is over the limit of {limit} bytes (or was cut off)"
        ));
    };
    let ingest = ingest.clone();
    // Decoding and reconstruction are CPU work: off the async workers.
    tokio::task::spawn_blocking(move || ingest.export_http(&headers, &bytes))
        .await
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// A listener on `addr` and the address it got (port 0 picks one).
async fn bind(addr: SocketAddr) -> Result<(tokio::net::TcpListener, SocketAddr), Error> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| Error::Bind { addr, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| Error::Bind { addr, source })?;
    Ok((listener, bound))
}

/// The HTTP receiver's routes (`POST /v1/traces`).
pub fn http_router(ingest: Arc<Ingest>) -> axum::Router {
    axum::Router::new()
        .route("/v1/traces", axum::routing::post(http_traces))
        .layer(axum::extract::DefaultBodyLimit::disable())
        .with_state(ingest)
}

/// Serves OTLP/HTTP on `addr` until `shutdown` resolves; returns the bound address at once.
pub async fn serve_http(
    addr: SocketAddr,
    ingest: Arc<Ingest>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(SocketAddr, tokio::task::JoinHandle<()>), Error> {
    let (listener, bound) = bind(addr).await?;
    let listener = axum::serve::ListenerExt::tap_io(listener, |stream| no_delay(stream));
    let task = tokio::spawn(async move {
        if let Err(error) = axum::serve(listener, http_router(ingest))
            .with_graceful_shutdown(shutdown)
            .await
        {
            tracing::error!(%error, "the OTLP/HTTP receiver failed");
        }
    });
    Ok((bound, task))
}

/// The gRPC service.
#[derive(Clone, Debug)]
pub struct Grpc(Arc<Ingest>);

#[tonic::async_trait]
impl TraceService for Grpc {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.0.count("grpc", RequestResult::Ok);
        let ingest = self.0.clone();
        let request = request.into_inner();
        let response = tokio::task::spawn_blocking(move || ingest.export(&request))
            .await
            .map_err(|e| tonic::Status::unavailable(format!("the export failed: {e}")))?;
        Ok(tonic::Response::new(response))
    }
}

/// OTLP's answer to a request the server cannot take: tonic refuses an undecodable message with
/// `INTERNAL` (13), one over the size limit with `OUT_OF_RANGE` (11), and a gzip message that
/// inflates past the limit with `RESOURCE_EXHAUSTED` (8), before the service runs (the length
/// prefix is checked before anything is buffered); OTLP asks for `INVALID_ARGUMENT` (3), which
/// clients do not retry (they would retry `RESOURCE_EXHAUSTED`, in vain). The service itself
/// never answers 8, 11 or 13. Each such request is counted `invalid`.
fn invalid_argument<B>(ingest: &Ingest, mut response: http::Response<B>) -> http::Response<B> {
    let status = response.headers().get("grpc-status");
    if status.is_some_and(|s| s == "13" || s == "11" || s == "8") {
        ingest.count("grpc", RequestResult::Invalid);
        response
            .headers_mut()
            .insert("grpc-status", http::HeaderValue::from_static("3"));
    }
    response
}

/// Serves OTLP/gRPC on `addr` until `shutdown` resolves; returns the bound address at once.
/// Undecodable and oversized requests get `INVALID_ARGUMENT`.
pub async fn serve_grpc(
    addr: SocketAddr,
    ingest: Arc<Ingest>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(SocketAddr, tokio::task::JoinHandle<()>), Error> {
    let (listener, bound) = bind(addr).await?;
    let limit = ingest.max_request_bytes;
    let counted = ingest.clone();
    let service = TraceServiceServer::new(Grpc(ingest))
        .max_decoding_message_size(limit)
        .accept_compressed(tonic::codec::CompressionEncoding::Gzip);
    let incoming = tokio_stream_listener(listener);
    let task = tokio::spawn(async move {
        if let Err(error) = tonic::transport::Server::builder()
            .layer(tower::util::MapResponseLayer::new(move |response| {
                invalid_argument(&counted, response)
            }))
            .add_service(service)
            .serve_with_incoming_shutdown(incoming, shutdown)
            .await
        {
            tracing::error!(%error, "the OTLP/gRPC receiver failed");
        }
    });
    Ok((bound, task))
}

/// The accepted connections of `listener`, as tonic's server takes them, with `TCP_NODELAY`
/// (what tonic's own `serve` sets, and skips for connections handed to it): HTTP/2 writes a
/// response, its trailers and the flow-control window updates as separate small frames, and
/// with Nagle's algorithm each waits for the client's delayed acknowledgement (40 ms on Linux),
/// so a few connections leave the receiver idle between requests.
fn tokio_stream_listener(
    listener: tokio::net::TcpListener,
) -> impl futures_util::Stream<Item = std::io::Result<tokio::net::TcpStream>> {
    futures_util::stream::unfold(listener, |listener| async move {
        let accepted = listener.accept().await.map(|(stream, _)| {
            no_delay(&stream);
            stream
        });
        Some((accepted, listener))
    })
}

/// `TCP_NODELAY` on an accepted connection; a socket that refuses it still serves.
fn no_delay(stream: &tokio::net::TcpStream) {
    if let Err(error) = stream.set_nodelay(true) {
        tracing::debug!(%error, "cannot set TCP_NODELAY on an OTLP connection");
    }
}
