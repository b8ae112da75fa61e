//! What the real API server allocates and defaults on a Service: a cluster IP from the service
//! range and, for `NodePort` and `LoadBalancer` Services, a node port per port, each different
//! for a dry-run create than for the real one (the server allocates for the dry run too and
//! releases at once); the defaults of the `Service` type (type, session affinity, traffic
//! policies, each port's protocol and target port), on every write as the server's defaulting
//! does, and the IP families on create; and, on an update that leaves them out, the allocated
//! values kept from the stored object.

use std::collections::HashSet;

use serde_json::{Value, json};

use crate::util::Rng;

/// The service range: `10.96.0.0/16` (kubeadm's default range, `/12`, cut to what a simulated
/// cluster needs).
const SERVICE_RANGE: (u8, u8) = (10, 96);
/// kube-apiserver's default `--service-node-port-range`.
const NODE_PORTS: std::ops::RangeInclusive<u64> = 30000..=32767;

/// The cluster IPs and node ports the stored Services hold.
#[derive(Debug, Default)]
pub(super) struct InUse {
    /// Cluster IPs.
    pub ips: HashSet<String>,
    /// Node ports.
    pub ports: HashSet<u64>,
}

impl InUse {
    /// What `services` (stored Service objects) hold.
    pub fn of<'a>(services: impl Iterator<Item = &'a Value>) -> Self {
        let mut in_use = Self::default();
        for service in services {
            if let Some(ip) = service["spec"]["clusterIP"].as_str() {
                in_use.ips.insert(ip.to_owned());
            }
            for port in service["spec"]["ports"].as_array().into_iter().flatten() {
                if let Some(n) = port["nodePort"].as_u64() {
                    in_use.ports.insert(n);
                }
            }
        }
        in_use
    }
}

fn is_set(value: &Value) -> bool {
    !(value.is_null() || value.as_str() == Some("") || value.as_u64() == Some(0))
}

/// The defaults of the `Service` type, which the server's defaulting gives every write (a create
/// and an update alike): its type, session affinity, traffic policies, each port's protocol and
/// target port. The type.
fn service_defaults(spec: &mut Value) -> String {
    let type_ = spec["type"]
        .as_str()
        .filter(|t| !t.is_empty())
        .unwrap_or("ClusterIP")
        .to_owned();
    spec["type"] = json!(type_);
    if type_ == "ExternalName" {
        return type_;
    }
    for (field, value) in [
        ("sessionAffinity", json!("None")),
        ("internalTrafficPolicy", json!("Cluster")),
    ] {
        if !is_set(&spec[field]) {
            spec[field] = value;
        }
    }
    let node_ports = matches!(type_.as_str(), "NodePort" | "LoadBalancer");
    if node_ports && !is_set(&spec["externalTrafficPolicy"]) {
        spec["externalTrafficPolicy"] = json!("Cluster");
    }
    if type_ == "LoadBalancer" && spec["allocateLoadBalancerNodePorts"].is_null() {
        spec["allocateLoadBalancerNodePorts"] = json!(true);
    }
    for port in spec["ports"].as_array_mut().into_iter().flatten() {
        if !is_set(&port["protocol"]) {
            port["protocol"] = json!("TCP");
        }
        if !is_set(&port["targetPort"]) {
            port["targetPort"] = port["port"].clone();
        }
    }
    type_
}

/// A Service being created: defaults and allocations.
pub(super) fn service_on_create(body: &mut Value, rng: &mut Rng, in_use: &InUse) {
    if !body["spec"].is_object() {
        body["spec"] = json!({});
    }
    let spec = &mut body["spec"];
    let type_ = service_defaults(spec);
    if type_ == "ExternalName" {
        return;
    }
    if !is_set(&spec["ipFamilyPolicy"]) {
        spec["ipFamilyPolicy"] = json!("SingleStack");
    }
    if !is_set(&spec["clusterIP"]) {
        let ip = loop {
            let n = 1 + rng.below(65_534);
            let ip = format!(
                "{}.{}.{}.{}",
                SERVICE_RANGE.0,
                SERVICE_RANGE.1,
                n / 256,
                n % 256
            );
            if !in_use.ips.contains(&ip) {
                break ip;
            }
        };
        spec["clusterIP"] = json!(ip);
    }
    if !spec["clusterIPs"].is_array() {
        spec["clusterIPs"] = json!([spec["clusterIP"].clone()]);
    }
    if !spec["ipFamilies"].is_array() {
        spec["ipFamilies"] = json!(["IPv4"]);
    }
    let node_ports = matches!(type_.as_str(), "NodePort" | "LoadBalancer");
    let mut taken: HashSet<u64> = HashSet::new();
    for port in spec["ports"].as_array_mut().into_iter().flatten() {
        if node_ports && !is_set(&port["nodePort"]) {
            let span = NODE_PORTS.end() - NODE_PORTS.start() + 1;
            let n = loop {
                let n = NODE_PORTS.start() + rng.below(usize::try_from(span).unwrap_or(1)) as u64;
                if !in_use.ports.contains(&n) && taken.insert(n) {
                    break n;
                }
            };
            port["nodePort"] = json!(n);
        }
    }
    if !body["status"].is_object() {
        body["status"] = json!({"loadBalancer": {}});
    }
}

/// A Service being updated: the type's defaults, and what the update leaves out of the allocated
/// values kept from the stored object (kube-apiserver's `patchAllocatedValues`).
pub(super) fn service_on_update(old: &Value, new: &mut Value) {
    if !new["spec"].is_object() {
        return;
    }
    service_defaults(&mut new["spec"]);
    for field in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
        if !is_set(&new["spec"][field]) && is_set(&old["spec"][field]) {
            new["spec"][field] = old["spec"][field].clone();
        }
    }
    let old_ports = old["spec"]["ports"].as_array().cloned().unwrap_or_default();
    for port in new["spec"]["ports"].as_array_mut().into_iter().flatten() {
        if is_set(&port["nodePort"]) {
            continue;
        }
        if let Some(kept) = old_ports
            .iter()
            .find(|p| p["port"] == port["port"] && p["protocol"] == port["protocol"])
            .map(|p| p["nodePort"].clone())
            .filter(is_set)
        {
            port["nodePort"] = kept;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_port_service_gets_its_allocations_and_defaults() {
        let mut rng = Rng::new(7);
        let mut first =
            json!({"spec": {"type": "NodePort", "ports": [{"name": "https", "port": 443}]}});
        service_on_create(&mut first, &mut rng, &InUse::default());
        let spec = &first["spec"];
        assert!(spec["clusterIP"].as_str().unwrap().starts_with("10.96."));
        assert_eq!(spec["clusterIPs"][0], spec["clusterIP"]);
        assert!(NODE_PORTS.contains(&spec["ports"][0]["nodePort"].as_u64().unwrap()));
        assert_eq!(
            (
                &spec["ports"][0]["protocol"],
                &spec["ports"][0]["targetPort"],
                &spec["sessionAffinity"],
                &spec["externalTrafficPolicy"]
            ),
            (
                &json!("TCP"),
                &json!(443),
                &json!("None"),
                &json!("Cluster")
            )
        );
        // Another create of the same body gets other values; an update without them keeps them.
        let mut second =
            json!({"spec": {"type": "NodePort", "ports": [{"name": "https", "port": 443}]}});
        service_on_create(&mut second, &mut rng, &InUse::of(std::iter::once(&first)));
        assert_ne!(second["spec"]["clusterIP"], first["spec"]["clusterIP"]);
        assert_ne!(
            second["spec"]["ports"][0]["nodePort"],
            first["spec"]["ports"][0]["nodePort"]
        );
        let mut update = json!({"spec": {"type": "NodePort", "ports": [{"name": "https", "port": 443, "protocol": "TCP"}]}});
        service_on_update(&first, &mut update);
        assert_eq!(update["spec"]["clusterIP"], first["spec"]["clusterIP"]);
        assert_eq!(
            update["spec"]["ports"][0]["nodePort"],
            first["spec"]["ports"][0]["nodePort"]
        );
        // The type's defaults are the update's too.
        assert_eq!(
            (
                &update["spec"]["sessionAffinity"],
                &update["spec"]["internalTrafficPolicy"],
                &update["spec"]["externalTrafficPolicy"],
                &update["spec"]["ports"][0]["targetPort"]
            ),
            (
                &json!("None"),
                &json!("Cluster"),
                &json!("Cluster"),
                &json!(443)
            )
        );
    }
}
