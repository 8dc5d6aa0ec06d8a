//! Long-running PUTs as ARM runs them: an async operation per PUT (its status URL goes out in
//! `Azure-AsyncOperation`, and for compute also `Location`), answered `InProgress` for the
//! scenario's number of polls and then `Succeeded`, when the NICs and instance it wrote turn
//! from `Updating` to `Succeeded`. Also RFC 3339 time stamps. No HTTP here.

use serde_json::{Value, json};

use super::{
    identity::now,
    model::{AsyncOp, Model, same},
};

/// `secs` since the epoch as `YYYY-MM-DDTHH:MM:SSZ`.
#[must_use]
pub fn rfc3339(secs: u64) -> String {
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    // Civil from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    )
}

/// Start an operation finishing `nics` (and `instance`); its id.
pub fn start(
    m: &mut Model,
    namespace: &str,
    nics: Vec<String>,
    instance: Option<(String, String)>,
) -> String {
    let id = m.uuid();
    m.ops.push(AsyncOp {
        id: id.clone(),
        namespace: namespace.to_owned(),
        remaining: m.lro.in_progress_polls,
        done: false,
        nics,
        instance,
        started: rfc3339(now()),
    });
    id
}

/// The status URL of operation `id` under `base`.
#[must_use]
pub fn url(m: &Model, base: &str, namespace: &str, id: &str, monitor: bool) -> String {
    let monitor = if monitor { "monitor=true&" } else { "" };
    format!(
        "{base}/subscriptions/{}/providers/{namespace}/locations/{}/operations/{id}?{monitor}api-version=2024-07-01",
        m.subscription, m.location
    )
}

/// One poll of operation `id` of provider `namespace`: whether it is done and its status
/// document, or `None` if there is no such operation.
pub fn poll(m: &mut Model, namespace: &str, id: &str) -> Option<(bool, Value)> {
    let i = m
        .ops
        .iter()
        .position(|o| same(&o.id, id) && same(&o.namespace, namespace))?;
    let op = &mut m.ops[i];
    if !op.done && op.remaining > 0 {
        op.remaining -= 1;
        return Some((
            false,
            json!({"name": op.id, "status": "InProgress", "startTime": op.started}),
        ));
    }
    if !op.done {
        finish(m, i);
    }
    let op = &m.ops[i];
    Some((
        true,
        json!({"name": op.id, "status": "Succeeded", "startTime": op.started,
            "endTime": rfc3339(now())}),
    ))
}

/// The operation with this id, if any.
#[must_use]
pub fn find<'a>(m: &'a Model, id: &str) -> Option<&'a AsyncOp> {
    m.ops.iter().find(|o| same(&o.id, id))
}

fn finish(m: &mut Model, i: usize) {
    m.ops[i].done = true;
    let op = m.ops[i].clone();
    for nic in &op.nics {
        if let Some(n) = m.nic_index(nic) {
            let nic = &mut m.nics[n];
            nic["properties"]["provisioningState"] = json!("Succeeded");
            for cfg in nic["properties"]["ipConfigurations"]
                .as_array_mut()
                .into_iter()
                .flatten()
            {
                cfg["properties"]["provisioningState"] = json!("Succeeded");
            }
        }
    }
    if let Some((set, index)) = &op.instance
        && let Some((s, i)) = m.instance(set, index)
    {
        "Succeeded".clone_into(&mut m.scale_sets[s].instances[i].state);
    }
}

/// Finish every pending operation now.
pub fn complete_all(m: &mut Model) {
    for i in 0..m.ops.len() {
        if !m.ops[i].done {
            finish(m, i);
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn rfc3339_dates() {
        assert_eq!(super::rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(super::rfc3339(1_709_251_199), "2024-02-29T23:59:59Z");
    }
}
