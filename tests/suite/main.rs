//! The suite harness: every integration test module of tests/suite/ in one binary (docs/testing.md).

#[path = "../common/mod.rs"]
mod common;

mod analyze_cli;
mod analyze_synthetic;
mod calibration;
mod cli;
mod conflict_vectors;
mod dataset_lock;
mod dry_run_client;
mod engine_addon;
mod engine_cancel;
mod engine_candidate_code;
mod engine_hostedcluster;
mod engine_legacy_loop;
mod error_messages;
mod flag;
mod flag_fuzz;
mod flag_names;
mod ingest;
mod ingest_fuzz;
mod layers;
mod manifests;
mod one_truth;
mod parquet_fuzz;
mod parquet_sink;
mod plan_hash;
mod plan_mutations;
mod plan_validation;
mod properties;
mod readme_paths;
mod report;
mod settings_carrier;
mod shared_vectors;
mod shipped_plans;
mod sim_api;
mod sim_faults;
mod sim_fuzz;
mod sim_watch;
mod simulate;
mod simulate_repro;
mod span_vectors;
mod sql_generated;
mod suggestions;
mod traces;
mod write_vectors;
