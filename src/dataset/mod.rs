//! The Parquet dataset: three tables (`reconciles`, `steps`, `writes`) in hive-style partitions
//! (`table=steps/date=YYYY-MM-DD/hour=HH/part-....parquet`), written by a sink off the reconcile
//! path and read back, file by file, by the analyzer. Layout and columns: `docs/parquet.md`.
//!
//! Layer 4 of the crate (docs/design.md, "Layers"): builds on [`engine`](crate::engine),
//! [`util`](crate::util), [`vocab`](crate::vocab); nothing here may use a module of its layer or
//! above.

pub mod encode;
pub mod health;
pub mod lock;
pub mod open;
pub mod reader;
pub mod repair;
pub mod retention;
pub mod rollouts;
mod rowgroup;
pub mod schema;
pub mod sink;
pub mod store;
pub mod upload;
pub mod writer;
pub mod writes;

pub use health::{HealthCounters, ShutdownError};
pub use lock::{DatasetLock, LockError};
pub use open::{OpenCause, OpenError, SinkHealth, SinkOptions};
pub use schema::Table;
pub use sink::{ParquetSink, SinkConfig, SinkStats};
pub use store::Location;
pub use writer::{DatasetWriter, WriteError};
