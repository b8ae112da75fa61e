//! Options and parsers shared by several subcommands: the flag's, plans
//! given as a shipped name or a file, the cluster to talk to.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use shadow_reconciler::flag::watch::Target;
use shadow_reconciler::flag::{self, FlagSpec, GroupRef, Ramp};
use shadow_reconciler::plan::{self, ReconcilePlan};
use shadow_reconciler::vocab::Mode;

/// The flag's options, declared once: the mode, rollout groups, ramp and override the engines
/// follow (`run`, `simulate`), and the ConfigMap that overrides them.
#[derive(Args)]
pub struct FlagArgs {
    /// The engines' mode: off, calibrate (the control against its own code: the comparison's
    /// noise), shadow or enforce.
    #[arg(long, default_value_t = FlagSpec::default().mode)]
    pub mode: Mode,
    /// With --mode enforce: a rollout group the control enforces, as GROUP (in every plan that
    /// has it) or PLAN/GROUP (repeatable).
    #[arg(long = "enforce-group", value_name = "[PLAN/]GROUP")]
    pub enforce_groups: Vec<String>,
    #[command(flatten)]
    pub candidate: CandidateArgs,
    #[command(flatten)]
    pub config_map: FlagMapArgs,
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

/// `--candidate-group`: the candidate's rollout groups (the engines', and `ingest`'s rebuilt
/// candidate).
#[derive(Args)]
pub struct CandidateArgs {
    /// A rollout group the candidate evaluates, as GROUP (in every plan that has it) or
    /// PLAN/GROUP (repeatable); default: every group.
    #[arg(
        long = "candidate-group",
        alias = "candidate",
        value_name = "[PLAN/]GROUP"
    )]
    pub candidate_groups: Vec<String>,
}

/// The flag ConfigMap: the one the engines read (`run`, `simulate`) and `ingest --rollout`'s
/// driver writes.
#[derive(Args)]
pub struct FlagMapArgs {
    /// Namespace of the flag ConfigMap, also the rollouts' and the Lease's [default:
    /// `POD_NAMESPACE` from the environment, else shadow-reconciler].
    #[arg(long, value_name = "NAMESPACE")]
    pub flag_namespace: Option<String>,
    /// Name of the flag ConfigMap: the one the engines read (`run`, `simulate`), the one
    /// `ingest --rollout`'s driver writes.
    #[arg(long, value_name = "NAME", default_value = "shadow-reconciler-flag")]
    pub flag_name: String,
}

impl FlagMapArgs {
    /// The ConfigMap, its namespace defaulted.
    pub fn target(&self) -> Target {
        Target {
            namespace: self.flag_namespace.clone().unwrap_or_else(|| {
                std::env::var("POD_NAMESPACE")
                    .ok()
                    .filter(|ns| !ns.is_empty())
                    .unwrap_or_else(|| "shadow-reconciler".to_owned())
            }),
            name: self.flag_name.clone(),
        }
    }
}

impl FlagArgs {
    /// The ConfigMap to watch, unless --no-flag-watch.
    pub fn target(&self) -> Option<Target> {
        (!self.no_flag_watch).then(|| self.config_map.target())
    }

    /// The command line's flag: the one conversion of these options into the
    /// [`FlagSpec`] the engines follow (`run` and `simulate`), every group resolved against
    /// `plans` by the flag's resolver; `retired` are groups given with a retired spelling of
    /// `--enforce-group`. With the note to give when `--enforce-group` only applies through the
    /// ConfigMap or the annotation.
    pub fn spec(
        &self,
        retired: &[String],
        plans: &[&ReconcilePlan],
    ) -> anyhow::Result<(FlagSpec, Option<String>)> {
        let given: Vec<String> = self.enforce_groups.iter().chain(retired).cloned().collect();
        let note = self.enforce_groups_apply(!given.is_empty())?;
        let enforced = groups_of("enforce-group", &given, plans)?;
        let candidate = groups_of("candidate-group", &self.candidate.candidate_groups, plans)?;
        let spec = FlagSpec {
            mode: self.mode,
            enforced_groups: enforced,
            candidate_groups: (!candidate.is_empty()).then_some(candidate),
            ramp: self.ramp_percent,
            allow_object_override: self.allow_object_override,
            groups: Vec::new(),
        };
        Ok((spec, note))
    }

    /// `--enforce-group` matters only to objects in mode enforce: an error when nothing can put
    /// one there (not `--mode`, no flag ConfigMap watched, no annotation allowed), else the note
    /// to give when `--mode` does not.
    fn enforce_groups_apply(&self, given: bool) -> anyhow::Result<Option<String>> {
        let mode = self.mode;
        if !given || mode == Mode::Enforce {
            return Ok(None);
        }
        if self.no_flag_watch && !self.allow_object_override {
            anyhow::bail!(
                "--enforce-group does nothing with --mode {mode} and --no-flag-watch: the control enforces groups only in mode enforce; add --mode enforce"
            );
        }
        Ok(Some(format!(
            "--enforce-group applies only to objects in mode enforce; --mode is {mode}, so only the flag ConfigMap{} can put objects there",
            if self.allow_object_override {
                " or their annotation"
            } else {
                ""
            }
        )))
    }
}

/// The `[PLAN/]GROUP` values of `--{option}` as the groups they name in `plans`: each parsed into
/// a [`GroupRef`] and resolved by the flag's one resolver ([`flag::resolve`]), the errors worded
/// after the option. The same syntax, checks and words in every command that takes a group
/// (`run`, `simulate` with or without `--model-only`, `ingest`; `analyze --group` parses the
/// same syntax and reads it against the plans that have data).
pub(super) fn groups_of(
    option: &str,
    values: &[String],
    plans: &[&ReconcilePlan],
) -> anyhow::Result<Vec<GroupRef>> {
    let named = parse_groups(option, values)?;
    flag::resolve(&named, plans)
        .map_err(|e| anyhow::anyhow!("--{option} {:?}: {e}", e.group().to_string()))
}

/// The values of `--{option}` as group names (`GROUP` or `PLAN/GROUP`).
pub(super) fn parse_groups(option: &str, values: &[String]) -> anyhow::Result<Vec<GroupRef>> {
    values
        .iter()
        .map(|value| {
            value
                .parse::<GroupRef>()
                .map_err(|e| anyhow::anyhow!("--{option} {value:?}: {e}"))
        })
        .collect()
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
        if let Some(name) = file
            .to_str()
            .filter(|_| !file.exists())
            .filter(|name| plan::embedded::NAMES.contains(name))
        {
            plans.push(shipped(name)?);
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
            plans.push(shipped(name)?);
        }
    }
    Ok(plans)
}

/// A shipped plan (parsed once per process) and its text.
fn shipped(name: &str) -> anyhow::Result<LoadedPlan> {
    let (_, text) = plan::embedded::text(name).context("a shipped plan")?;
    let plan = plan::embedded::load(name).context("a shipped plan")?;
    Ok(LoadedPlan {
        plan,
        text: text.to_owned(),
    })
}

pub use super::parquet::{ParquetArgs, command_line, finish, lock_dataset};

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
