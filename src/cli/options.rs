//! Options and parsers shared by several subcommands: the Parquet writer's, the flag's, plans
//! given as a shipped name or a file, the cluster to talk to.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use shadow_reconciler::dataset::{HealthCounters, ParquetSink, SinkConfig};
use shadow_reconciler::flag::Ramp;
use shadow_reconciler::flag::watch::Target;
use shadow_reconciler::plan::{self, ReconcilePlan};

/// The flag's options: its defaults and the ConfigMap that overrides them.
#[derive(Args)]
pub struct FlagArgs {
    /// Namespace of the flag ConfigMap [default: `POD_NAMESPACE` from the environment, else
    /// shadow-reconciler].
    #[arg(long, value_name = "NAMESPACE")]
    pub flag_namespace: Option<String>,
    /// Name of the flag ConfigMap.
    #[arg(long, value_name = "NAME", default_value = "shadow-reconciler-flag")]
    pub flag_name: String,
    /// Watch no flag ConfigMap: the command line decides alone.
    #[arg(long)]
    pub no_flag_watch: bool,
    /// Share of objects (percent, 0 to 100) that get --mode; the others get the mode below it
    /// (enforce -> shadow -> off). An object's UID decides, so it stays on one side.
    #[arg(long, value_name = "PERCENT", default_value = "100", value_parser = parse_ramp)]
    pub ramp_percent: Ramp,
    /// Let an object's `shadow-reconciler.io/mode` annotation choose its mode.
    #[arg(long)]
    pub allow_object_override: bool,
}

impl FlagArgs {
    /// The ConfigMap to watch, unless --no-flag-watch.
    pub fn target(&self) -> Option<Target> {
        (!self.no_flag_watch).then(|| Target {
            namespace: self.flag_namespace.clone().unwrap_or_else(|| {
                std::env::var("POD_NAMESPACE")
                    .ok()
                    .filter(|ns| !ns.is_empty())
                    .unwrap_or_else(|| "shadow-reconciler".to_owned())
            }),
            name: self.flag_name.clone(),
        })
    }
}

/// `--enforce-group` matters only to objects in mode enforce: an error when nothing can put one
/// there (not `--mode`, no flag ConfigMap watched, no annotation allowed), else the note to give
/// when `--mode` does not.
pub(super) fn enforce_groups_apply(
    mode: shadow_reconciler::vocab::Mode,
    given: bool,
    flag: &FlagArgs,
) -> anyhow::Result<Option<String>> {
    use shadow_reconciler::vocab::Mode;
    if !given || mode == Mode::Enforce {
        return Ok(None);
    }
    if flag.no_flag_watch && !flag.allow_object_override {
        anyhow::bail!(
            "--enforce-group does nothing with --mode {mode} and --no-flag-watch: the control enforces groups only in mode enforce; add --mode enforce"
        );
    }
    Ok(Some(format!(
        "--enforce-group applies only to objects in mode enforce; --mode is {mode}, so only the flag ConfigMap{} can put objects there",
        if flag.allow_object_override {
            " or their annotation"
        } else {
            ""
        }
    )))
}

fn parse_ramp(s: &str) -> Result<Ramp, String> {
    s.parse::<f64>()
        .ok()
        .and_then(Ramp::from_percent)
        .ok_or_else(|| format!("{s:?} is not a percentage from 0 to 100 with at most two decimals"))
}

/// A plan and the text it was parsed from (the suggestion edits the text).
pub struct LoadedPlan {
    /// The plan.
    pub plan: ReconcilePlan,
    /// Its YAML.
    pub text: String,
}

/// `--plan SPEC`: a shipped plan's name, else a plan file.
pub fn shipped_or_file(spec: &str) -> anyhow::Result<ReconcilePlan> {
    match plan::embedded::load(spec) {
        Some(plan) => Ok(plan),
        None => ReconcilePlan::load(std::path::Path::new(spec)).with_context(|| {
            format!(
                "--plan {spec:?} is neither a shipped plan ({}) nor a valid plan file",
                plan::embedded::NAMES.join(", ")
            )
        }),
    }
}

/// Refuses a plan given twice: the same `--plan` twice, or two files of one plan name (the
/// second would silently stand in for the first).
pub fn once_each<'a>(
    given: impl Iterator<Item = String>,
    names: impl Iterator<Item = &'a str>,
) -> anyhow::Result<()> {
    let mut seen: Vec<(String, &str)> = Vec::new();
    for (spec, name) in given.zip(names) {
        if let Some((first, _)) = seen.iter().find(|(_, n)| *n == name) {
            if *first == spec {
                anyhow::bail!("--plan {spec} is given twice; give each plan once");
            }
            anyhow::bail!(
                "--plan {first} and --plan {spec} are both the plan `{name}`; give each plan once (a plan is known by its metadata.name)"
            );
        }
        seen.push((spec, name));
    }
    Ok(())
}

/// The given plans (files, or shipped plans by name), then every shipped plan whose name none of
/// them has.
pub fn load_plans(files: &[PathBuf]) -> anyhow::Result<Vec<LoadedPlan>> {
    let mut plans = Vec::new();
    for file in files {
        // A shipped plan's name (no such file here) stands for that plan.
        if let Some((source, text)) = file
            .to_str()
            .filter(|_| !file.exists())
            .and_then(plan::embedded::text)
        {
            let plan = ReconcilePlan::from_yaml(source, text)?;
            plans.push(LoadedPlan {
                plan,
                text: text.to_owned(),
            });
            continue;
        }
        let text = std::fs::read_to_string(file)
            .with_context(|| format!("--plan {}: cannot read it", file.display()))?;
        let plan = ReconcilePlan::from_yaml(&file.display().to_string(), &text)?;
        plans.push(LoadedPlan { plan, text });
    }
    once_each(
        files.iter().map(|f| f.display().to_string()),
        plans.iter().map(|p| p.plan.name()),
    )?;
    for name in plan::embedded::NAMES {
        if !plans.iter().any(|p| p.plan.name() == name) {
            let (file, text) = plan::embedded::text(name).context("a shipped plan")?;
            let plan = ReconcilePlan::from_yaml(file, text)?;
            plans.push(LoadedPlan {
                plan,
                text: text.to_owned(),
            });
        }
    }
    Ok(plans)
}

/// Parquet options of `simulate` and `run`.
// The field names are the flag names (`--parquet-max-rows`), which share their prefix on purpose.
#[allow(clippy::struct_field_names)]
#[derive(Args, Clone)]
pub struct ParquetArgs {
    /// The cluster the records come from (the management cluster's name): a column of every row
    /// and the partition directory cluster=NAME, so one bucket can hold a fleet's data.
    #[arg(
        long,
        env = "SHADOW_RECONCILER_CLUSTER",
        default_value = shadow_reconciler::dataset::encode::DEFAULT_CLUSTER,
        value_parser = cluster_name
    )]
    pub cluster: String,
    /// Records per row group are counted in step rows; a file closes at this many step rows.
    #[arg(long, default_value_t = 262_144, value_parser = at_least_one)]
    pub parquet_max_rows: usize,
    /// A file also closes at this many MiB of buffered data.
    #[arg(long, default_value_t = 64, value_parser = at_least_one)]
    pub parquet_max_mib: usize,
    /// A file also closes this many seconds after its first record.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    pub parquet_max_age: u64,
    /// Records in flight between the engine and the writer before new ones are dropped.
    #[arg(long, default_value_t = 10_000, value_parser = at_least_one)]
    pub parquet_capacity: usize,
    /// How long a shutdown waits for the writer to flush (and, to an object store, the uploads
    /// to finish), in seconds.
    #[arg(long, default_value_t = 10)]
    pub parquet_grace: u64,
    /// With --parquet-dir URL: the local directory parts wait in until they are uploaded (kept
    /// across restarts: a later start uploads what is left) [default: shadow-spool].
    #[arg(long, value_name = "DIR")]
    pub parquet_spool: Option<PathBuf>,
    /// With --parquet-dir URL: past this many MiB in the spool (the store is down), new records
    /// are dropped and counted [default: 1024].
    #[arg(long, value_name = "MIB", value_parser = at_least_one)]
    pub parquet_spool_max_mib: Option<usize>,
}

fn cluster_name(text: &str) -> Result<String, String> {
    shadow_reconciler::dataset::encode::check_cluster(text).map(|()| text.to_owned())
}

/// A count that must be at least 1 (`--parquet-max-rows 0` would write a file per record).
fn at_least_one(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("not a whole number: {e}")),
    }
}

impl ParquetArgs {
    /// Refuses the object-store options for a local dataset `dir`, before anything is touched.
    ///
    /// # Errors
    /// When `--parquet-spool` or `--parquet-spool-max-mib` is given.
    pub fn local_only(&self, dir: &Path) -> anyhow::Result<()> {
        if self.parquet_spool.is_some() || self.parquet_spool_max_mib.is_some() {
            anyhow::bail!(
                "--parquet-spool and --parquet-spool-max-mib apply to an object store (--parquet-dir s3://..., gs://..., az://...); {} is a local directory, written directly",
                dir.display()
            );
        }
        Ok(())
    }

    /// Starts a sink into `dir` with these options, once `dir` is known to take files (created
    /// if missing) and this process holds its lock (one writer per dataset directory): a
    /// directory that cannot be written, or that another writer writes, fails the command at
    /// start-up, naming the path and the cause, instead of at its first write. `/readyz` then
    /// follows the sink: not ready while its writes fail.
    pub fn start(
        &self,
        dir: &Path,
        health: Option<HealthCounters>,
        telemetry: &shadow_reconciler::telemetry::http::Telemetry,
    ) -> anyhow::Result<std::sync::Arc<ParquetSink>> {
        self.local_only(dir)?;
        writable_dir(dir)?;
        let lock = lock_dataset(dir, "--parquet-dir")?;
        Ok(self.start_locked(dir, lock, health, telemetry))
    }

    /// [`start`](Self::start) into `dir`, whose `lock` the caller took.
    pub fn start_locked(
        &self,
        dir: &Path,
        lock: std::sync::Arc<shadow_reconciler::dataset::DatasetLock>,
        health: Option<HealthCounters>,
        telemetry: &shadow_reconciler::telemetry::http::Telemetry,
    ) -> std::sync::Arc<ParquetSink> {
        let mut config = self.config(dir);
        config.lock = Some(lock);
        let sink = std::sync::Arc::new(ParquetSink::start(config, health));
        let watched = std::sync::Arc::downgrade(&sink);
        telemetry.add_sink_check(move || watched.upgrade().and_then(|s| s.failing()));
        sink
    }

    /// [`start_at`](Self::start_at) when `--parquet-dir` is given; without it, no sink, and the
    /// options that only apply to one are errors rather than silently ignored.
    pub fn start_if(
        &self,
        location: Option<&str>,
        telemetry: &shadow_reconciler::telemetry::http::Telemetry,
    ) -> anyhow::Result<Option<std::sync::Arc<ParquetSink>>> {
        match location {
            Some(location) => self.start_at(location, telemetry).map(Some),
            None if self.parquet_spool.is_some() || self.parquet_spool_max_mib.is_some() => {
                anyhow::bail!(
                    "--parquet-spool and --parquet-spool-max-mib hold parts on their way to an object store, and no --parquet-dir was given: nothing is written, so they would do nothing. Add --parquet-dir s3://BUCKET/PREFIX (or gs://, az://), or drop them"
                )
            }
            None => Ok(None),
        }
    }

    /// [`start`](Self::start) at `location`: a local directory, or an object store's prefix
    /// (`s3://`, `gs://`, `az://`), written through the local spool (`--parquet-spool`, locked
    /// like a dataset directory) and uploaded part by part. Several writers may share a prefix
    /// (a fleet's clusters do): every part's key carries its writer's random instance id, and
    /// nothing deletes what is in the store. `/readyz` is not ready while writes or uploads
    /// fail.
    pub fn start_at(
        &self,
        location: &str,
        telemetry: &shadow_reconciler::telemetry::http::Telemetry,
    ) -> anyhow::Result<std::sync::Arc<ParquetSink>> {
        let health = telemetry.metrics().sink_health("parquet").into();
        let remote = match shadow_reconciler::dataset::Location::parse(location)
            .with_context(|| format!("--parquet-dir {location}"))?
        {
            shadow_reconciler::dataset::Location::Local(dir) => {
                return self.start(&dir, Some(health), telemetry);
            }
            shadow_reconciler::dataset::Location::Remote(remote) => remote,
        };
        let spool = self
            .parquet_spool
            .clone()
            .unwrap_or_else(|| PathBuf::from("shadow-spool"));
        writable_dir(&spool).with_context(|| format!("--parquet-spool {}", spool.display()))?;
        let mut config = self.config(&spool);
        config.lock = Some(lock_dataset(&spool, "--parquet-spool")?);
        config.upload = Some(shadow_reconciler::dataset::upload::UploadConfig {
            remote,
            max_spool_bytes: (self.parquet_spool_max_mib.unwrap_or(1024) as u64) << 20,
            part_bytes: shadow_reconciler::dataset::store::UPLOAD_PART_BYTES,
        });
        let upload = telemetry.metrics().upload_health("parquet");
        let sink = std::sync::Arc::new(ParquetSink::start_with_upload(
            config,
            Some(health),
            Some(upload),
        ));
        let watched = std::sync::Arc::downgrade(&sink);
        telemetry.add_sink_check(move || watched.upgrade().and_then(|s| s.failing()));
        Ok(sink)
    }

    fn config(&self, dir: &Path) -> SinkConfig {
        let mut config = SinkConfig::new(dir);
        config.writer.cluster = self.cluster.as_str().into();
        config.capacity = self.parquet_capacity;
        config.writer.max_file_rows = self.parquet_max_rows;
        config.writer.row_group_rows = config
            .writer
            .row_group_rows
            .min(config.writer.max_file_rows);
        config.writer.max_file_bytes = self.parquet_max_mib << 20;
        config.writer.max_file_age = Duration::from_secs(self.parquet_max_age);
        config
    }

    /// The shutdown grace.
    pub const fn grace(&self) -> Duration {
        Duration::from_secs(self.parquet_grace)
    }
}

/// Flushes and closes the sink, reporting what it wrote.
pub fn finish(sink: &ParquetSink, grace: Duration) -> anyhow::Result<()> {
    let stats = match sink.shutdown(grace) {
        Ok(stats) => stats,
        Err(error) => {
            // What was uploaded and what waits in the spool, before the error says why.
            print_uploads(sink);
            return Err(error).with_context(|| {
                format!(
                    "cannot complete the Parquet dataset in {}",
                    sink.dir().display()
                )
            });
        }
    };
    eprintln!(
        "parquet: {} records accepted, {} written to {} in {} files ({} dropped, {} write errors, {} lost)",
        stats.accepted,
        stats.written,
        sink.dir().display(),
        stats.files,
        stats.dropped,
        stats.errors,
        stats.lost
    );
    if let Some(error) = sink.last_error() {
        eprintln!("parquet: the last write error: {error}");
    }
    print_uploads(sink);
    if stats.lost > 0 {
        anyhow::bail!(
            "{} accepted records were not written to {}{}",
            stats.lost,
            sink.dir().display(),
            sink.last_error()
                .map_or_else(String::new, |e| format!(": {e}"))
        );
    }
    Ok(())
}

/// With an object store: what was uploaded and what waits in the spool.
fn print_uploads(sink: &ParquetSink) {
    if let Some(upload) = sink.upload_stats() {
        eprintln!(
            "parquet: {} records uploaded in {} files ({} upload errors); {} parts ({} bytes) left in the spool {}{}",
            upload.records,
            upload.files,
            upload.errors,
            upload.spool_parts,
            upload.spool_bytes,
            sink.dir().display(),
            if upload.spool_parts > 0 {
                ": the next start with this spool uploads them"
            } else {
                ""
            }
        );
    }
}

/// Creates `dir` if missing and checks that a file can be written there.
/// This process's command line, as the lock file records it (at most 300 characters).
pub fn command_line() -> String {
    let mut line = std::env::args()
        .map(|a| {
            let name = std::path::Path::new(&a)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned());
            // The program by its name only: the lock file names no path of the machine.
            if a.contains('/') && name.as_deref() == Some("shadow-reconciler") {
                "shadow-reconciler".to_owned()
            } else {
                a
            }
        })
        .collect::<Vec<_>>()
        .join(" ");
    if line.len() > 300 {
        let mut end = 300;
        while !line.is_char_boundary(end) {
            end -= 1;
        }
        line.truncate(end);
        line.push_str("...");
    }
    line
}

/// Takes the lock of the dataset directory `dir` (given as `option`) for this process, saying
/// when it takes over from a writer that died holding it.
pub fn lock_dataset(
    dir: &Path,
    option: &str,
) -> anyhow::Result<std::sync::Arc<shadow_reconciler::dataset::DatasetLock>> {
    let lock = shadow_reconciler::dataset::DatasetLock::acquire(dir, &command_line())
        .with_context(|| format!("{option} {}", dir.display()))?;
    if let Some(dead) = lock.taken_over() {
        tracing::warn!(
            dir = %dir.display(),
            previous = %dead,
            "took over the dataset's lock from a writer that ended without releasing it (killed, or its node stopped); its unfinished files are repaired or removed"
        );
    }
    Ok(std::sync::Arc::new(lock))
}

pub fn writable_dir(dir: &Path) -> anyhow::Result<()> {
    if dir.exists() && !dir.is_dir() {
        anyhow::bail!(
            "--parquet-dir {}: this is a file, not a directory; give a directory (it is created if missing)",
            dir.display()
        );
    }
    std::fs::create_dir_all(dir).with_context(|| {
        format!(
            "--parquet-dir {}: cannot create the directory",
            dir.display()
        )
    })?;
    if !dir.is_dir() {
        anyhow::bail!("--parquet-dir {}: not a directory", dir.display());
    }
    let probe = dir.join(format!(".write-check-{}", std::process::id()));
    std::fs::write(&probe, b"")
        .with_context(|| format!("--parquet-dir {}: cannot write a file there", dir.display()))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// The cluster to talk to: `kubeconfig` (with `context`, else its current one) when given, else
/// kube's inference (`KUBECONFIG`, `~/.kube/config`, or the pod's service account).
pub async fn cluster_config(
    kubeconfig: Option<&std::path::Path>,
    context: Option<&str>,
) -> anyhow::Result<kube::Config> {
    let options = kube::config::KubeConfigOptions {
        context: context.map(str::to_owned),
        ..kube::config::KubeConfigOptions::default()
    };
    match kubeconfig {
        Some(path) => {
            let file = kube::config::Kubeconfig::read_from(path).map_err(|e| {
                // kube's message repeats the path and its cause; say each once.
                if let kube::config::KubeconfigError::Parse(yaml) = &e {
                    return anyhow::anyhow!(
                        "cannot read the kubeconfig {}",
                        shadow_reconciler::util::yaml::located(path, yaml)
                    );
                }
                let mut cause: &dyn std::error::Error = &e;
                while let Some(inner) = cause.source() {
                    cause = inner;
                }
                let hint = if path.exists() {
                    String::new()
                } else {
                    format!(" ({NO_CLUSTER_HINT})")
                };
                anyhow::anyhow!(
                    "cannot read the kubeconfig {}: {cause}{hint}",
                    path.display()
                )
            })?;
            kube::Config::from_custom_kubeconfig(file, &options)
                .await
                .with_context(|| format!("cannot use the kubeconfig {}", path.display()))
        }
        None if context.is_some() => kube::Config::from_kubeconfig(&options)
            .await
            .context("cannot use the kubeconfig's context (from KUBECONFIG or ~/.kube/config)"),
        None => {
            let in_pod = std::env::var_os("KUBERNETES_SERVICE_HOST").is_some();
            let from_env = std::env::var_os("KUBECONFIG").is_some_and(|v| !v.is_empty());
            let home_config = std::env::var_os("HOME")
                .map(|home| std::path::Path::new(&home).join(".kube/config"));
            if !in_pod && !from_env && !home_config.as_ref().is_some_and(|p| p.exists()) {
                anyhow::bail!(
                    "cannot find a cluster: no --kubeconfig, KUBECONFIG is not set, {} does not exist, and this is not a pod; {NO_CLUSTER_HINT}",
                    home_config
                        .map_or_else(|| "~/.kube/config".to_owned(), |p| p.display().to_string())
                );
            }
            if from_env {
                let named = std::env::var("KUBECONFIG").unwrap_or_default();
                if !std::env::split_paths(&named).any(|p| p.exists()) {
                    anyhow::bail!(
                        "cannot find a cluster: KUBECONFIG={named} names no file that exists; {NO_CLUSTER_HINT}"
                    );
                }
            }
            let home_exists = home_config.as_ref().is_some_and(|p| p.exists());
            if in_pod && !from_env && !home_exists {
                // Only the pod's service account is left: its own error says what is missing.
                return kube::Config::incluster().map_err(|e| {
                    anyhow::anyhow!(
                        "cannot use the pod's service account to reach the cluster: {e}"
                    )
                });
            }
            kube::Config::infer().await.map_err(|e| {
                // kube's message nests every attempt and repeats its causes; the last one says it.
                let mut cause: &dyn std::error::Error = &e;
                while let Some(inner) = cause.source() {
                    cause = inner;
                }
                anyhow::anyhow!("cannot find a cluster (KUBECONFIG, ~/.kube/config or the pod's service account): {cause}")
            })
        }
    }
}

/// What to try without a cluster.
const NO_CLUSTER_HINT: &str = "no cluster at hand? `shadow-reconciler simulate` runs everything \
    on the embedded simulator, and `shadow-reconciler sim serve --kubeconfig-out FILE` serves it \
    for `run`";

/// The `[PLAN/]GROUP` values of `--{option}` resolved against the loaded `plans`, as (plan, group)
/// pairs: `GROUP` names the group in every plan that has it, `PLAN/GROUP` the group of one plan.
/// The same syntax, checks and words in every command that takes a group (`run`, `simulate`
/// with or without `--model-only`, `ingest`); `analyze --group` reads the same syntax against
/// the plans that have data.
pub(super) fn resolve_groups(
    option: &str,
    values: &[String],
    plans: &[&ReconcilePlan],
) -> anyhow::Result<Vec<(String, String)>> {
    let mut out: Vec<(String, String)> = Vec::new();
    for value in values {
        let reference = shadow_reconciler::flag::GroupRef::parse(value).with_context(|| {
            format!(
                "--{option} {value:?}: expected GROUP or PLAN/GROUP, e.g. non-critical-syncs or hostedcluster/non-critical-syncs"
            )
        })?;
        let before = out.len();
        for plan in plans {
            if let Some(group) = reference.in_plan(plan) {
                let pair = (plan.name().to_owned(), group.to_owned());
                if !out.contains(&pair) {
                    out.push(pair);
                }
            }
        }
        if out.len() == before {
            let why = match value.split_once('/') {
                Some((p, _)) if !plans.iter().any(|l| l.name() == p) => format!(
                    "no plan {p:?} here (the plans: {})",
                    plans
                        .iter()
                        .map(|l| l.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                Some((p, g)) => format!("plan {p:?} has no rollout group {g:?}"),
                None => format!("no plan here has a rollout group {value:?}"),
            };
            let known: Vec<String> = plans
                .iter()
                .flat_map(|p| {
                    p.groups()
                        .iter()
                        .map(move |g| format!("{}/{}", p.name(), g.name()))
                })
                .collect();
            anyhow::bail!(
                "--{option} {value:?}: {why}; the groups: {}",
                known.join(", ")
            );
        }
    }
    Ok(out)
}

/// (plan, group) pairs grouped by plan.
pub(super) fn by_plan(
    pairs: &[(String, String)],
) -> std::collections::BTreeMap<String, Vec<String>> {
    let mut map = std::collections::BTreeMap::<String, Vec<String>>::new();
    for (plan, group) in pairs {
        map.entry(plan.clone()).or_default().push(group.clone());
    }
    map
}

pub(super) fn parse_probability(s: &str) -> Result<f64, String> {
    let p: f64 = s
        .parse()
        .map_err(|e| format!("{s:?} is not a number: {e}"))?;
    if (0.0..=1.0).contains(&p) {
        Ok(p)
    } else {
        Err(format!("{p} is not a probability; use a value from 0 to 1"))
    }
}
