//! What a request path names: a discovery document or a resource (kind, namespace, name,
//! subresource). Used by the HTTP handlers and by watches.

use serde_json::Value;

use super::Shared;
use super::discovery;
use super::registry::ResourceType;
use super::status::ApiError;

/// A request for objects of a resource.
#[derive(Clone, Debug)]
pub(super) struct Target {
    pub rt: ResourceType,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
}

/// What a path names.
pub(super) enum Route {
    Discovery(Value),
    Resource(Target),
}

pub(super) fn route(shared: &Shared, path: &str) -> Result<Route, ApiError> {
    let segments: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let store = super::lock(&shared.store);
    let registry = store.registry();
    let (group, version, rest) = match segments.as_slice() {
        ["version"] => return Ok(Route::Discovery(discovery::version())),
        ["api"] => return Ok(Route::Discovery(discovery::core_versions())),
        ["apis"] => return Ok(Route::Discovery(discovery::groups(registry))),
        ["api", "v1", rest @ ..] => ("", "v1", rest),
        ["apis", group] => {
            return discovery::group(registry, group)
                .map(Route::Discovery)
                .ok_or_else(|| ApiError::no_route(path));
        }
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return Err(ApiError::no_route(path)),
    };
    if rest.is_empty() {
        return if registry.serves(group, version) || (group.is_empty() && version == "v1") {
            Ok(Route::Discovery(discovery::resources(
                registry, group, version,
            )))
        } else {
            Err(ApiError::no_route(path))
        };
    }
    let namespaced = rest.len() >= 3
        && rest[0] == "namespaces"
        && registry
            .get(group, version, rest[2])
            .is_some_and(|rt| rt.namespaced);
    let (namespace, tail) = if namespaced {
        (Some(rest[1]), &rest[2..])
    } else {
        (None, rest)
    };
    let (plural, name, subresource) = match tail {
        [plural] => (*plural, None, None),
        [plural, name] => (*plural, Some(*name), None),
        [plural, name, sub] => (*plural, Some(*name), Some(*sub)),
        _ => return Err(ApiError::no_route(path)),
    };
    let rt = registry
        .get(group, version, plural)
        .cloned()
        .ok_or_else(|| ApiError::no_route(path))?;
    match subresource {
        None => {}
        Some("status") if rt.status_subresource => {}
        Some(_) => return Err(ApiError::no_route(path)),
    }
    Ok(Route::Resource(Target {
        rt,
        namespace: namespace.map(str::to_owned),
        name: name.map(str::to_owned),
        subresource: subresource.map(str::to_owned),
    }))
}
