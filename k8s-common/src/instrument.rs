//! Times every request of a `kube::Client` (the agent's and the operator's): a tower layer on the client's service
//! stack that classifies the request (verb and resource, from the method, path and `watch`
//! query) and records its duration and response code in [`KubeApiMetrics`]. Classification is
//! by fixed lists, so label values stay bounded whatever the path holds (names, namespaces).

use std::{
    pin::Pin,
    task::{Context, Poll},
    time::Instant,
};

use http::{Method, Request, Response, Uri};

use crate::api_metrics::KubeApiMetrics;

/// The resources weft's programs talk about; anything else is `other`.
const RESOURCES: [&str; 12] = [
    "nodes",
    "pods",
    "namespaces",
    "events",
    "ciliumnodes",
    "ciliumnodes/status",
    "ciliumpodippools",
    "ciliumnodeconfigs",
    "ciliumendpoints",
    "ciliumidentities",
    "customresourcedefinitions",
    "leases",
];

/// The verb and resource of a request, e.g. `("update", "ciliumnodes/status")`.
#[must_use]
pub fn classify(method: &Method, uri: &Uri) -> (&'static str, &'static str) {
    let segments: Vec<&str> = uri.path().split('/').filter(|s| !s.is_empty()).collect();
    // /api/<version>/… or /apis/<group>/<version>/…
    let rest = match segments.first() {
        Some(&"api") => segments.get(2..),
        Some(&"apis") => segments.get(3..),
        _ => None,
    }
    .unwrap_or_default();
    // namespaces/<ns>/<resource>/… is namespaced; namespaces[/<name>] is the resource itself.
    let rest = match rest {
        ["namespaces", _, resource, tail @ ..] => {
            let mut r = vec![*resource];
            r.extend(tail);
            r
        }
        other => other.to_vec(),
    };
    let (resource, name, sub) = (rest.first(), rest.get(1), rest.get(2));
    let full = match (resource, sub) {
        (Some(r), Some(s)) => format!("{r}/{s}"),
        (Some(r), None) => (*r).to_owned(),
        (None, _) => String::new(),
    };
    let resource = RESOURCES
        .iter()
        .find(|known| **known == full)
        .copied()
        .unwrap_or("other");
    let watch = uri
        .query()
        .is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"));
    let verb = match *method {
        Method::GET if watch => "watch",
        Method::GET if name.is_some() => "get",
        Method::GET => "list",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE => "delete",
        _ => "other",
    };
    (verb, resource)
}

/// The client service wrapped with timing.
#[derive(Clone, Debug)]
pub struct Timed<S> {
    inner: S,
    metrics: KubeApiMetrics,
}

impl<S> Timed<S> {
    /// Wrap `inner`, recording into `metrics`.
    pub const fn new(inner: S, metrics: KubeApiMetrics) -> Self {
        Self { inner, metrics }
    }
}

impl<S, ReqBody, ResBody> tower::Service<Request<ReqBody>> for Timed<S>
where
    S: tower::Service<Request<ReqBody>, Response = Response<ResBody>>,
    S::Future: Send + 'static,
    S::Error: 'static,
    ResBody: 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let (verb, resource) = classify(request.method(), request.uri());
        let metrics = self.metrics.clone();
        let start = Instant::now();
        let answer = self.inner.call(request);
        Box::pin(async move {
            let answer = answer.await;
            let code = answer.as_ref().ok().map(|r| r.status().as_u16());
            metrics.observe(verb, resource, code, start.elapsed());
            answer
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(method: &Method, uri: &str) -> (&'static str, &'static str) {
        classify(method, &uri.parse().expect("uri"))
    }

    #[test]
    fn requests_map_to_bounded_verbs_and_resources() {
        let cases = [
            (Method::GET, "/api/v1/nodes/node-a", ("get", "nodes")),
            (
                Method::GET,
                "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-a",
                ("list", "pods"),
            ),
            (
                Method::GET,
                "/api/v1/pods?fieldSelector=x&watch=true&resourceVersion=5",
                ("watch", "pods"),
            ),
            (Method::GET, "/api/v1/namespaces", ("list", "namespaces")),
            (
                Method::GET,
                "/api/v1/namespaces/mars",
                ("get", "namespaces"),
            ),
            (
                Method::PUT,
                "/apis/cilium.io/v2/ciliumnodes/node-a/status",
                ("update", "ciliumnodes/status"),
            ),
            (
                Method::POST,
                "/apis/cilium.io/v2/ciliumnodes",
                ("create", "ciliumnodes"),
            ),
            (
                Method::GET,
                "/apis/cilium.io/v2alpha1/ciliumpodippools?watch=1",
                ("watch", "ciliumpodippools"),
            ),
            (
                Method::POST,
                "/api/v1/namespaces/default/events",
                ("create", "events"),
            ),
            (
                Method::PATCH,
                "/api/v1/namespaces/default/pods/web/status",
                ("patch", "other"),
            ),
            (Method::GET, "/version", ("list", "other")),
        ];
        for (method, uri, expected) in cases {
            assert_eq!(of(&method, uri), expected, "{method} {uri}");
        }
    }
}
