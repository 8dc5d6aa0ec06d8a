//! Endpoint metrics: the endpoints of this node by state, read at scrape time from the
//! endpoint records (`ready`: wired and programmed; `creating`: an ADD in progress or cut
//! short; `disconnecting`: a DEL answered whose veth or record is still being removed). The
//! state values are Cilium's endpoint states of the same meaning.

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{family::Family, gauge::Gauge},
    registry::Registry,
};

/// `state` of an endpoint.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabels {
    /// `ready`, `creating` or `disconnecting`.
    pub state: &'static str,
}

/// How many endpoints are in each state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EndpointCounts {
    /// Wired and programmed.
    pub ready: usize,
    /// ADD in progress (or cut short by a crash, undone at the next start).
    pub creating: usize,
    /// DEL answered, the rest still being removed.
    pub disconnecting: usize,
}

/// The endpoint part of [`super::Metrics`].
#[derive(Debug, Default)]
pub struct EndpointMetrics {
    endpoints: Family<StateLabels, Gauge>,
}

impl EndpointMetrics {
    /// Register the endpoint metrics in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "endpoints",
            "Endpoints (pods wired by this agent) by state",
            self.endpoints.clone(),
        );
    }

    /// Copy fresh counts.
    pub fn set(&self, counts: EndpointCounts) {
        for (state, n) in [
            ("ready", counts.ready),
            ("creating", counts.creating),
            ("disconnecting", counts.disconnecting),
        ] {
            self.endpoints
                .get_or_create(&StateLabels { state })
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
    }
}
