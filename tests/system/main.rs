//! The system harness: every integration test module of tests/system/ in one binary (docs/testing.md).

#[path = "../common/mod.rs"]
mod common;

mod analyze_ground_truth;
mod collector;
mod conformance;
mod control_plane;
mod crash;
mod dashboards;
mod deploy;
mod docs_go;
mod e2e_candidate_code;
mod e2e_engine;
mod e2e_run;
mod exporters;
mod go_controller;
mod go_replicas;
mod go_rollout;
mod image;
mod ingest_otlp;
mod node_deploy;
mod node_handover;
mod node_rollout;
mod object_store;
mod ocm_controller;
mod parquet_process;
mod quickstart;
mod report_browser;
mod rust_example;
mod telemetry;
