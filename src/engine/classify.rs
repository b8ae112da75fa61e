//! kube-rs errors into the bounded error classes, by an exhaustive match: a new kube error
//! variant breaks the build until it is classified.

use crate::vocab::ErrorClass;

/// The class of a Kubernetes API status code (and reason, which tells 409s apart).
#[must_use]
pub fn class_of_status(code: u16, reason: &str) -> ErrorClass {
    match code {
        409 if reason == "AlreadyExists" => ErrorClass::AlreadyExists,
        // 410: the resourceVersion asked for is gone; the caller's view is stale, as with 409.
        409 | 410 => ErrorClass::Conflict,
        404 => ErrorClass::NotFound,
        401 | 403 => ErrorClass::Forbidden,
        429 => ErrorClass::Throttled,
        408 | 504 => ErrorClass::Timeout,
        500..=599 if reason == "Timeout" => ErrorClass::Timeout,
        500..=599 => ErrorClass::Server,
        _ => ErrorClass::Invalid,
    }
}

/// Whether any error in the chain is a timeout.
fn timed_out(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut current = Some(error);
    while let Some(e) = current {
        if e.is::<tokio::time::error::Elapsed>()
            || e.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut)
            || e.to_string().contains("timed out")
        {
            return true;
        }
        current = e.source();
    }
    false
}

/// The class of a kube-rs error.
#[must_use]
pub fn classify(error: &kube::Error) -> ErrorClass {
    use kube::Error as E;
    match error {
        E::Api(status) => class_of_status(status.code, &status.reason),
        E::HyperError(e) if e.is_timeout() => ErrorClass::Timeout,
        E::Service(e) if timed_out(e.as_ref()) => ErrorClass::Timeout,
        E::HyperError(_)
        | E::Service(_)
        | E::ReadEvents(_)
        | E::LinesCodecMaxLineLengthExceeded
        | E::ProxyProtocolUnsupported { .. }
        | E::ProxyProtocolDisabled { .. }
        | E::RustlsTls(_)
        | E::TlsRequired => ErrorClass::Transport,
        E::Auth(_) => ErrorClass::Forbidden,
        E::HttpError(_)
        | E::FromUtf8(_)
        | E::SerdeError(_)
        | E::BuildRequest(_)
        | E::InferConfig(_)
        | E::InferKubeconfig(_)
        | E::Discovery(_) => ErrorClass::Internal,
    }
}

/// Whether the error is a 409 Conflict (not AlreadyExists).
#[must_use]
pub fn is_conflict(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(s) if s.code == 409 && s.reason != "AlreadyExists")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16, reason: &str) -> kube::Error {
        kube::Error::Api(Box::new(
            kube::core::Status::failure("m", reason).with_code(code),
        ))
    }

    #[test]
    fn status_codes() {
        let cases = [
            (409, "AlreadyExists", ErrorClass::AlreadyExists),
            (409, "Conflict", ErrorClass::Conflict),
            (404, "NotFound", ErrorClass::NotFound),
            (403, "Forbidden", ErrorClass::Forbidden),
            (422, "Invalid", ErrorClass::Invalid),
            (400, "BadRequest", ErrorClass::Invalid),
            (429, "TooManyRequests", ErrorClass::Throttled),
            (500, "InternalError", ErrorClass::Server),
            (503, "ServiceUnavailable", ErrorClass::Server),
            (504, "Timeout", ErrorClass::Timeout),
        ];
        for (code, reason, class) in cases {
            assert_eq!(classify(&api(code, reason)), class, "{code} {reason}");
        }
        assert!(is_conflict(&api(409, "Conflict")));
        assert!(!is_conflict(&api(409, "AlreadyExists")));
    }

    #[test]
    fn transport_and_timeouts() {
        let reset = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset");
        assert_eq!(
            classify(&kube::Error::Service(Box::new(reset))),
            ErrorClass::Transport
        );
        let slow = std::io::Error::new(std::io::ErrorKind::TimedOut, "slow");
        assert_eq!(
            classify(&kube::Error::Service(Box::new(slow))),
            ErrorClass::Timeout
        );
        let bad = serde_json::from_str::<u8>("x").unwrap_err();
        assert_eq!(
            classify(&kube::Error::SerdeError(bad)),
            ErrorClass::Internal
        );
    }
}
