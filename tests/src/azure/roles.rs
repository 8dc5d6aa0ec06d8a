//! Azure RBAC as the emulator enforces it: a custom role definition in the JSON form
//! `az role definition create --role-definition` takes (the files under `deploy/azure/`), the
//! set of roles assigned to every identity at some scopes, action matching with `*` wildcards
//! (case-insensitive, `NotActions` subtracted), and the exact 403 texts ARM answers
//! (`AuthorizationFailed`, `LinkedAuthorizationFailed`). Knows nothing of HTTP or the model.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// A custom role definition (`Name`, `IsCustom`, `Description`, `Actions`, `NotActions`,
/// `DataActions`, `NotDataActions`, `AssignableScopes`).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "PascalCase")]
pub struct RoleDefinition {
    /// Role name.
    #[serde(alias = "name", alias = "roleName")]
    pub name: String,
    /// `true` for a custom role (a bool or the string `"true"` in files people write).
    #[serde(default, alias = "isCustom")]
    pub is_custom: Option<serde_json::Value>,
    /// What it is for.
    #[serde(default, alias = "description")]
    pub description: String,
    /// Control-plane actions granted (may hold `*`).
    #[serde(default, alias = "actions")]
    pub actions: Vec<String>,
    /// Actions taken back from `Actions`.
    #[serde(default, alias = "notActions")]
    pub not_actions: Vec<String>,
    /// Data-plane actions (unused by ARM calls; kept).
    #[serde(default, alias = "dataActions")]
    pub data_actions: Vec<String>,
    /// Data-plane actions taken back.
    #[serde(default, alias = "notDataActions")]
    pub not_data_actions: Vec<String>,
    /// Where it may be assigned.
    #[serde(default, alias = "assignableScopes")]
    pub assignable_scopes: Vec<String>,
}

impl RoleDefinition {
    /// Read a role definition file.
    ///
    /// # Errors
    /// The file cannot be read or is not a role definition.
    pub fn from_file(path: &Path) -> Result<Self, String> {
        let text =
            std::fs::read_to_string(path).map_err(|e| format!("read {}: {e}", path.display()))?;
        Self::from_json(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Parse a role definition.
    ///
    /// # Errors
    /// Not a role definition.
    pub fn from_json(text: &str) -> Result<Self, String> {
        serde_json::from_str(text).map_err(|e| e.to_string())
    }

    /// Whether this role grants `action`.
    #[must_use]
    pub fn allows(&self, action: &str) -> bool {
        self.actions.iter().any(|p| matches(p, action))
            && !self.not_actions.iter().any(|p| matches(p, action))
    }
}

/// Whether the action pattern `pattern` (`*` matches any run of characters, slashes too)
/// covers `action`, ignoring case as Azure does.
#[must_use]
pub fn matches(pattern: &str, action: &str) -> bool {
    let pattern = pattern.to_ascii_lowercase();
    let action = action.to_ascii_lowercase();
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == action;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !action.starts_with(first) || action.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &action[first.len()..action.len() - last.len()];
    if !action.ends_with(last) {
        return false;
    }
    for middle in &parts[1..parts.len() - 1] {
        match rest.find(middle) {
            Some(at) => rest = &rest[at + middle.len()..],
            None => return false,
        }
    }
    true
}

/// The roles every identity holds and where they are assigned.
#[derive(Clone, Debug, Default)]
pub struct Assignments {
    /// The roles (their actions add up); empty with `enforced` false: no RBAC at all.
    pub roles: Vec<RoleDefinition>,
    /// Scopes the roles are assigned at (a request's scope must lie under one).
    pub scopes: Vec<String>,
    /// Whether RBAC is enforced.
    pub enforced: bool,
}

impl Assignments {
    /// Whether `action` is granted at `scope`.
    #[must_use]
    pub fn allows(&self, action: &str, scope: &str) -> bool {
        if !self.enforced {
            return true;
        }
        let scope = scope.trim_end_matches('/').to_ascii_lowercase();
        let in_scope = self.scopes.iter().any(|s| {
            let s = s.trim_end_matches('/').to_ascii_lowercase();
            scope == s || scope.starts_with(&format!("{s}/"))
        });
        in_scope && self.roles.iter().any(|r| r.allows(action))
    }
}

/// ARM's 403 message for a missing action on the request's own scope.
#[must_use]
pub fn authorization_failed(client_id: &str, object_id: &str, action: &str, scope: &str) -> String {
    format!(
        "The client '{client_id}' with object id '{object_id}' does not have authorization to \
         perform action '{action}' over scope '{scope}' or the scope is invalid. If access was \
         recently granted, please refresh your credentials."
    )
}

/// ARM's 403 message for a missing action on a resource the request links to.
#[must_use]
pub fn linked_authorization_failed(
    client_id: &str,
    object_id: &str,
    action: &str,
    scope: &str,
    linked_action: &str,
    linked_scope: &str,
) -> String {
    format!(
        "The client '{client_id}' with object id '{object_id}' has permission to perform action \
         '{action}' on scope '{scope}'; however, it does not have permission to perform action \
         '{linked_action}' on the linked scope(s) '{linked_scope}' or the linked scope(s) are \
         invalid."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards_and_case() {
        assert!(matches("*", "Microsoft.Network/networkInterfaces/read"));
        assert!(matches(
            "Microsoft.Network/*/read",
            "microsoft.network/virtualNetworks/subnets/read"
        ));
        assert!(!matches(
            "Microsoft.Network/*/read",
            "Microsoft.Network/networkInterfaces/write"
        ));
        assert!(matches(
            "microsoft.compute/virtualmachinescalesets/*",
            "Microsoft.Compute/virtualMachineScaleSets/virtualMachines/write"
        ));
        assert!(!matches("Microsoft.Compute/*", "Microsoft.Network/x/read"));
        let role = RoleDefinition {
            actions: vec!["Microsoft.Network/*".into()],
            not_actions: vec!["*/write".into()],
            ..RoleDefinition::default()
        };
        assert!(role.allows("Microsoft.Network/networkInterfaces/read"));
        assert!(!role.allows("Microsoft.Network/networkInterfaces/write"));
    }
}
