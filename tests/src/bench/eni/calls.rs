//! What the EC2 emulator's request log says about a run: the EC2 calls (every one passes the
//! operator's token bucket, one token per page; IMDS and STS requests do not), each action's
//! count, the most that arrived within any one second, and how many EC2 throttled. Reads the
//! log only.

use std::{collections::BTreeMap, time::Duration};

use crate::ec2::{ACTIONS, LoggedRequest};

/// The EC2 calls of a run.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Calls {
    /// EC2 calls (rate-limited by the operator).
    pub limited: u64,
    /// EC2 calls by action.
    pub by_action: BTreeMap<String, u64>,
    /// The most EC2 calls that arrived within one second (a sliding window).
    pub peak_per_second: usize,
    /// Calls EC2 answered with `RequestLimitExceeded`.
    pub throttled: u64,
}

impl Calls {
    /// The calls among `log`.
    pub fn from_log(log: &[LoggedRequest]) -> Self {
        let limited: Vec<&LoggedRequest> = (log.iter())
            .filter(|r| ACTIONS.contains(&r.action.as_str()))
            .collect();
        let mut by_action = BTreeMap::new();
        for r in &limited {
            *by_action.entry(r.action.clone()).or_default() += 1;
        }
        let mut at: Vec<_> = limited.iter().map(|r| r.at).collect();
        at.sort_unstable();
        // For each call, the calls in the second that starts with it.
        let mut peak = 0;
        let mut end = 0;
        for (start, first) in at.iter().enumerate() {
            while end < at.len() && at[end].duration_since(*first) < Duration::from_secs(1) {
                end += 1;
            }
            peak = peak.max(end - start);
        }
        Self {
            limited: limited.len() as u64,
            throttled: (limited.iter())
                .filter(|r| r.code.as_deref() == Some("RequestLimitExceeded"))
                .count() as u64,
            by_action,
            peak_per_second: peak,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Instant, SystemTime};

    use super::*;

    fn request(action: &str, at: Instant, ms: u64, code: Option<&str>) -> LoggedRequest {
        LoggedRequest {
            action: action.to_owned(),
            params: BTreeMap::new(),
            access_key: None,
            status: if code.is_some() { 503 } else { 200 },
            code: code.map(str::to_owned),
            at: at + Duration::from_millis(ms),
            time: SystemTime::now(),
        }
    }

    #[test]
    fn counts_ec2_calls_by_action_and_the_busiest_second() {
        let t = Instant::now();
        let log = [
            request("ImdsToken", t, 0, None),
            request("DescribeNetworkInterfaces", t, 0, None),
            request("CreateNetworkInterface", t, 100, None),
            request("AttachNetworkInterface", t, 1_050, None),
            request("ModifyNetworkInterfaceAttribute", t, 1_100, None),
            request("DescribeNetworkInterfaces", t, 1_200, None),
            request("Imds", t, 1_250, None),
            request(
                "AssignPrivateIpAddresses",
                t,
                1_900,
                Some("RequestLimitExceeded"),
            ),
            request("AssignPrivateIpAddresses", t, 3_000, None),
        ];
        let calls = Calls::from_log(&log);
        assert_eq!(calls.limited, 7, "IMDS is not an EC2 call");
        assert_eq!(calls.throttled, 1);
        assert_eq!(
            calls.by_action,
            BTreeMap::from([
                ("AssignPrivateIpAddresses".to_owned(), 2),
                ("AttachNetworkInterface".to_owned(), 1),
                ("CreateNetworkInterface".to_owned(), 1),
                ("DescribeNetworkInterfaces".to_owned(), 2),
                ("ModifyNetworkInterfaceAttribute".to_owned(), 1),
            ])
        );
        // The second from 1.05 s holds four calls (to 1.9 s); none holds more.
        assert_eq!(calls.peak_per_second, 4);
    }

    #[test]
    fn an_empty_log_has_no_calls() {
        assert_eq!(Calls::from_log(&[]), Calls::default());
    }
}
