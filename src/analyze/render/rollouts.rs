//! The rollouts' section of the HTML report: the rollout driver's decisions read from the
//! dataset's `rollouts` table.

use std::fmt::Write as _;

use super::escape::escape;
use crate::dataset::rollouts::Row;

/// The rollouts' timeline: each decision of each rollout, with the gates that took it.
pub(super) fn html(out: &mut String, rows: &[Row]) {
    if rows.is_empty() {
        return;
    }
    out.push_str("<section><h2>Rollouts</h2><p class=\"note\">Each decision of the rollout driver (docs/rollout.md), with the gates' figures it rested on.</p><table><thead><tr><th>time (UTC)</th><th>group</th><th>step</th><th>ramp</th><th>decision</th><th>gates</th><th>why</th></tr></thead><tbody>\n");
    for r in rows.iter().filter(|r| !r.decision.is_empty()) {
        let gates: Vec<serde_json::Value> = serde_json::from_str(&r.gates).unwrap_or_default();
        let gates: Vec<String> = gates
            .iter()
            .map(|g| {
                format!(
                    "{} {}",
                    g["name"].as_str().unwrap_or("?"),
                    g["result"].as_str().unwrap_or("?")
                )
            })
            .collect();
        let time = k8s_openapi::jiff::Timestamp::from_microsecond(r.time_us).map_or_else(
            |_| r.time_us.to_string(),
            |t| t.strftime("%Y-%m-%d %H:%M:%S").to_string(),
        );
        let _ = writeln!(
            out,
            "<tr><td>{time}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"{}\">{}</td><td>{}</td><td>{}</td></tr>",
            escape(&r.group),
            r.step,
            if r.ramp > 0.0 {
                format!("{}%", r.ramp)
            } else {
                "shadow".to_owned()
            },
            if r.decision.contains("RolledBack") {
                "verdict-contradicted"
            } else {
                "verdict-supported"
            },
            escape(&r.decision),
            escape(&gates.join(", ")),
            escape(&r.message)
        );
    }
    out.push_str("</tbody></table></section>\n");
}
