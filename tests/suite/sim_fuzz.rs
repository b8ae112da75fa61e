//! Fuzzing the simulator's HTTP surface with proptest: random methods, paths, query strings,
//! content types and bodies over a raw connection. The simulator never panics or hangs; every
//! answer is an HTTP response with a status line, and every error the API answers is a Kubernetes
//! `Status` (JSON with `kind: Status` and the same code), as a real server's; the simulator
//! still answers a plain request afterwards.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use proptest::prelude::*;
use shadow_reconciler::sim::{SimConfig, Simulator};

fn exchange(addr: SocketAddr, request: &[u8]) -> String {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    stream.write_all(request).expect("send");
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).into_owned()
}

fn method() -> impl Strategy<Value = &'static str> {
    prop_oneof![
        Just("GET"),
        Just("POST"),
        Just("PUT"),
        Just("PATCH"),
        Just("DELETE"),
        Just("OPTIONS")
    ]
}

fn path() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("/api/v1/namespaces/default/configmaps".to_owned()),
        Just("/api/v1/namespaces/default/configmaps/a".to_owned()),
        Just("/api/v1/namespaces/default/configmaps/a/status".to_owned()),
        Just("/apis/apps/v1/namespaces/default/deployments".to_owned()),
        Just("/api/v1/namespaces".to_owned()),
        Just("/apis".to_owned()),
        "/[a-z0-9/._%-]{0,60}",
    ]
}

fn query() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("?watch=1&timeoutSeconds=1".to_owned()),
        Just("?dryRun=All".to_owned()),
        Just("?dryRun=Some".to_owned()),
        Just("?labelSelector=a%3D%3D%3Db".to_owned()),
        Just("?fieldSelector=metadata.name%3Da&limit=-1".to_owned()),
        Just("?resourceVersion=abc&resourceVersionMatch=Exact".to_owned()),
        Just("?continue=%ff%fe&limit=2".to_owned()),
        "\\?[a-zA-Z=&%0-9]{0,40}",
    ]
}

fn content_type() -> impl Strategy<Value = &'static str> {
    prop_oneof![
        Just("application/json"),
        Just("application/merge-patch+json"),
        Just("application/json-patch+json"),
        Just("application/strategic-merge-patch+json"),
        Just("application/apply-patch+yaml"),
        Just("application/vnd.kubernetes.protobuf"),
        Just("text/plain"),
    ]
}

fn body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(Vec::new()),
        Just(br#"{"metadata":{"name":"a"},"data":{"k":"v"}}"#.to_vec()),
        Just(br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}"#.to_vec()),
        Just(br#"[{"op":"replace","path":"/data/k","value":1}]"#.to_vec()),
        Just(br#"{"dryRun":"All"}"#.to_vec()),
        Just(b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n".to_vec()),
        proptest::collection::vec(any::<u8>(), 0..300),
        "[ -~]{0,200}".prop_map(String::into_bytes),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn random_requests_get_an_answer_and_errors_are_statuses(
        method in method(),
        path in path(),
        query in query(),
        content_type in content_type(),
        body in body(),
    ) {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let sim = runtime
            .block_on(Simulator::start(SimConfig::default()))
            .expect("the simulator starts");
        let addr: SocketAddr = sim.url().trim_start_matches("http://").parse().expect("address");
        let mut request = format!(
            "{method} {path}{query} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        )
        .into_bytes();
        request.extend_from_slice(&body);
        let answer = exchange(addr, &request);
        prop_assert!(answer.starts_with("HTTP/1.1 "), "no status line: {answer:?}");
        let code: u16 = answer[9..12].parse().unwrap_or(0);
        prop_assert!((100..600).contains(&code), "{answer:?}");
        let (head, payload) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
        if code >= 400 && head.to_ascii_lowercase().contains("application/json") {
            let status: serde_json::Value = serde_json::from_str(payload.trim())
                .unwrap_or_else(|e| panic!("an error that is not JSON ({e}): {answer:?}"));
            prop_assert_eq!(&status["kind"], "Status", "{}", answer);
            prop_assert_eq!(status["code"].as_u64(), Some(u64::from(code)), "{}", answer);
        }
        // Still serving.
        let again = exchange(addr, format!("GET /api/v1/namespaces HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes());
        prop_assert!(again.starts_with("HTTP/1.1 200"), "{again:?}");
        runtime.block_on(async move {
            let mut sim = sim;
            sim.shutdown().await
        }).expect("the simulator stops");
    }
}

/// Found by the fuzz above: a continue token with a multi-byte character made the simulator
/// panic cutting it into hex pairs. It is a 400 `Status` now.
#[test]
fn a_continue_token_with_a_multi_byte_character_is_a_400() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let sim = runtime
        .block_on(Simulator::start(SimConfig::default()))
        .expect("the simulator starts");
    let addr: SocketAddr = sim
        .url()
        .trim_start_matches("http://")
        .parse()
        .expect("address");
    for token in ["%ff%fe", "%C3%A9%C3%A9", "zz"] {
        let answer = exchange(
            addr,
            format!(
                "GET /api/v1/namespaces/default/configmaps?limit=2&continue={token} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
            )
            .as_bytes(),
        );
        assert!(answer.starts_with("HTTP/1.1 400"), "{token}: {answer:?}");
        assert!(
            answer.contains("\"kind\":\"Status\"") || answer.contains("\"kind\": \"Status\""),
            "{answer:?}"
        );
    }
    runtime
        .block_on(async move {
            let mut sim = sim;
            sim.shutdown().await
        })
        .expect("the simulator stops");
}
